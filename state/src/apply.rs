//! The pure state machine: `apply_op(state, stamp, op) -> (result, effects)`.
//!
//! No clock, no randomness, no I/O: everything comes from the op, which the leader filled in,
//! the entry's [`LeaderStamp`] and the replicated limits. Partition bytes are not written here;
//! apply returns [`Effect`]s that the storage layer performs, so every replica applying the
//! same log reaches the same state and the same files.

use kafka_compat::batch::parse_header;
use kafka_compat::error_code;

use kafka_protocol::messages::ApiKey;

use super::command::{
    Command, CommandResponse, LeaderStamp, NewPartitions, NewTopic, Op, OpResult, PartitionAppend,
    PartitionProduced, ProduceOp, Refusal, TrimLog,
};
use super::effect::Effect;
use super::producers::{Allocation, BatchMeta, BatchSeq, Pending, Verdict};
use super::txns::{ProducerIdEpoch, TxnError};
use super::{apply_admin, apply_consumer, apply_share, apply_streams, apply_txn, txn_errors};
use super::{BrokerState, PartitionState, Topic};

/// Applies every op of one entry in order; `perform` gets each op's effects (empty for a
/// refused op) before the next op applies. An error from `perform` stops the entry: the
/// caller's storage failed, which is fatal for the node.
pub fn apply_command<E>(
    state: &mut BrokerState,
    command: &Command,
    mut perform: impl FnMut(&BrokerState, &[Effect]) -> Result<(), E>,
) -> Result<CommandResponse, E> {
    let mut response = CommandResponse { results: Vec::with_capacity(command.ops.len()) };
    let mut effects = Vec::new();
    for op in &command.ops {
        effects.clear();
        response.results.push(apply_op(state, &command.stamp, op, &mut effects));
        perform(state, &effects)?;
    }
    Ok(response)
}

