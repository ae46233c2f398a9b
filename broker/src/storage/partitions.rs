//! All partition logs of this node, keyed by topic id and partition, and the executor of the
//! [`Effect`]s that apply produces.
//!
//! Directories are named by topic id (`partitions/<topic-id-hex>/<partition>/`), not topic
//! name, so a topic deleted and re-created under the same name never sees old files.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::locate::LocatedBatches;
use super::partition_log::{PartitionLog, SegmentPolicy};
use super::reads::LogFiles;
use crate::config::BrokerConfig;
use crate::{fatal, fault};
use onelog_state::BrokerState;
use onelog_state::Effect;

pub type SharedLog = Arc<PartitionLock>;

/// One partition's log behind its lock. A poisoned lock (a panic while it was held: the log
/// may be half-appended or half-trimmed) is a broken invariant and stops the node through
/// `fatal`, as the applied state's lock does (`raft::applied`), never a panic in every later
/// Fetch, ListOffsets or apply of that partition.
pub struct PartitionLock {
    /// The partition's directory, for the message.
    dir: PathBuf,
    log: Mutex<PartitionLog>,
}

impl PartitionLock {
    pub(crate) fn new(dir: PathBuf, log: PartitionLog) -> SharedLog {
        Arc::new(PartitionLock { dir, log: Mutex::new(log) })
    }

    /// The log, locked; stops the node if the lock is poisoned.
    pub fn lock(&self) -> MutexGuard<'_, PartitionLog> {
        self.log.lock().unwrap_or_else(|_| {
            fatal::invariant(&format!("the lock of partition log {} is poisoned", self.dir.display()))
        })
    }
}

pub struct Partitions {
    root: PathBuf,
    policy_default: SegmentPolicy,
    /// Where journaled segments' batches are read (the Raft log's files).
    log_files: LogFiles,
    /// Whether new segments are journaled: their batches left in the Raft log (issue 31),
    /// once the data directory can no longer be opened by a build without journals
    /// (`raft::sm_store`'s gate).
    journaled: bool,
    logs: BTreeMap<([u8; 16], i32), SharedLog>,
    /// How each topic makes segments, from its `segment.bytes` and `preallocate` configs.
    policies: BTreeMap<[u8; 16], SegmentPolicy>,
    /// This node's broker id, for its dynamic `log.segment.bytes` and `log.preallocate`.
    node_id: i32,
    /// `DynamicConfigs::changes` when `policies` was last computed: an alteration of
    /// `segment.bytes` or `log.segment.bytes` sizes the segments rolled after it.
    configs_seen: u64,
    /// Partitions whose files ended before the checkpoint's end offset at open, judged once
    /// the entries above the checkpoint are applied again ([`Partitions::report_short_logs`]).
    short_at_open: Mutex<Vec<ShortLog>>,
}

/// A partition whose files ended before the checkpoint said at open.
#[derive(Debug)]
struct ShortLog {
    topic: String,
    topic_id: [u8; 16],
    partition: i32,
    /// The checkpoint's end offset, and the end the files had.
    expected: i64,
    found: Option<i64>,
}

impl ShortLog {
    /// The offsets `[from, to)` the files lack although a log starting at `start` (`None`: the
    /// topic is gone) retains them.
    fn missing(&self, start: Option<i64>) -> Option<(i64, i64)> {
        let start = start?;
        (start < self.expected).then(|| (self.found.unwrap_or(start).max(start), self.expected))
    }
}

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

