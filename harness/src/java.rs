//! Runs the Java scenario drivers of `harness/java` (stock Apache Kafka clients and tools) as
//! child processes: to completion with a one-line JSON summary ([`run`]), to completion with
//! the tool's own text ([`run_text`]), or alongside the test as a [`JavaProcess`] whose JSON
//! lines arrive as timestamped events while it runs (a group member the test stops later).
//!
//! The classpath comes from `ONELOG_JAVA_CLASSPATH`, which `scripts/test.sh` exports after
//! `scripts/java-build.sh` built the module once for the whole run (nextest runs one process
//! per test, so no test builds it). Without it every call fails and says how to set it: a Java
//! scenario never passes by not running.
//!
//! The free functions run the default build (kafka-clients and kafka-tools 4.x). [`Clients`]
//! picks another client version: [`Clients::Kafka3`] is the same drivers built against
//! kafka-clients 3.9 (`scripts/java-build.sh --variant kafka3`, `ONELOG_JAVA3_CLASSPATH`).
//!
//! To diagnose a client, `ONELOG_JAVA_OPTS` adds JVM options to every Java process (e.g.
//! `-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer=debug`), and with
//! `ONELOG_JAVA_LOG_DIR` each [`JavaProcess`] also writes its whole stderr to
//! `<dir>/<class>-<pid>.log`, where only the tail is kept in memory.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The environment variable holding the drivers' classpath (module jar, then dependencies).
pub const CLASSPATH_ENV: &str = "ONELOG_JAVA_CLASSPATH";
/// The same for the drivers built against kafka-clients 3.9 ([`Clients::Kafka3`]).
pub const CLASSPATH3_ENV: &str = "ONELOG_JAVA3_CLASSPATH";
/// The kafka-clients and kafka-tools 4.4.0 build's classpath ([`Clients::Kafka44`]).
pub const CLASSPATH44_ENV: &str = "ONELOG_JAVA44_CLASSPATH";
/// The package of the drivers; a class name without a dot is taken from it.
pub const DRIVER_PACKAGE: &str = "dev.onelog.it";
/// Extra JVM options, split at whitespace (diagnosis only).
pub const JAVA_OPTS_ENV: &str = "ONELOG_JAVA_OPTS";
/// A directory that receives each [`JavaProcess`]'s whole stderr (diagnosis only).
pub const JAVA_LOG_DIR_ENV: &str = "ONELOG_JAVA_LOG_DIR";
/// Lines of a Java process's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 40;
/// Bytes of stderr kept in memory: a process logging at debug level must not grow the test.
const STDERR_KEPT_BYTES: usize = 1 << 20;
/// Pause between two looks at a running process's events or exit.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Which build of the drivers runs: the Apache Kafka client version on its classpath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clients {
    /// kafka-clients and kafka-tools 4.x, the pom's default (`ONELOG_JAVA_CLASSPATH`).
    Kafka4,
    /// kafka-clients 3.9.1: transactions v1 (AddPartitionsToTxn, EndTxn up to v4)
    /// (`ONELOG_JAVA3_CLASSPATH`).
    Kafka3,
    /// kafka-clients and kafka-tools 4.4.0: the tools of the newest release, e.g.
    /// `kafka-streams-groups.sh --reset-offsets` (`ONELOG_JAVA44_CLASSPATH`).
    Kafka44,
}