/// Applies one op; effects are appended to `effects` only if the op succeeds.
pub fn apply_op(
    state: &mut BrokerState,
    stamp: &LeaderStamp,
    op: &Op,
    effects: &mut Vec<Effect>,
) -> OpResult {
    let now_ms = stamp.now_ms;
    match op {
        Op::InitCluster(init) => done(state, now_ms, |s, _| {
            s.cluster_id = s.cluster_id.take().or_else(|| Some(init.cluster_id.clone()))
        }),
        Op::SetLimits(limits) => done(state, now_ms, |s, _| s.limits = *limits),
        Op::Produce(produce) => produce_local(state, now_ms, produce, effects),
        Op::CreateTopics(op) => {
            OpResult::Items(op.topics.iter().map(|t| create_topic(state, t, effects)).collect())
        }
        Op::DeleteTopics(op) => {
            OpResult::Items(op.names.iter().map(|n| delete_topic(state, n, effects)).collect())
        }
        Op::CreatePartitions(op) => {
            OpResult::Items(op.topics.iter().map(|p| create_partitions(state, p, effects)).collect())
        }
        Op::TrimLog(op) => {
            op.trims.iter().for_each(|trim| trim_log(state, trim, effects));
            OpResult::Done
        }
        Op::InitProducerId(_) => init_producer_id(state, now_ms),
        Op::ExpireProducers(_) => done(state, now_ms, |s, now| {
            s.producers.expire(now, s.limits.producer_id_expiration_ms);
        }),
        Op::OffsetCommit(commit) => OpResult::Items(apply_consumer::offset_commit(state, commit, now_ms)),
        Op::CompleteGeneration(generation) => apply_consumer::complete_generation(state, generation),
        Op::InitTxnProducer(init) => apply_txn::init_txn_producer(state, stamp, init, effects),
        Op::TxnOffsetCommit(commit) => apply_txn::txn_offset_commit(state, now_ms, commit),
        Op::EndTxn(end) => apply_txn::end_txn(state, stamp, end, effects),
        Op::AbortTxns(abort) => apply_txn::abort_txns(state, stamp, abort, effects),
        Op::ExpireTransactionalIds(_) => done(state, now_ms, expire_transactional_ids),
        Op::DeleteGroups(op) => apply_consumer::delete_groups(state, op),
        Op::OffsetDelete(delete) => offset_delete(state, delete),
        Op::AlterClientQuotas(op) => done(state, now_ms, |s, _| s.client_quotas.apply(&op.alterations)),
        Op::AlterConfigs(alter) => OpResult::Items(apply_admin::alter_configs(state, alter)),
        Op::DeleteRecords(delete) => {
            OpResult::LowWatermarks(apply_admin::delete_records(state, delete, effects))
        }
        Op::CreateAcls(create) => OpResult::Items(state.acls.create(&create.bindings)),
        Op::DeleteAcls(delete) => OpResult::AclsDeleted(state.acls.delete(&delete.filters)),
        Op::AlterScramCredentials(op) => OpResult::Items(state.scram.apply(&op.users)),
        Op::UpdateFeatures(op) => OpResult::FeaturesUpdated(update_features(state, op)),
        Op::ConsumerGroupHeartbeat(op) => apply_consumer::heartbeat(state, op),
        Op::FenceConsumerGroupMember(op) => apply_consumer::fence(state, op),
        Op::RecordConsumerLiveness(op) => apply_consumer::record_liveness(state, op),
        Op::ConsumerGroupClassicJoin(op) => apply_consumer::classic_join(state, op),
        Op::ConsumerGroupClassicLeave(op) => apply_consumer::classic_leave(state, op),
        Op::StreamsGroupHeartbeat(op) => apply_streams::heartbeat(state, op),
        Op::FenceStreamsGroupMember(op) => apply_streams::fence(state, op),
        Op::StreamsGroupAssign(op) => apply_streams::assign(state, op),
        Op::RecordStreamsLiveness(op) => apply_streams::record_liveness(state, op),
        Op::ShareGroupHeartbeat(op) => apply_share::heartbeat(state, op),
        Op::FenceShareGroupMember(op) => apply_share::fence(state, op),
        Op::ShareAcquire(op) => apply_share::acquire(state, op),
        Op::ShareAcknowledge(op) => apply_share::acknowledge(state, op),
        Op::ShareRelease(op) => apply_share::release(state, op),
        Op::ShareExpireLocks(op) => apply_share::expire(state, op),
        Op::RecordShareLiveness(op) => apply_share::record_liveness(state, op),
        Op::ShareResetOffsets(op) => apply_share::reset_offsets(state, op),
        Op::ShareDeleteOffsets(op) => apply_share::delete_offsets(state, op),
        Op::CrossGroup(op) => OpResult::CrossGroup(crate::xgroup::ops::apply_xop(state, stamp, op, effects)),
    }
}

/// This group's own produce op: its transactional batches are of transactions coordinated here.
fn produce_local(
    state: &mut BrokerState,
    now_ms: i64,
    produce: &ProduceOp,
    effects: &mut Vec<Effect>,
) -> OpResult {
    OpResult::Produced(apply_produce_as(state, now_ms, produce, effects, TxnOwner::Local))
}

/// An op that changes the state and answers nothing of its own.
fn done(state: &mut BrokerState, now_ms: i64, change: impl FnOnce(&mut BrokerState, i64)) -> OpResult {
    change(state, now_ms);
    OpResult::Done
}

/// `transactional.id.expiration.ms`: the ids go, and so does the cross-group numbering of
/// their producer ids (their undelivered decisions stay until confirmed).
fn expire_transactional_ids(state: &mut BrokerState, now_ms: i64) {
    let released = state.txns.expire(now_ms, state.limits.transactional_id_expiration_ms);
    state.xgroup.forget_producers(&released);
}