impl Partitions {
    /// Opens every partition of `state`, truncated to the checkpointed offsets, and removes
    /// directories of topics the checkpoint does not know (the Raft log re-creates them).
    pub fn open(
        root: &Path,
        state: &BrokerState,
        config: &BrokerConfig,
        log_files: LogFiles,
    ) -> io::Result<Partitions> {
        std::fs::create_dir_all(root)?;
        let policy_default = SegmentPolicy {
            segment_bytes: config.settings.log_segment_bytes,
            preallocate: config.settings.log_preallocate,
            journaled: false,
        };
        let mut partitions = Partitions {
            root: root.to_path_buf(),
            policy_default,
            log_files,
            journaled: false,
            logs: BTreeMap::new(),
            policies: BTreeMap::new(),
            node_id: config.node_id,
            configs_seen: state.configs.changes,
            short_at_open: Mutex::default(),
        };
        let known: Vec<String> = state.topics.values().map(|t| hex(&t.topic_id)).collect();
        for entry in std::fs::read_dir(root)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            if !known.contains(&name) {
                tracing::info!(dir = %entry.path().display(), "removing partition files newer than the checkpoint");
                std::fs::remove_dir_all(entry.path())?;
            }
        }
        for (name, topic) in &state.topics {
            partitions.remember_policy(state, &topic.topic_id);
            for (p, ps) in topic.partitions.iter().enumerate() {
                let dir = partitions.dir(&topic.topic_id, p as i32);
                let log = PartitionLog::open(
                    &dir,
                    ps.log_start_offset,
                    ps.log_end_offset,
                    partitions.log_files.clone(),
                )?;
                if log.log_end_offset().unwrap_or(ps.log_start_offset) < ps.log_end_offset {
                    let short = ShortLog {
                        topic: name.clone(),
                        topic_id: topic.topic_id,
                        partition: p as i32,
                        expected: ps.log_end_offset,
                        found: log.log_end_offset(),
                    };
                    tracing::info!(
                        ?short,
                        "partition files end before the checkpoint; judged once the log above it is replayed"
                    );
                    partitions.short_at_open.get_mut().unwrap_or_else(|e| e.into_inner()).push(short);
                }
                partitions.logs.insert((topic.topic_id, p as i32), PartitionLock::new(dir, log));
            }
        }
        Ok(partitions)
    }

    /// Judges the partitions whose files ended before the checkpoint at open, against `state`
    /// once the entries above the checkpoint are applied again: records deleted after the
    /// checkpoint (DeleteRecords, retention) are gone from the files but not from the
    /// checkpoint, and replaying the deletion moves the log start past them. Only a log that
    /// still starts below the checkpoint's end misses records it should serve. Regression
    /// (issue 28's Streams soak): every restart logged this ERROR for Streams' repartition
    /// topics, which Streams purges with DeleteRecords.
    pub fn report_short_logs(&self, state: &BrokerState) {
        let shorts = std::mem::take(&mut *self.short_at_open.lock().unwrap_or_else(|e| e.into_inner()));
        for short in shorts {
            let start = state
                .topics
                .get(&short.topic)
                .filter(|t| t.topic_id == short.topic_id)
                .and_then(|t| t.partitions.get(short.partition as usize))
                .map(|ps| ps.log_start_offset);
            match short.missing(start) {
                Some((missing_from, missing_to)) => {
                    tracing::error!(topic = %short.topic, partition = short.partition, missing_from,
                        missing_to, "partition files end before the checkpoint: records the log still retains are missing");
                }
                None => tracing::info!(topic = %short.topic, partition = short.partition,
                    "partition files that ended before the checkpoint held only records deleted since"),
            }
        }
    }

    fn dir(&self, topic_id: &[u8; 16], partition: i32) -> PathBuf {
        Self::dir_in(&self.root, topic_id, partition)
    }

    /// Where a partition's files live under a partitions root.
    pub fn dir_in(root: &Path, topic_id: &[u8; 16], partition: i32) -> PathBuf {
        root.join(hex(topic_id)).join(partition.to_string())
    }

    /// A topic's config `key`, else this node's dynamic `broker_key`, parsed.
    fn configured<T: std::str::FromStr>(
        &self,
        state: &BrokerState,
        topic_id: &[u8; 16],
        key: &str,
        broker_key: &str,
    ) -> Option<T> {
        let topic = state.topic_by_id(topic_id).and_then(|(_, t)| t.configs.get(key));
        topic.and_then(|v| v.trim().parse().ok()).or_else(|| {
            state.configs.broker_value(self.node_id, broker_key).and_then(|(v, _)| v.trim().parse().ok())
        })
    }

    fn remember_policy(&mut self, state: &BrokerState, topic_id: &[u8; 16]) {
        let segment_bytes = self
            .configured(state, topic_id, "segment.bytes", "log.segment.bytes")
            .unwrap_or(self.policy_default.segment_bytes);
        let preallocate = self
            .configured(state, topic_id, "preallocate", "log.preallocate")
            .unwrap_or(self.policy_default.preallocate);
        let journaled = false;
        self.policies.insert(
            *topic_id,
            SegmentPolicy { segment_bytes: segment_bytes.max(1024), preallocate, journaled },
        );
    }

    /// Whether new segments are journaled from now on (their batches left in the Raft log).
    pub fn set_journaled(&mut self, journaled: bool) {
        if journaled != self.journaled {
            tracing::info!(
                journaled,
                "partition segments rolled from now on leave their batches in the Raft log"
            );
        }
        self.journaled = journaled;
    }

    /// Bytes of batches all partitions keep per Raft log segment (by first index).
    pub fn log_segment_bytes(&self) -> BTreeMap<u64, u64> {
        let mut bytes = BTreeMap::new();
        for log in self.logs.values() {
            for (segment, n) in log.lock().log_bytes() {
                *bytes.entry(segment).or_default() += n;
            }
        }
        bytes
    }

    /// Recomputes every topic's segment size after a config alteration.
    fn follow_config_changes(&mut self, state: &BrokerState) {
        if state.configs.changes == self.configs_seen {
            return;
        }
        self.configs_seen = state.configs.changes;
        let ids: Vec<[u8; 16]> = state.topics.values().map(|t| t.topic_id).collect();
        for id in ids {
            self.remember_policy(state, &id);
        }
    }

    pub fn get(&self, topic_id: &[u8; 16], partition: i32) -> Option<SharedLog> {
        self.logs.get(&(*topic_id, partition)).cloned()
    }

    /// Performs the effects of one applied op. `state` is the state after the op; `located`
    /// says where the entry's batches lie in the Raft log.
    pub fn execute(
        &mut self,
        state: &BrokerState,
        effects: &[Effect],
        located: &LocatedBatches,
    ) -> io::Result<()> {
        self.follow_config_changes(state);
        let mut topics_written: Vec<[u8; 16]> = Vec::new();
        let mut partitions_written: Vec<([u8; 16], i32)> = Vec::new();
        for effect in effects {
            match effect {
                Effect::CreatePartitionLog { topic_id, partition } => {
                    self.remember_policy(state, topic_id);
                    let dir = self.dir(topic_id, *partition);
                    let log = PartitionLog::open(&dir, 0, 0, self.log_files.clone())?;
                    self.logs.insert((*topic_id, *partition), PartitionLock::new(dir, log));
                }
                Effect::Append { topic_id, partition, batch } => {
                    if !topics_written.contains(topic_id) {
                        if !topics_written.is_empty() {
                            fault::point("crash-mid-apply-multi-topic");
                        }
                        topics_written.push(*topic_id);
                    }
                    if !partitions_written.contains(&(*topic_id, *partition)) {
                        if !partitions_written.is_empty() {
                            fault::point("crash-between-partitions-of-an-entry");
                        }
                        partitions_written.push((*topic_id, *partition));
                    }
                    let policy = self.policies.get(topic_id).copied().unwrap_or(self.policy_default);
                    let policy = SegmentPolicy { journaled: self.journaled, ..policy };
                    let log = self.get(topic_id, *partition).ok_or_else(|| missing(topic_id, *partition))?;
                    log.lock().append(batch, policy, located.find(batch))?;
                }
                Effect::DeleteTopicLogs { topic_id } => self.delete_topic(topic_id)?,
                Effect::TrimLog { topic_id, partition, log_start_offset } => {
                    let log = self.get(topic_id, *partition).ok_or_else(|| missing(topic_id, *partition))?;
                    log.lock().trim(*log_start_offset)?;
                }
            }
        }
        Ok(())
    }

    fn delete_topic(&mut self, topic_id: &[u8; 16]) -> io::Result<()> {
        let keys: Vec<_> =
            self.logs.range((*topic_id, i32::MIN)..=(*topic_id, i32::MAX)).map(|(k, _)| *k).collect();
        for key in keys {
            self.logs.remove(&key);
        }
        self.policies.remove(topic_id);
        let dir = self.root.join(hex(topic_id));
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every partition log, for checkpoint flushes.
    pub fn all(&self) -> Vec<SharedLog> {
        self.logs.values().cloned().collect()
    }
}