impl Clients {
    /// The environment variable holding this build's classpath.
    pub fn env(self) -> &'static str {
        match self {
            Clients::Kafka4 => CLASSPATH_ENV,
            Clients::Kafka3 => CLASSPATH3_ENV,
            Clients::Kafka44 => CLASSPATH44_ENV,
        }
    }

    /// The command that builds this variant and prints its classpath file.
    fn build_command(self) -> &'static str {
        match self {
            Clients::Kafka4 => "scripts/java-build.sh",
            Clients::Kafka3 => "scripts/java-build.sh --variant kafka3 -Dkafka.version=3.9.1",
            Clients::Kafka44 => "scripts/java-build.sh --variant kafka44 -Dkafka.version=4.4.0",
        }
    }

    /// The classpath from [`Self::env`]; an error naming the fix when it is unset.
    pub fn classpath(self) -> Result<String> {
        let env = self.env();
        match std::env::var(env) {
            Ok(cp) if !cp.trim().is_empty() => Ok(cp.trim().to_string()),
            _ => bail!(
                "{env} is not set: this test runs Java Kafka clients ({self:?}). Run scripts/test.sh, \
                 or `export {env}=$(cat $({}))`",
                self.build_command()
            ),
        }
    }

    /// `java -cp <classpath> <class> <args>`, stdin closed, stdout and stderr piped.
    pub fn command(self, class: &str, args: &[String]) -> Result<Command> {
        let class = if class.contains('.') { class.to_string() } else { format!("{DRIVER_PACKAGE}.{class}") };
        let mut cmd = Command::new("java");
        let opts = std::env::var(JAVA_OPTS_ENV).unwrap_or_default();
        cmd.args(opts.split_whitespace()).arg("-cp").arg(self.classpath()?).arg(class).args(args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        Ok(cmd)
    }

    /// Runs `class` to completion and returns its output; fails if it exits non-zero.
    pub fn run_text(self, class: &str, args: &[String]) -> Result<Output> {
        let out = self.command(class, args)?.output().with_context(|| format!("spawning java {class}"))?;
        let output = Output {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        if !out.status.success() {
            bail!(
                "java {class} {args:?} ({self:?}) exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                out.status,
                output.stdout,
                tail(&output.stderr)
            );
        }
        Ok(output)
    }

    /// Runs a driver to completion and returns the JSON of its last stdout line.
    pub fn run(self, class: &str, args: &[String]) -> Result<Value> {
        let output = self.run_text(class, args)?;
        let line = output.stdout.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
        serde_json::from_str(line)
            .with_context(|| format!("java {class}: last stdout line is not JSON: {line:?}"))
    }
}

/// The default build's classpath ([`Clients::classpath`] of [`Clients::Kafka4`]).
pub fn classpath() -> Result<String> {
    Clients::Kafka4.classpath()
}

/// [`Clients::command`] of the default build.
pub fn command(class: &str, args: &[String]) -> Result<Command> {
    Clients::Kafka4.command(class, args)
}

/// What a finished Java process printed.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

/// [`Clients::run_text`] of the default build.
pub fn run_text(class: &str, args: &[String]) -> Result<Output> {
    Clients::Kafka4.run_text(class, args)
}

/// [`Clients::run`] of the default build.
pub fn run(class: &str, args: &[String]) -> Result<Value> {
    Clients::Kafka4.run(class, args)
}

/// One JSON line a running process printed, with when the harness read it.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Instant,
    pub value: Value,
}

impl Event {
    /// The `"event"` field, or "" when there is none.
    pub fn kind(&self) -> &str {
        self.value.get("event").and_then(Value::as_str).unwrap_or_default()
    }
}