/// UpdateFeatures; raising `onelog.group.placement` is refused too while any group has state
/// here, which placing group ids elsewhere would strand (`features::GROUP_PLACEMENT`; the
/// levels check refuses it outright once the log recorded levels).
fn update_features(state: &mut BrokerState, op: &crate::features::UpdateFeaturesOp) -> Result<(), Refusal> {
    let placement = crate::features::GROUP_PLACEMENT;
    let raises = op.updates.iter().any(|u| u.name == placement && u.level > state.features.level(placement));
    if raises && state.has_group_state() {
        let message = format!("{placement} cannot be set while consumer, Streams or share groups have state");
        return Err(refusal(error_code::INVALID_UPDATE_VERSION, message));
    }
    state.features.apply(op)
}

fn offset_delete(state: &mut BrokerState, delete: &crate::command::OffsetDeleteOp) -> OpResult {
    let deleted = state.groups.delete_offsets(delete);
    OpResult::Deleted(
        deleted.map_err(|(error_code, message)| refusal(error_code, message.unwrap_or_default())),
    )
}

/// InitProducerId without a transactional id: the next free producer id, epoch 0.
fn init_producer_id(state: &mut BrokerState, now_ms: i64) -> OpResult {
    let allocation = Allocation::of(&state.limits, now_ms);
    OpResult::ProducerId(match state.producers.allocate(&allocation) {
        Ok(producer_id) => Ok(ProducerIdEpoch { producer_id, producer_epoch: 0 }),
        // Retriable for every client (Java re-enqueues it, librdkafka retries in 500 ms).
        Err(message) => Err(refusal(error_code::COORDINATOR_LOAD_IN_PROGRESS, message)),
    })
}

fn refusal(error_code: i16, message: String) -> Refusal {
    Refusal { error_code, message }
}

/// Who decides the transactional batches of a produce op.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxnOwner {
    /// This group's transactions (`BrokerState::txns`): every produce op of a one-group cluster.
    Local,
    /// Another group's instance (`xgroup`): every transactional batch must be of it.
    Remote { coordinator: crate::xgroup::GroupId, instance: crate::xgroup::Instance },
}

/// Checks every partition of the op before touching any, so the op applies all-or-nothing.
/// The leader stamped the offsets; a follower recomputes them and refuses a mismatch rather
/// than diverge (DESIGN §2: offsets never come from a guess).
pub(crate) fn apply_produce_as(
    state: &mut BrokerState,
    now_ms: i64,
    op: &ProduceOp,
    effects: &mut Vec<Effect>,
    owner: TxnOwner,
) -> Result<Vec<PartitionProduced>, Refusal> {
    for (index, append) in op.partitions.iter().enumerate() {
        if op.partitions[..index].iter().any(|p| p.topic == append.topic && p.partition == append.partition) {
            return Err(refusal(
                error_code::INVALID_REQUEST,
                format!("{}-{} twice in one op", append.topic, append.partition),
            ));
        }
        check_append(state, append)?;
    }
    let pending = check_producers(state, now_ms, op, owner)?;
    let mut produced = Vec::with_capacity(op.partitions.len());
    for append in &op.partitions {
        let topic = state.topics.get_mut(&append.topic).expect("checked above");
        let topic_id = topic.topic_id;
        let partition = &mut topic.partitions[append.partition as usize];
        produced.push(PartitionProduced {
            error_code: error_code::NONE,
            message: None,
            base_offset: partition.log_end_offset,
            log_start_offset: partition.log_start_offset,
            append_time_ms: now_ms,
        });
        for batch in &append.batches {
            let header = parse_header(batch).expect("checked above");
            partition.log_end_offset = header.last_offset() + 1;
            partition.note_epoch(header.partition_leader_epoch, header.base_offset);
            let (topic_name, at) = (&append.topic, header.base_offset);
            let first_here = header.is_transactional()
                && match owner {
                    TxnOwner::Local => {
                        state.txns.record_write(header.producer_id, topic_name, append.partition, at, now_ms)
                    }
                    TxnOwner::Remote { coordinator, instance } => state.xgroup.record_write(
                        coordinator,
                        instance,
                        topic_name,
                        append.partition,
                        at,
                        now_ms,
                    ),
                };
            if first_here {
                partition.open_txns.insert(header.producer_id, header.base_offset);
            }
            if header.max_timestamp > partition.max_timestamp {
                partition.max_timestamp = header.max_timestamp;
                partition.max_timestamp_offset = header.last_offset();
            }
            effects.push(Effect::Append { topic_id, partition: append.partition, batch: batch.clone() });
        }
        partition.assert_invariants(&append.topic, append.partition);
    }
    state.producers.record_pending(pending, now_ms);
    Ok(produced)
}