fn missing(topic_id: &[u8; 16], partition: i32) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no partition log for {}-{partition}", hex(topic_id)))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Set in the child process that poisons a partition lock.
    const CHILD: &str = "ONELOG_TEST_POISONED_PARTITION_LOCK";
    const NAME: &str =
        "storage::partitions::tests::a_poisoned_partition_lock_stops_the_node_with_exit_code_70";

    /// A panic while a partition's lock is held (here in another thread) leaves it poisoned;
    /// the next `lock` ends the process through `fatal` (exit code 70), never a panic. The
    /// exit is checked in a child process: this test binary run again on this one test.
    #[test]
    fn a_poisoned_partition_lock_stops_the_node_with_exit_code_70() {
        if std::env::var_os(CHILD).is_some() {
            let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).try_init();
            let dir = tempfile::tempdir().expect("tempdir");
            let log = PartitionLog::open(dir.path(), 0, 0, LogFiles::unattached()).expect("partition log");
            let lock = PartitionLock::new(dir.path().to_path_buf(), log);
            let holder = lock.clone();
            let panicked = std::thread::spawn(move || {
                let _held = holder.lock();
                panic!("a panic with the partition lock held");
            })
            .join();
            assert!(panicked.is_err() && lock.log.is_poisoned());
            let guard = lock.lock();
            unreachable!("locking a poisoned partition lock returned ({} bytes)", guard.total_bytes());
        }
        let exe = std::env::current_exe().expect("test binary");
        let output =
            Command::new(exe).args(["--exact", NAME, "--nocapture"]).env(CHILD, "1").output().expect("child");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(crate::fatal::EXIT_CODE), "child: {stderr}");
        assert!(stderr.contains("the lock of partition log"), "child: {stderr}");
    }

    /// Files that end at 20 of a checkpoint's 48: missing only while the log starts below 48.
    #[test]
    fn a_short_log_misses_records_only_if_the_log_still_starts_below_the_checkpoints_end() {
        let short =
            |found| ShortLog { topic: "t".into(), topic_id: [0; 16], partition: 0, expected: 48, found };
        assert_eq!(short(Some(20)).missing(Some(0)), Some((20, 48)), "nothing deleted since");
        assert_eq!(short(Some(20)).missing(Some(30)), Some((30, 48)), "deleted up to 30");
        assert_eq!(short(None).missing(Some(10)), Some((10, 48)), "no files at all");
        assert_eq!(short(Some(20)).missing(Some(48)), None, "deleted up to the checkpoint's end");
        assert_eq!(short(None).missing(Some(96)), None, "deleted past it");
        assert_eq!(short(Some(20)).missing(None), None, "the topic is gone");
    }
}