/// A Java driver running beside the test; killed on drop.
pub struct JavaProcess {
    class: String,
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Event>>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl JavaProcess {
    /// Spawns `class` of the default build; see [`Self::spawn_with`].
    pub fn spawn(class: &str, args: &[String]) -> Result<Self> {
        Self::spawn_with(Clients::Kafka4, class, args)
    }

    /// Spawns `class` of `clients`; its stdout lines become events, its stdin stays open for
    /// [`Self::send`].
    pub fn spawn_with(clients: Clients, class: &str, args: &[String]) -> Result<Self> {
        let mut child = clients
            .command(class, args)?
            .stdin(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning java {class}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("java stdout")?;
        let mut stderr_pipe = child.stderr.take().context("java stderr")?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = events.clone();
        let out_reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                sink.lock().expect("events lock").push(Event { at: Instant::now(), value });
            }
        });
        let err_sink = stderr.clone();
        let mut err_file = stderr_file(class, child.id())?;
        let err_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr_pipe.read(&mut buf) {
                if let Some(file) = err_file.as_mut() {
                    let _ = file.write_all(&buf[..n]);
                }
                let mut kept = err_sink.lock().expect("stderr lock");
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                if kept.len() > STDERR_KEPT_BYTES {
                    let cut = kept.len() - STDERR_KEPT_BYTES / 2;
                    let cut = (cut..kept.len()).find(|i| kept.is_char_boundary(*i)).unwrap_or(kept.len());
                    kept.drain(..cut);
                }
            }
        });
        let readers = vec![out_reader, err_reader];
        Ok(Self { class: class.to_string(), child, stdin, events, stderr, readers })
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<Event> {
        self.with_events(<[Event]>::to_vec)
    }

    /// `f` of the events so far, without copying them.
    pub fn with_events<T>(&self, f: impl FnOnce(&[Event]) -> T) -> T {
        f(&self.events.lock().expect("events lock"))
    }

    /// The last event of `kind`, if any.
    pub fn last(&self, kind: &str) -> Option<Event> {
        self.events.lock().expect("events lock").iter().rev().find(|e| e.kind() == kind).cloned()
    }

    /// Writes one line to the process's stdin.
    pub fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin already closed")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }

    /// Fails with the process's stderr if it has exited (a running member must not have died).
    pub fn check_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("java {} exited with {status}\n--- stderr ---\n{}", self.class, self.stderr_tail());
        }
        Ok(())
    }

    /// Sends "stop", closes stdin and waits up to `timeout` for exit 0; returns every event.
    pub fn stop(mut self, timeout: Duration) -> Result<Vec<Event>> {
        // A process that already exited cannot read the line; its exit status tells.
        let _ = self.send("stop");
        self.stdin = None;
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                bail!("java {} still running {timeout:?} after stop\n{}", self.class, self.stderr_tail());
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        if !status.success() {
            bail!("java {} exited with {status}\n--- stderr ---\n{}", self.class, self.stderr_tail());
        }
        Ok(self.events())
    }

    /// The last lines the process wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr.lock().expect("stderr lock"))
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if std::thread::panicking() {
                eprintln!("--- java {} stderr tail ---\n{}\n---", self.class, self.stderr_tail());
            }
        }
    }
}

/// The file a process's whole stderr goes to, when `ONELOG_JAVA_LOG_DIR` names a directory.
fn stderr_file(class: &str, pid: u32) -> Result<Option<std::fs::File>> {
    let Ok(dir) = std::env::var(JAVA_LOG_DIR_ENV) else { return Ok(None) };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {dir}"))?;
    let path = std::path::Path::new(&dir).join(format!("{class}-{pid}.log"));
    Ok(Some(std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?))
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n")
}

/// Runs Kafka's `kafka-consumer-groups.sh` (`ConsumerGroupCommand`, from kafka-tools) with
/// `--bootstrap-server bootstrap` and `args`.
pub fn consumer_groups(bootstrap: &str, args: &[&str]) -> Result<Output> {
    tool(CONSUMER_GROUP_COMMAND, bootstrap, args)
}

/// The class `kafka-consumer-groups.sh` runs.
pub const CONSUMER_GROUP_COMMAND: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

/// Runs Kafka's `kafka-transactions.sh` (`TransactionsCommand`, from kafka-tools) with
/// `--bootstrap-server bootstrap` and `args` (a subcommand and its options).
pub fn transactions(bootstrap: &str, args: &[&str]) -> Result<Output> {
    tool(TRANSACTIONS_COMMAND, bootstrap, args)
}

/// The class `kafka-transactions.sh` runs.
pub const TRANSACTIONS_COMMAND: &str = "org.apache.kafka.tools.TransactionsCommand";

/// Runs Kafka's `kafka-configs.sh` (`kafka.admin.ConfigCommand`, from kafka_2.13) with
/// `--bootstrap-server bootstrap` and `args`: whether it exited 0, and its stdout then stderr
/// (its refusals are what a test checks, so a failure is not an error here).
pub fn config_command(bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    tool_outcome(CONFIG_COMMAND, bootstrap, args)
}

