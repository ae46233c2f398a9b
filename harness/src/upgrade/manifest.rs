//! The manifest of an upgrade fixture: what the old release's cluster held when its data
//! directories were archived, as `observe` reads it back, so that a later build started on
//! the same directories can be compared with it field by field.
//!
//! Only names with the fixture's prefix (`fx-`) are kept, and only what a build must not
//! change when it loads old data: records with their offsets, batches with their codec and
//! producer fields, offsets of every kind, transactional and idempotent producer state,
//! consumer-group offsets, SCRAM users, ACLs, quotas and dynamic configs. Defaults are left
//! out on purpose (a newer build may add configs); so is anything a clock moves.
//!
//! Values that a line of text says best (a batch, an ACL binding, a quota) are kept as one
//! string each, so the JSON file reads as a list and a difference names the line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Topics, groups and transactional ids the fixture wrote start with this.
pub const FIXTURE_PREFIX: &str = "fx-";

/// The manifest file beside the node archives.
pub const MANIFEST_FILE: &str = "manifest.json";

/// A fixture: where it came from, how its nodes were run, and what they held.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// The release that wrote the data (`scripts/release-binary.sh` VERSION) and its commit.
    pub release: String,
    pub commit: String,
    /// How the data was written, step by step (stock tool and what it did), for a reader.
    pub written_by: Vec<String>,
    /// `--config` of every node (beside the listeners and ports, which `fixture` fixes).
    pub node_configs: BTreeMap<String, String>,
    /// The node archives, by node id.
    pub archives: BTreeMap<u64, String>,
    pub state: ClusterState,
}

/// What a cluster holds of the fixture's data; `observe` reads it, the test compares it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClusterState {
    /// Every `fx-` topic Metadata lists.
    pub topics: BTreeMap<String, TopicState>,
    /// Topics the fixture deleted, as Metadata answers for them (the error's name).
    pub deleted_topics: BTreeMap<String, String>,
    /// Every `fx-` group ListGroups lists.
    pub groups: BTreeMap<String, GroupState>,
    /// DescribeTransactions of the fixture's transactional ids.
    pub transactions: BTreeMap<String, String>,
    /// SCRAM credentials by user: "MECHANISM iterations N".
    pub scram_users: BTreeMap<String, Vec<String>>,
    /// Every ACL binding: "RESOURCE name PATTERN principal host OPERATION PERMISSION".
    pub acls: Vec<String>,
    /// Every client quota: "entity=name,... key=value".
    pub quotas: Vec<String>,
    /// Dynamic broker configs: "" is the cluster default, "N" broker N; "key=value (source)".
    pub broker_configs: BTreeMap<String, Vec<String>>,
}

/// One topic: its dynamic configs and its partitions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TopicState {
    /// Dynamic topic configs only: "key=value".
    pub configs: Vec<String>,
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// One partition, read back in full.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartitionState {
    /// ListOffsets earliest, latest (read_uncommitted: the high watermark) and latest under
    /// read_committed (the last stable offset).
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// Every batch Fetch returns from the log start: "base..last codec [transactional]
    /// [control] pid P epoch E seq S".
    pub batches: Vec<String>,
    /// Every data record (read_uncommitted, control records left out): "offset value".
    pub records: Vec<String>,
    /// What a read_committed librdkafka consumer returns: "offset value".
    pub read_committed: Vec<String>,
    /// DescribeProducers: "pid P epoch E last_sequence S last_timestamp T txn_start O".
    pub producers: Vec<String>,
}

/// One consumer group: ListGroups' state and protocol type, and its committed offsets.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GroupState {
    pub state: String,
    pub protocol_type: String,
    /// "topic/partition" → "offset" (with " metadata …" when the commit carried some).
    pub offsets: BTreeMap<String, String>,
}

impl Manifest {
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// Lines that differ between `expected` and `seen`, as JSON paths with both values; empty
/// when they are equal. At most `limit` lines, then a count of the rest.
pub fn differences(expected: &ClusterState, seen: &ClusterState, limit: usize) -> Vec<String> {
    let (expected, seen) = (to_value(expected), to_value(seen));
    let mut out = Vec::new();
    diff_values("state", &expected, &seen, &mut out);
    if out.len() > limit {
        let rest = out.len() - limit;
        out.truncate(limit);
        out.push(format!("... and {rest} more"));
    }
    out
}

fn to_value(state: &ClusterState) -> Value {
    serde_json::to_value(state).expect("a ClusterState is plain data")
}

fn diff_values(path: &str, expected: &Value, seen: &Value, out: &mut Vec<String>) {
    match (expected, seen) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                diff_values(&format!("{path}.{key}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.iter().chain(b).all(Value::is_string) => {
            diff_lines(path, a, b, out);
        }
        _ if expected != seen => out.push(format!("{path}: expected {expected}, found {seen}")),
        _ => {}
    }
}

/// Lists of lines: which are missing and which are extra (a changed line shows as both).
fn diff_lines(path: &str, expected: &[Value], seen: &[Value], out: &mut Vec<String>) {
    let count = |lines: &[Value]| {
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for line in lines {
            *counts.entry(line.as_str().unwrap_or_default().to_string()).or_default() += 1;
        }
        counts
    };
    let (a, b) = (count(expected), count(seen));
    let mut text = String::new();
    for (line, n) in &a {
        let m = b.get(line).copied().unwrap_or(0);
        if m < *n {
            let _ = write!(text, "\n    missing {}x: {line}", n - m);
        }
    }
    for (line, n) in &b {
        let m = a.get(line).copied().unwrap_or(0);
        if m < *n {
            let _ = write!(text, "\n    extra {}x: {line}", n - m);
        }
    }
    if text.is_empty() && expected != seen {
        text = "\n    same lines in another order".to_string();
    }
    if !text.is_empty() {
        out.push(format!("{path}:{text}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_path_and_the_lines() {
        let mut a = ClusterState {
            acls: vec!["TOPIC fx-a LITERAL User:x * READ ALLOW".into()],
            ..Default::default()
        };
        a.topics.insert("fx-t".into(), TopicState::default());
        let mut b = a.clone();
        assert!(differences(&a, &b, 10).is_empty());
        b.acls = vec!["TOPIC fx-a LITERAL User:x * WRITE ALLOW".into()];
        b.topics.get_mut("fx-t").unwrap().partitions.insert(0, PartitionState::default());
        let d = differences(&a, &b, 10);
        assert_eq!(d.len(), 2, "{d:#?}");
        assert!(
            d[0].starts_with("state.acls:") && d[0].contains("missing 1x: TOPIC fx-a LITERAL User:x * READ")
        );
        assert!(d[0].contains("extra 1x: TOPIC fx-a LITERAL User:x * WRITE"), "{d:#?}");
        assert!(d[1].starts_with("state.topics.fx-t.partitions.0: expected null"), "{d:#?}");
    }

    #[test]
    fn reordered_lines_are_a_difference() {
        let a = ClusterState { quotas: vec!["a".into(), "b".into()], ..Default::default() };
        let mut b = a.clone();
        b.quotas.reverse();
        assert_eq!(
            differences(&a, &b, 10),
            vec!["state.quotas:\n    same lines in another order".to_string()]
        );
    }
}
