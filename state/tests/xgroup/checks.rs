//! What the simulation knows to be true, and the design's promises checked against it
//! (SCALING.md §8), numbered as there:
//! 1. an acknowledged write of a committed transaction is visible to read_committed once its
//!    group applied the decision, and nothing of a transaction not committed ever is; for a
//!    TxnOffsetCommit, its offset is stored (or a later one) once the decision applied, and an
//!    offset of a transaction not committed never is. What was applied to a topic deleted
//!    since went with it; its offsets must never come back;
//! 2. no instance gets two outcomes: a group writes a commit marker only for an instance its
//!    coordinator committed and listed it in, and an abort marker for a committed one only
//!    over data nobody acknowledged;
//! 3. once quiet, no participant holds an instance open and no decision waits (`main`);
//! 4. no batch applies in a group for an instance at or below the newest one whose decision
//!    that group applied;
//! 5. an EndTxn answered to a client decided its transaction as it asked, and a decision,
//!    once made, never changes;
//! 6. on every partition, no batch of a producer lies between an earlier instance's first
//!    batch and that instance's marker.

use std::collections::{BTreeMap, BTreeSet};

use kafka_compat::batch::parse_header;
use kafka_compat::control::marker_is_commit;
use onelog_state::effect::Effect;
use onelog_state::xgroup::{GroupId, Instance};
use onelog_state::BrokerState;

use crate::net::{Write, WriteId};

/// One write, as the simulation saw it.
#[derive(Debug, Clone)]
pub(crate) struct WriteInfo {
    pub write: Write,
    pub group: GroupId,
    pub acked: bool,
    /// Offset and instance, once applied.
    pub applied: Option<(i64, Instance)>,
    /// Applied to a topic deleted since: its data, or its pending or stored offsets, went with
    /// the topic, which no promise covers (Kafka drops them alike).
    pub deleted: bool,
}

type PartitionKey = (GroupId, String, i32);

#[derive(Default)]
pub(crate) struct Truth {
    pub writes: BTreeMap<WriteId, WriteInfo>,
    /// Coordinator decisions, as applied in the coordinator: never change.
    pub decisions: BTreeMap<Instance, bool>,
    /// The groups each decided instance listed as participants.
    pub listed: BTreeMap<Instance, BTreeSet<GroupId>>,
    /// (group, producer id) → the newest instance whose decision that group applied.
    pub fence: BTreeMap<(GroupId, i64), Instance>,
    /// (partition, producer id) → the instance with data and no marker there yet.
    pub open_on: BTreeMap<(PartitionKey, i64), Instance>,
    /// (partition, offset) → the write whose batch is there.
    pub at: BTreeMap<(PartitionKey, i64), WriteId>,
    /// Instance → the writes applied as part of it.
    pub of_instance: BTreeMap<Instance, Vec<WriteId>>,
    /// Applied writes whose visibility may still change: not decided, or decided and not yet
    /// applied (or held back by the last stable offset) in their group.
    pub unsettled: BTreeSet<WriteId>,
}

pub(crate) type Check = Result<(), String>;

impl Truth {
    /// A decision applied in the coordinator (check 5: never a second outcome).
    pub fn decided(&mut self, instance: Instance, commit: bool, listed: BTreeSet<GroupId>) -> Check {
        if let Some(before) = self.decisions.insert(instance, commit) {
            if before != commit {
                return Err(format!("check 5: instance {instance} decided {before} then {commit}"));
            }
        }
        self.listed.entry(instance).or_default().extend(listed);
        Ok(())
    }

    /// A participant applied a decision (or found it applied).
    pub fn fenced(&mut self, group: GroupId, instance: Instance) {
        let fence = self.fence.entry((group, instance.producer_id)).or_insert(instance);
        *fence = (*fence).max(instance);
    }