/// Re-runs the leader's sequence checks (KIP-98) on the stamped batches. The leader left out
/// duplicates and refused batches, so anything but `Append` means its view of the producer
/// state differs from this one; the op is refused rather than applied differently.
fn check_producers(
    state: &BrokerState,
    now_ms: i64,
    op: &ProduceOp,
    owner: TxnOwner,
) -> Result<Pending, Refusal> {
    let mut pending = Pending::default();
    for append in &op.partitions {
        for batch in &append.batches {
            let header = parse_header(batch).expect("checked by check_append");
            let Some(seq) = BatchSeq::of(&header) else { continue };
            if header.is_transactional() {
                let id = ProducerIdEpoch { producer_id: seq.producer_id, producer_epoch: seq.epoch };
                if let Err(e) = check_txn_write(state, id, owner) {
                    // The leader checked the write against the same state; a client only gets
                    // this if the two differ, and gets what the oldest Produce would.
                    let code = txn_errors::code(&e, ApiKey::Produce, 0);
                    let message =
                        format!("{}-{}: transactional write refused: {e:?}", append.topic, append.partition);
                    return Err(refusal(code, message));
                }
            }
            match pending.check(&state.producers, &append.topic, append.partition, &seq) {
                Verdict::Append => {
                    let meta = BatchMeta {
                        first_seq: seq.first_seq,
                        last_seq: seq.last_seq,
                        base_offset: header.base_offset,
                        last_offset: header.last_offset(),
                        append_time_ms: now_ms,
                    };
                    pending.record(&state.producers, &append.topic, append.partition, &seq, meta);
                }
                // A retry sees NONE with the original offset once the leader's view is current.
                Verdict::Duplicate(meta) => {
                    return Err(refusal(
                        error_code::NOT_LEADER_OR_FOLLOWER,
                        format!(
                            "{}-{}: producer {} batch {}..{} was already appended at {}",
                            append.topic,
                            append.partition,
                            seq.producer_id,
                            seq.first_seq,
                            seq.last_seq,
                            meta.base_offset
                        ),
                    ))
                }
                Verdict::Reject { error_code, message } => {
                    return Err(refusal(
                        error_code,
                        format!("{}-{}: {message}", append.topic, append.partition),
                    ))
                }
            }
        }
    }
    Ok(pending)
}

/// A transactional batch's producer must be in a transaction of `owner` that takes writes.
fn check_txn_write(state: &BrokerState, id: ProducerIdEpoch, owner: TxnOwner) -> Result<(), TxnError> {
    match owner {
        TxnOwner::Local => state.txns.check_write(id).map(|_| ()),
        TxnOwner::Remote { instance, .. } => {
            if (id.producer_id, id.producer_epoch) != (instance.producer_id, instance.epoch) {
                return Err(TxnError::Fenced);
            }
            state.xgroup.check_write(instance)
        }
    }
}

fn check_append(state: &BrokerState, append: &PartitionAppend) -> Result<(), Refusal> {
    let Some(partition) = state.partition(&append.topic, append.partition) else {
        return Err(refusal(
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            format!("{}-{} does not exist", append.topic, append.partition),
        ));
    };
    let mut expected = partition.log_end_offset;
    for batch in &append.batches {
        let header = parse_header(batch).map_err(|e| refusal(error_code::CORRUPT_MESSAGE, e.to_string()))?;
        if header.base_offset != expected || header.size_bytes != batch.len() {
            return Err(refusal(
                error_code::NOT_LEADER_OR_FOLLOWER,
                format!(
                    "{}-{}: batch stamped at {} but the log ends at {expected}",
                    append.topic, append.partition, header.base_offset
                ),
            ));
        }
        expected = header.last_offset() + 1;
    }
    Ok(())
}