/// Runs a tool `class` with `--bootstrap-server bootstrap` and `args`: whether it exited 0, and
/// its stdout then stderr (for tools whose refusals a test checks).
fn tool_outcome(class: &str, bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    let mut all = vec!["--bootstrap-server".to_string(), bootstrap.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    let out = command(class, &all)?.output().with_context(|| format!("spawning {class}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// The class `kafka-configs.sh` runs.
pub const CONFIG_COMMAND: &str = "kafka.admin.ConfigCommand";

/// Runs Kafka's `kafka-features.sh` (`FeatureCommand`, from kafka-tools) with
/// `--bootstrap-server bootstrap` and `args`: whether it exited 0, and its stdout then stderr.
pub fn feature_command(bootstrap: &str, args: &[&str]) -> Result<(bool, String)> {
    tool_outcome(FEATURE_COMMAND, bootstrap, args)
}

/// The class `kafka-features.sh` runs.
pub const FEATURE_COMMAND: &str = "org.apache.kafka.tools.FeatureCommand";

/// `kafka-features.sh describe`'s line for `feature` through `bootstrap`: (supported min,
/// supported max, finalized level, epoch).
pub fn described_feature(bootstrap: &str, feature: &str) -> Result<(i16, i16, i16, i64)> {
    let (ok, text) = feature_command(bootstrap, &["describe"])?;
    anyhow::ensure!(ok, "kafka-features describe failed: {text}");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("Feature: {feature}\t")))
        .with_context(|| format!("no line for {feature} in:\n{text}"))?;
    let field = |name: &str| -> Result<String> {
        let at = line.find(&format!("{name}: ")).with_context(|| format!("{name} in {line:?}"))?;
        Ok(line[at + name.len() + 2..].split('\t').next().unwrap_or_default().trim().to_string())
    };
    Ok((
        field("SupportedMinVersion")?.parse()?,
        field("SupportedMaxVersion")?.parse()?,
        field("FinalizedVersionLevel")?.parse()?,
        field("Epoch")?.parse()?,
    ))
}

/// A kafka-tools command of the default build: `class --bootstrap-server bootstrap args`.
pub fn tool(class: &str, bootstrap: &str, args: &[&str]) -> Result<Output> {
    let mut all = vec!["--bootstrap-server".to_string(), bootstrap.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    run_text(class, &all)
}

/// The rows of a column-aligned table a Kafka tool printed (`%-Ns` columns): the header is
/// the first line whose first word is `first_column`, and each following non-empty line is a
/// row (column name → trimmed cell, "" when blank: the tools leave HOST empty when the broker
/// does not know it). A cell runs from its header word's position to the next one's; a word
/// in parentheses belongs to the header before it ("COORDINATOR (ID)").
pub fn table(text: &str, first_column: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines().skip_while(|l| l.split_whitespace().next() != Some(first_column));
    let Some(header) = lines.next() else { return Vec::new() };
    let mut columns: Vec<(usize, String)> = Vec::new();
    let mut at = 0;
    for word in header.split_whitespace() {
        let start = at + header[at..].find(word).expect("a word of the header");
        at = start + word.len();
        match columns.last_mut() {
            Some((_, name)) if word.starts_with('(') => *name = format!("{name} {word}"),
            _ => columns.push((start, word.to_string())),
        }
    }
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|line| {
            let cell = |i: usize| {
                let from = columns[i].0.min(line.len());
                let to = columns.get(i + 1).map_or(line.len(), |c| c.0.min(line.len()));
                line.get(from..to).unwrap_or_default().trim().to_string()
            };
            (0..columns.len()).map(|i| (columns[i].1.clone(), cell(i))).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn table_cells_follow_header_positions() {
        let text = "\nGROUP  TOPIC  PARTITION  HOST       CLIENT-ID\n\
                    g      t      0                     c-1\n\
                    g      t      1          /10.0.0.1  c-2\n\n\
                    GROUP  COORDINATOR (ID)      STATE\n";
        let rows = table(text, "GROUP");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["HOST"], "");
        assert_eq!(rows[0]["CLIENT-ID"], "c-1");
        assert_eq!(rows[1]["HOST"], "/10.0.0.1");
        let state =
            table("GROUP  COORDINATOR (ID)      STATE\ng      127.0.0.1:9092  (1)   Stable\n", "GROUP");
        assert_eq!(state[0]["COORDINATOR (ID)"], "127.0.0.1:9092  (1)");
        assert_eq!(state[0]["STATE"], "Stable");
    }
}
