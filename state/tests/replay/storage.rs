//! The partition files, as the effects describe them: a model of what storage does with the
//! leader's `Effect`s.
//!
//! It refuses effects a storage could not perform (an append not at the log end, a trim
//! backwards) and checks that the state's offsets and open transactions are what the files
//! say (what the storage's materialized view will hold), and that each marker ended its
//! transaction.

use std::collections::BTreeMap;

use kafka_compat::batch::parse_header;
use kafka_compat::control::marker_is_commit;
use onelog_state::command::Command;
use onelog_state::{BrokerState, Effect};

use crate::report::summarize_op;

#[derive(Default)]
pub(crate) struct StorageModel {
    partitions: BTreeMap<([u8; 16], i32), FilePartition>,
    /// Markers the last entry wrote, checked against the state after it.
    markers: Vec<MarkerSeen>,
}

#[derive(Default)]
struct FilePartition {
    log_start: i64,
    log_end: i64,
    /// Producer id → (first, last) offset of its transactional data since its last marker.
    open: BTreeMap<i64, (i64, i64)>,
}

struct MarkerSeen {
    topic_id: [u8; 16],
    partition: i32,
    producer_id: i64,
    offset: i64,
    commit: bool,
    /// The transaction's data on the partition.
    data: Option<(i64, i64)>,
}

impl StorageModel {
    /// Performs the leader's effects as a storage would, refusing any that a storage could
    /// not perform (an append not at the log end, a trim backwards).
    pub(crate) fn apply(&mut self, command: &Command, effects: &[Vec<Effect>]) -> Result<(), String> {
        self.markers.clear();
        for (index, effects) in effects.iter().enumerate() {
            for effect in effects {
                self.perform(effect)
                    .map_err(|e| format!("op {index} ({}): {e}", summarize_op(&command.ops[index])))?;
            }
        }
        Ok(())
    }

    fn perform(&mut self, effect: &Effect) -> Result<(), String> {
        match effect {
            Effect::CreatePartitionLog { topic_id, partition } => {
                if self.partitions.insert((*topic_id, *partition), FilePartition::default()).is_some() {
                    return Err(format!("CreatePartitionLog of existing {topic_id:?}-{partition}"));
                }
            }
            Effect::Append { topic_id, partition, batch } => {
                let file = self
                    .partitions
                    .get_mut(&(*topic_id, *partition))
                    .ok_or_else(|| format!("append to missing partition {partition} of {topic_id:?}"))?;
                let header =
                    parse_header(batch).map_err(|e| format!("appended batch does not parse: {e}"))?;
                if header.size_bytes != batch.len() || header.record_count != header.last_offset_delta + 1 {
                    return Err(format!("malformed appended batch {header:?} of {} bytes", batch.len()));
                }
                if header.base_offset != file.log_end {
                    return Err(format!(
                        "batch appended at {} to partition {partition} whose file ends at {}",
                        header.base_offset, file.log_end
                    ));
                }
                file.log_end = header.last_offset() + 1;
                if header.is_control() {
                    let commit = marker_is_commit(batch).ok_or("control batch is not a marker")?;
                    let data = file.open.remove(&header.producer_id);
                    self.markers.push(MarkerSeen {
                        topic_id: *topic_id,
                        partition: *partition,
                        producer_id: header.producer_id,
                        offset: header.base_offset,
                        commit,
                        data,
                    });
                } else if header.is_transactional() {
                    file.open.entry(header.producer_id).or_insert((header.base_offset, 0)).1 =
                        header.last_offset();
                }
            }
            Effect::DeleteTopicLogs { topic_id } => {
                let before = self.partitions.len();
                self.partitions.retain(|(id, _), _| id != topic_id);
                if self.partitions.len() == before {
                    return Err(format!("DeleteTopicLogs of unknown topic {topic_id:?}"));
                }
            }
            Effect::TrimLog { topic_id, partition, log_start_offset } => {
                let file = self
                    .partitions
                    .get_mut(&(*topic_id, *partition))
                    .ok_or_else(|| format!("trim of missing partition {partition} of {topic_id:?}"))?;
                if *log_start_offset <= file.log_start || *log_start_offset > file.log_end {
                    return Err(format!(
                        "trim to {log_start_offset} of a file spanning {}..{}",
                        file.log_start, file.log_end
                    ));
                }
                file.log_start = *log_start_offset;
            }
        }
        Ok(())
    }

    /// The state's offsets and open transactions must be what the files say, and each marker
    /// must have ended its transaction on its partition.
    pub(crate) fn check(&self, state: &BrokerState) -> Result<(), String> {
        let mut seen = 0;
        for (name, topic) in &state.topics {
            for (index, partition) in topic.partitions.iter().enumerate() {
                seen += 1;
                let file = self
                    .partitions
                    .get(&(topic.topic_id, index as i32))
                    .ok_or_else(|| format!("{name}-{index} exists but no effect created its log"))?;
                if (file.log_start, file.log_end) != (partition.log_start_offset, partition.log_end_offset) {
                    return Err(format!(
                        "{name}-{index}: state offsets {}..{} but the effects wrote {}..{}",
                        partition.log_start_offset, partition.log_end_offset, file.log_start, file.log_end
                    ));
                }
                let open: BTreeMap<i64, i64> =
                    file.open.iter().map(|(pid, (first, _))| (*pid, *first)).collect();
                if open != partition.open_txns {
                    return Err(format!(
                        "{name}-{index}: open transactions {:?} but the effects leave {open:?} open",
                        partition.open_txns
                    ));
                }
            }
        }
        if seen != self.partitions.len() {
            return Err(format!("{} partition logs for {seen} partitions", self.partitions.len()));
        }
        for marker in &self.markers {
            let Some((name, topic)) = state.topic_by_id(&marker.topic_id) else { continue };
            let Some(p) = topic.partitions.get(marker.partition as usize) else { continue };
            let at = format!(
                "{name}-{} marker at {} of producer {}",
                marker.partition, marker.offset, marker.producer_id
            );
            let Some((first, last)) = marker.data else {
                return Err(format!("{at}: the transaction wrote nothing there"));
            };
            if p.open_txns.contains_key(&marker.producer_id) {
                return Err(format!("{at}: the transaction is still open there"));
            }
            let indexed = p.aborted_txns.iter().find(|a| a.last_offset == marker.offset);
            if marker.commit {
                if indexed.is_some() {
                    return Err(format!("{at}: a commit is in the aborted index"));
                }
                let lso = p.last_stable_offset();
                let blocked = p.open_txns.values().any(|&f| f <= last);
                if lso <= last && !blocked {
                    return Err(format!("{at}: committed records up to {last} are not below the LSO {lso}"));
                }
            } else if indexed.is_none_or(|a| a.producer_id != marker.producer_id || a.first_offset != first) {
                return Err(format!(
                    "{at}: abort of {first}..={last} not indexed as such: {:?}",
                    p.aborted_txns
                ));
            }
        }
        Ok(())
    }
}