    /// A write applied at `offset` as part of `instance` (check 4 for remote writes).
    pub fn write_applied(&mut self, id: WriteId, offset: i64, instance: Instance, remote: bool) -> Check {
        let info = self.writes.get_mut(&id).expect("every write is recorded when sent");
        if remote {
            if let Some(fence) = self.fence.get(&(info.group, instance.producer_id)) {
                if instance <= *fence {
                    return Err(format!(
                        "check 4: write {id} applied in group {} for {instance}, at or below the applied decision of {fence}",
                        info.group
                    ));
                }
            }
        }
        info.applied = Some((offset, instance));
        self.of_instance.entry(instance).or_default().push(id);
        self.unsettled.insert(id);
        if info.write.offsets.is_none() {
            let key = (info.group, info.write.topic.clone(), info.write.partition);
            self.at.insert((key, offset), id);
        }
        Ok(())
    }

    /// The batches an entry wrote in `group` (checks 6 and 2).
    pub fn effects(&mut self, group: GroupId, state: &BrokerState, effects: &[Effect]) -> Check {
        for effect in effects {
            let Effect::Append { topic_id, partition, batch } = effect else { continue };
            let topic = state.topics.iter().find(|(_, t)| t.topic_id == *topic_id).map(|(n, _)| n.clone());
            let key = (group, topic.expect("a live topic"), *partition);
            let header = parse_header(batch).expect("apply writes valid batches");
            let producer = header.producer_id;
            if let Some(commit) = marker_is_commit(batch) {
                let Some(instance) = self.open_on.remove(&(key.clone(), producer)) else { continue };
                self.marker(&key, instance, commit)?;
                continue;
            }
            let Some(write) = self.at.get(&(key.clone(), header.base_offset)) else { continue };
            let (_, instance) = self.writes[write].applied.expect("recorded before its effects");
            match self.open_on.get(&(key.clone(), producer)) {
                Some(open) if *open != instance => {
                    return Err(format!(
                        "check 6: {key:?}: a batch of {instance} at {} while {open} has no marker yet",
                        header.base_offset
                    ))
                }
                _ => self.open_on.insert((key, producer), instance),
            };
        }
        Ok(())
    }

    /// A marker for `instance` on a partition (check 2).
    fn marker(&self, key: &PartitionKey, instance: Instance, commit: bool) -> Check {
        let decided = self.decisions.get(&instance).copied();
        let listed = self.listed.get(&instance).is_some_and(|l| l.contains(&key.0));
        let coordinator = coordinator_of(instance.producer_id);
        if commit && (decided != Some(true) || (key.0 != coordinator && !listed)) {
            return Err(format!(
                "check 2: {key:?}: commit marker for {instance}, decided {decided:?}, listed {listed}"
            ));
        }
        if !commit && decided == Some(true) {
            let writes = self.of_instance.get(&instance).map_or(&[][..], |w| w.as_slice());
            let live = |w: &&WriteInfo| w.acked && !w.deleted && partition_of(w) == *key;
            let acked = writes.iter().map(|id| &self.writes[id]).find(live);
            if let Some(write) = acked {
                return Err(format!(
                    "check 2: {key:?}: abort marker for committed {instance} over acknowledged write {}",
                    write.write.id
                ));
            }
        }
        Ok(())
    }

    /// Topic `topic` of `group` was deleted: what was applied to it went with it (a write
    /// applied after, to the topic created again, is a new write like any other).
    pub fn topic_deleted(&mut self, group: GroupId, topic: &str) {
        let on_topic = |w: &WriteInfo| w.group == group && w.write.topic == topic && w.applied.is_some();
        for (id, info) in self.writes.iter_mut().filter(|(_, w)| on_topic(w)) {
            info.deleted = true;
            // Offsets stay watched until their decision applied: they must not come back.
            if info.write.offsets.is_none() {
                self.unsettled.remove(id);
            }
        }
        let gone = |key: &PartitionKey| key.0 == group && key.1 == topic;
        self.at.retain(|(key, _), _| !gone(key));
        self.open_on.retain(|(key, _), _| !gone(key));
    }

