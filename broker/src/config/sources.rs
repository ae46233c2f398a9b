//! Where a broker config's value comes from, in the order later ones win: the built-in
//! default, the TOML file (`--config-file`, else `onelog.toml` in the working directory if it
//! exists), an `ONELOG_*` environment variable, a command-line flag.
//!
//! The file's keys are Kafka's broker property names. TOML reads a bare dotted key
//! (`log.retention.ms = 1000`) as nested tables, so the file is flattened back into dotted
//! names: `log.retention.ms = 1000`, `"log.retention.ms" = 1000` and a `[log]` table holding
//! `retention.ms = 1000` all set the same config. Every value remembers its origin so that an
//! error can name the file and line, or the variable, or the flag.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// Read when `--config-file` is not given, if it exists in the working directory.
pub const DEFAULT_FILE: &str = "onelog.toml";

/// Where one value was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    File { path: PathBuf, line: usize },
    Env(String),
    Flag,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::File { path, line } => write!(f, "{} line {line}", path.display()),
            Origin::Env(name) => write!(f, "environment {name}"),
            Origin::Flag => write!(f, "command line"),
        }
    }
}

/// One value as given: its key, its text, where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// The environment variable that sets `key`: `ONELOG_` and the key in upper case with `.` and
/// `-` as `_`; onelog's own keys drop their `onelog.` prefix (`onelog.request.read.timeout.ms`
/// is `ONELOG_REQUEST_READ_TIMEOUT_MS`).
pub fn env_name(key: &str) -> String {
    let bare = key.strip_prefix("onelog.").unwrap_or(key);
    format!("ONELOG_{}", bare.to_ascii_uppercase().replace(['.', '-'], "_"))
}

/// The file to read: the one named (it must exist), else `onelog.toml` here if present.
pub fn file_to_read(named: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
    match named {
        Some(path) if !path.is_file() => bail!("--config-file {}: no such file", path.display()),
        Some(path) => Ok(Some(path.to_path_buf())),
        None => Ok(Path::new(DEFAULT_FILE).is_file().then(|| PathBuf::from(DEFAULT_FILE))),
    }
}

/// Every value the file sets, flattened to dotted keys, in file order.
pub fn read_file(path: &Path) -> anyhow::Result<Vec<Given>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_file(path, &text)
}

/// [`read_file`] on text already read. A syntax error names the line and column (toml_edit's
/// message); a value TOML can hold but a broker config cannot (a table inside an array, a
/// date) names its key and line.
pub fn parse_file(path: &Path, text: &str) -> anyhow::Result<Vec<Given>> {
    let document = toml_edit::Document::parse(text).map_err(|e| {
        let message = e.to_string();
        // TOML reads `max.connections = 1` as a value that `max.connections.per.ip` cannot
        // then extend; Kafka has several such pairs.
        let hint = if message.contains("extend") {
            "\n(a key that is also the start of another key must be quoted: \"max.connections\" = 100)"
        } else {
            ""
        };
        anyhow::anyhow!("{}: {}{hint}", path.display(), message.trim_end())
    })?;
    let mut out = Vec::new();
    flatten(path, text, "", document.as_table(), &mut out)?;
    Ok(out)
}

fn flatten(
    path: &Path,
    text: &str,
    prefix: &str,
    table: &dyn toml_edit::TableLike,
    out: &mut Vec<Given>,
) -> anyhow::Result<()> {
    for (key, item) in table.iter() {
        let dotted = if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
        let line = line_of(text, item.span().or_else(|| table.key(key).and_then(|k| k.span())));
        let origin = || Origin::File { path: path.to_path_buf(), line };
        if let Some(inner) = item.as_table_like() {
            flatten(path, text, &dotted, inner, out)?;
            continue;
        }
        let value = item.as_value().and_then(scalar_text).with_context(|| {
            format!("{dotted} ({}): not a number, boolean, string or list of them", origin())
        })?;
        out.push(Given { key: dotted, value, origin: origin() });
    }
    Ok(())
}

/// A scalar as the text `--config key=value` would give; an array of scalars as Kafka's
/// comma-separated list.
fn scalar_text(value: &toml_edit::Value) -> Option<String> {
    use toml_edit::Value;
    match value {
        Value::String(s) => Some(s.value().clone()),
        Value::Integer(i) => Some(i.value().to_string()),
        Value::Float(f) => Some(f.value().to_string()),
        Value::Boolean(b) => Some(b.value().to_string()),
        Value::Array(items) => {
            let parts: Option<Vec<String>> = items
                .iter()
                .map(|v| match v {
                    Value::Array(_) | Value::InlineTable(_) => None,
                    v => scalar_text(v),
                })
                .collect();
            Some(parts?.join(","))
        }
        Value::Datetime(_) | Value::InlineTable(_) => None,
    }
}

/// The 1-based line of a byte offset (the file's first line when toml_edit kept no span).
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> usize {
    let start = span.map_or(0, |s| s.start).min(text.len());
    text.as_bytes()[..start].iter().filter(|b| **b == b'\n').count() + 1
}

/// The `ONELOG_*` variables set for `keys`.
pub fn from_env<'a>(
    keys: impl Iterator<Item = &'a str>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<Given> {
    keys.filter_map(|key| {
        let name = env_name(key);
        lookup(&name).map(|value| Given { key: key.to_string(), value, origin: Origin::Env(name) })
    })
    .collect()
}

/// `--config key=value` flags.
pub fn from_flags(items: &[String]) -> anyhow::Result<Vec<Given>> {
    items
        .iter()
        .map(|item| {
            let (key, value) =
                item.split_once('=').with_context(|| format!("--config {item}: expected key=value"))?;
            Ok(Given { key: key.trim().to_string(), value: value.to_string(), origin: Origin::Flag })
        })
        .collect()
}

#[cfg(test)]
#[path = "sources_tests.rs"]
mod tests;