fn create_topic(state: &mut BrokerState, new: &NewTopic, effects: &mut Vec<Effect>) -> (i16, Option<String>) {
    if state.topics.contains_key(&new.name) {
        return (error_code::TOPIC_ALREADY_EXISTS, Some(format!("Topic '{}' already exists.", new.name)));
    }
    if new.partitions <= 0 {
        return (error_code::INVALID_PARTITIONS, Some("Number of partitions must be positive.".into()));
    }
    let partitions = (0..new.partitions).map(|_| PartitionState::new()).collect();
    for partition in 0..new.partitions {
        effects.push(Effect::CreatePartitionLog { topic_id: new.topic_id, partition });
    }
    let topic = Topic {
        topic_id: new.topic_id,
        replication_factor: new.replication_factor,
        configs: new.configs.clone(),
        partitions,
    };
    state.topics.insert(new.name.clone(), topic);
    (error_code::NONE, None)
}

fn delete_topic(state: &mut BrokerState, name: &str, effects: &mut Vec<Effect>) -> (i16, Option<String>) {
    match state.topics.remove(name) {
        Some(topic) => {
            state.producers.forget_topic(name);
            state.txns.forget_topic(name);
            state.xgroup.forget_topic(name);
            state.groups.forget_topic(name);
            state.share_states.drop_topic(&topic.topic_id);
            effects.push(Effect::DeleteTopicLogs { topic_id: topic.topic_id });
            (error_code::NONE, None)
        }
        None => (error_code::UNKNOWN_TOPIC_OR_PARTITION, Some(format!("Topic '{name}' does not exist."))),
    }
}

fn create_partitions(
    state: &mut BrokerState,
    req: &NewPartitions,
    effects: &mut Vec<Effect>,
) -> (i16, Option<String>) {
    let Some(topic) = state.topics.get_mut(&req.topic) else {
        return (
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("Topic '{}' does not exist.", req.topic)),
        );
    };
    let current = topic.partitions.len() as i32;
    if req.count <= current {
        let message =
            format!("Topic currently has {current} partitions, {} would not be an increase.", req.count);
        return (error_code::INVALID_PARTITIONS, Some(message));
    }
    if let Some(why) = crate::assignment::problem(req, topic.partitions.len(), topic.replication_factor, None)
    {
        return (error_code::INVALID_REPLICA_ASSIGNMENT, Some(why));
    }
    let mut assigned = req.assignments.iter();
    for partition in current..req.count {
        let replicas = assigned.next().cloned().unwrap_or_default();
        topic.partitions.push(PartitionState { replicas, ..PartitionState::new() });
        effects.push(Effect::CreatePartitionLog { topic_id: topic.topic_id, partition });
    }
    (error_code::NONE, None)
}

fn trim_log(state: &mut BrokerState, trim: &TrimLog, effects: &mut Vec<Effect>) {
    let Some(topic) = state.topics.get_mut(&trim.topic) else { return };
    let topic_id = topic.topic_id;
    let Some(partition) = usize::try_from(trim.partition).ok().and_then(|p| topic.partitions.get_mut(p))
    else {
        return;
    };
    // Retention only moves forward, and never past the last stable offset: an open
    // transaction's data stays until its marker decides it.
    let target = trim.log_start_offset.min(partition.last_stable_offset());
    if target > partition.log_start_offset {
        partition.log_start_offset = target;
        partition.aborted_txns.retain(|a| a.last_offset >= target);
        effects.push(Effect::TrimLog { topic_id, partition: trim.partition, log_start_offset: target });
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
pub(crate) mod tests;
