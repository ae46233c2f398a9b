//! All partition logs of this node, keyed by topic id and partition, and the executor of the
//! [`Effect`]s that apply produces.
//!
//! Directories are named by topic id (`partitions/<topic-id-hex>/<partition>/`), not topic
//! name, so a topic deleted and re-created under the same name never sees old files.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::BrokerConfig;
use crate::fault;
use onelog_state::BrokerState;
use onelog_state::Effect;

pub type SharedLog = Arc<Mutex<super::partition_log::PartitionLog>>;

pub struct Partitions {
    root: PathBuf,
    segment_bytes_default: u64,
    logs: BTreeMap<([u8; 16], i32), SharedLog>,
    /// Segment size per topic, from its `segment.bytes` config.
    segment_bytes: BTreeMap<[u8; 16], u64>,
    /// This node's broker id, for its dynamic `log.segment.bytes`.
    node_id: i32,
    /// `DynamicConfigs::changes` when `segment_bytes` was last computed: an alteration of
    /// `segment.bytes` or `log.segment.bytes` sizes the segments rolled after it.
    configs_seen: u64,
}

fn hex(id: &[u8; 16]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

impl Partitions {
    /// Opens every partition of `state`, truncated to the checkpointed offsets, and removes
    /// directories of topics the checkpoint does not know (the Raft log re-creates them).
    pub fn open(root: &Path, state: &BrokerState, config: &BrokerConfig) -> io::Result<Partitions> {
        std::fs::create_dir_all(root)?;
        let segment_bytes_default = config.settings.log_segment_bytes;
        let mut partitions = Partitions {
            root: root.to_path_buf(),
            segment_bytes_default,
            logs: BTreeMap::new(),
            segment_bytes: BTreeMap::new(),
            node_id: config.node_id,
            configs_seen: state.configs.changes,
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
            partitions.remember_segment_bytes(state, &topic.topic_id);
            for (p, ps) in topic.partitions.iter().enumerate() {
                let dir = partitions.dir(&topic.topic_id, p as i32);
                let log =
                    super::partition_log::PartitionLog::open(&dir, ps.log_start_offset, ps.log_end_offset)?;
                if log.log_end_offset().unwrap_or(ps.log_start_offset) < ps.log_end_offset {
                    tracing::error!(topic = %name, partition = p, expected = ps.log_end_offset,
                        found = ?log.log_end_offset(), "partition files end before the checkpoint");
                }
                partitions.logs.insert((topic.topic_id, p as i32), Arc::new(Mutex::new(log)));
            }
        }
        Ok(partitions)
    }

    fn dir(&self, topic_id: &[u8; 16], partition: i32) -> PathBuf {
        Self::dir_in(&self.root, topic_id, partition)
    }

    /// Where a partition's files live under a partitions root.
    pub fn dir_in(root: &Path, topic_id: &[u8; 16], partition: i32) -> PathBuf {
        root.join(hex(topic_id)).join(partition.to_string())
    }

    fn remember_segment_bytes(&mut self, state: &BrokerState, topic_id: &[u8; 16]) {
        let configured = state
            .topic_by_id(topic_id)
            .and_then(|(_, t)| t.configs.get("segment.bytes"))
            .and_then(|v| v.parse::<u64>().ok());
        let dynamic = state.configs.broker_value(self.node_id, "log.segment.bytes");
        let default = dynamic.and_then(|(v, _)| v.parse::<u64>().ok()).unwrap_or(self.segment_bytes_default);
        self.segment_bytes.insert(*topic_id, configured.unwrap_or(default).max(1024));
    }

    /// Recomputes every topic's segment size after a config alteration.
    fn follow_config_changes(&mut self, state: &BrokerState) {
        if state.configs.changes == self.configs_seen {
            return;
        }
        self.configs_seen = state.configs.changes;
        let ids: Vec<[u8; 16]> = state.topics.values().map(|t| t.topic_id).collect();
        for id in ids {
            self.remember_segment_bytes(state, &id);
        }
    }

    pub fn get(&self, topic_id: &[u8; 16], partition: i32) -> Option<SharedLog> {
        self.logs.get(&(*topic_id, partition)).cloned()
    }

    /// Performs the effects of one applied op. `state` is the state after the op.
    pub fn execute(&mut self, state: &BrokerState, effects: &[Effect]) -> io::Result<()> {
        self.follow_config_changes(state);
        let mut topics_written: Vec<[u8; 16]> = Vec::new();
        for effect in effects {
            match effect {
                Effect::CreatePartitionLog { topic_id, partition } => {
                    self.remember_segment_bytes(state, topic_id);
                    let log =
                        super::partition_log::PartitionLog::open(&self.dir(topic_id, *partition), 0, 0)?;
                    self.logs.insert((*topic_id, *partition), Arc::new(Mutex::new(log)));
                }
                Effect::Append { topic_id, partition, batch } => {
                    if !topics_written.contains(topic_id) {
                        if !topics_written.is_empty() {
                            fault::point("crash-mid-apply-multi-topic");
                        }
                        topics_written.push(*topic_id);
                    }
                    let segment_bytes =
                        self.segment_bytes.get(topic_id).copied().unwrap_or(self.segment_bytes_default);
                    let log = self.get(topic_id, *partition).ok_or_else(|| missing(topic_id, *partition))?;
                    log.lock().expect("partition lock").append(batch, segment_bytes)?;
                }
                Effect::DeleteTopicLogs { topic_id } => self.delete_topic(topic_id)?,
                Effect::TrimLog { topic_id, partition, log_start_offset } => {
                    let log = self.get(topic_id, *partition).ok_or_else(|| missing(topic_id, *partition))?;
                    log.lock().expect("partition lock").trim(*log_start_offset)?;
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
        self.segment_bytes.remove(topic_id);
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