    /// Check 1 over the unsettled writes, or over every write (`all`): nothing of an instance
    /// not committed is visible; an acknowledged write of a committed one is, once its group
    /// applied the decision. A write whose outcome is applied and stable cannot change any
    /// more (the simulation has no retention), so it leaves the unsettled set.
    pub fn visibility(&mut self, groups: &[crate::world::Group], all: bool) -> Check {
        let ids: Vec<WriteId> = if all {
            self.writes.keys().copied().collect()
        } else {
            self.unsettled.iter().copied().collect()
        };
        for id in ids {
            let info = &self.writes[&id];
            let Some((offset, instance)) = info.applied else { continue };
            let state = &groups[info.group as usize].state;
            let decided = self.decisions.get(&instance).copied();
            let applied_here = info.group == coordinator_of(instance.producer_id)
                || self.fence.get(&(info.group, instance.producer_id)).is_some_and(|f| *f >= instance);
            if info.deleted {
                deleted_stays_deleted(info, state)?;
                if decided.is_some() && applied_here {
                    self.unsettled.remove(&id);
                }
                continue;
            }
            if let Some(group_id) = &info.write.offsets {
                let stored = state.groups.committed(group_id, &info.write.topic, info.write.partition);
                let stored = stored.map_or(-1, |c| c.offset);
                if stored == id as i64 && decided != Some(true) {
                    return Err(format!(
                        "check 1: offsets of write {id} of {instance} stored, decided {decided:?}"
                    ));
                }
                if info.acked && decided == Some(true) && applied_here && stored < id as i64 {
                    return Err(format!(
                        "check 1: acknowledged offsets of write {id} of committed {instance} not stored in group {} (stored {stored})",
                        info.group
                    ));
                }
                if decided.is_some() && applied_here {
                    self.unsettled.remove(&id);
                }
                continue;
            }
            let seen = visible(state, &info.write.topic, info.write.partition, offset, instance.producer_id);
            if seen && decided != Some(true) {
                return Err(format!(
                    "check 1: write {id} of {instance} visible in group {}, decided {decided:?}",
                    info.group
                ));
            }
            // Another transaction still open below it holds the last stable offset back.
            let stable = offset < last_stable(state, &info.write.topic, info.write.partition);
            if info.acked && decided == Some(true) && applied_here && stable && !seen {
                return Err(format!(
                    "check 1: acknowledged write {id} of committed {instance} invisible in group {} after its decision applied",
                    info.group
                ));
            }
            if decided.is_some() && applied_here && stable {
                self.unsettled.remove(&id);
            }
        }
        Ok(())
    }
}

/// Offsets applied to a topic before its deletion are never stored after it: the topic of
/// the same name created again starts without them (Kafka drops a deleted topic's committed
/// and pending offsets alike). Each write commits its own id as the offset, so a stored id
/// names the write it came from.
fn deleted_stays_deleted(info: &WriteInfo, state: &BrokerState) -> Check {
    let Some(group_id) = &info.write.offsets else { return Ok(()) };
    let stored = state.groups.committed(group_id, &info.write.topic, info.write.partition);
    if stored.is_some_and(|c| c.offset == info.write.id as i64) {
        return Err(format!(
            "check 1: offsets of write {} stored for {} after that topic was deleted under them",
            info.write.id, info.write.topic
        ));
    }
    Ok(())
}

/// Producer ids carry their coordinator group (each group allocates from its own range).
pub(crate) fn coordinator_of(producer_id: i64) -> GroupId {
    onelog_state::xgroup::producer_id_group(producer_id)
}

fn partition_of(w: &WriteInfo) -> PartitionKey {
    (w.group, w.write.topic.clone(), w.write.partition)
}

fn last_stable(state: &BrokerState, topic: &str, partition: i32) -> i64 {
    let p = state.partition(topic, partition).expect("a write applied to a deleted topic is not checked");
    p.last_stable_offset()
}

/// What a read_committed consumer gets: below the last stable offset, and not inside an
/// aborted transaction of the producer.
fn visible(state: &BrokerState, topic: &str, partition: i32, offset: i64, producer_id: i64) -> bool {
    let p = state.partition(topic, partition).expect("a write applied to a deleted topic is not checked");
    let aborted = p
        .aborted_txns
        .iter()
        .any(|a| a.producer_id == producer_id && a.first_offset <= offset && offset <= a.last_offset);
    offset < p.last_stable_offset() && !aborted
}
