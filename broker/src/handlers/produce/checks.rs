//! Produce's validation of each partition: authorization, leadership, acks, topic and
//! partition, the disk reserve, the batches (CRC, sizes, inflation, keys of a compacted
//! topic) and the producer rules (idempotent and transactional), against the request's
//! [`Snapshot`] of the applied state. What fails here gets its own error and stays out of the
//! log entry.

use kafka_compat::batch::{parse_header, validate, BatchHeader, Budget, ValidBatch};
use kafka_compat::error_code;
use kafka_protocol::messages::produce_request::TopicProduceData;
use onelog_state::entry::UnstampedAppend;
use onelog_state::txns::ProducerIdEpoch;
use onelog_state::xgroup::producer_id_group;

use super::snapshot::{Snapshot, TopicFacts};
use super::{Slot, IMPLICIT_ADD_FROM_VERSION};
use crate::coord::txn::WriteRefusal;
use crate::ctx::Ctx;
use crate::errors::write_refusal_code;
use crate::limits;
use crate::security::authz::code;

/// Each partition's slot, the appends that passed validation, and the slot of each append.
pub struct Checks {
    pub slots: Vec<Slot>,
    pub appends: Vec<UnstampedAppend>,
    pub owners: Vec<usize>,
}

/// Whether any batch of the request is transactional, read from the batch headers before any
/// validation (Kafka's `hasTransactionalRecords`). A header that does not parse is left to
/// validation.
pub fn has_transactional_records(topics: &[TopicProduceData]) -> bool {
    topics.iter().flat_map(|t| &t.partition_data).any(|p| {
        let mut rest: &[u8] = p.records.as_deref().unwrap_or_default();
        while let Ok(header) = parse_header(rest) {
            if header.is_transactional() {
                return true;
            }
            let Some(next) = rest.get(header.size_bytes..) else { return false };
            rest = next;
        }
        false
    })
}

/// What a request's partitions are checked against besides their own bytes.
struct Request<'a> {
    ctx: &'a Ctx,
    snapshot: &'a Snapshot,
    acks: i16,
    version: i16,
    /// Whether this node leads group 0, for topics not known here.
    not_leader: bool,
    disk_full: Option<String>,
    /// Inflating compressed batches to validate them is bounded per request (DESIGN §8).
    inflated_bytes_left: usize,
}

/// Why a transactional batch to a topic placed in another Raft group than the one coordinating
/// its transaction is refused in a cluster below `onelog.version` 8, whose groups do not know
/// their numbers and so cannot run the cross-group protocol (docs/SCALING.md §3). A producer
/// id names its coordinator group (`xgroup::producer_id_group`).
fn not_in_coordinator_group(producer_id: i64, topic_group: u32) -> String {
    format!(
        "transactions across Raft groups need onelog.version 8: producer {producer_id} is coordinated in group {}, the topic is placed in group {topic_group} (onelog.raft.group, onelog.placement.rules)",
        producer_id_group(producer_id)
    )
}

/// Validates every partition of a request.
pub fn check_request(
    ctx: &Ctx,
    snapshot: &Snapshot,
    topic_data: Vec<TopicProduceData>,
    acks: i16,
    version: i16,
) -> Checks {
    let not_leader = !ctx.may_propose();
    let leads_any = !not_leader || snapshot.topics.values().any(|f| f.leads);
    let disk_full = if leads_any { disk_refusal(ctx, snapshot) } else { None };
    let inflated_bytes_left = limits::PRODUCE_INFLATED_BYTES_MAX;
    let mut request = Request { ctx, snapshot, acks, version, not_leader, disk_full, inflated_bytes_left };
    let mut checks = Checks { slots: Vec::new(), appends: Vec::new(), owners: Vec::new() };
    for (topic, writable) in topic_data.into_iter().zip(&snapshot.writable) {
        let name = topic.name.0.to_string();
        for p in topic.partition_data {
            let mut slot = Slot::new(&name, p.index);
            let twice = checks.appends.iter().any(|a| a.topic == name && a.partition == p.index);
            match request.check(&name, *writable, p.index, p.records.unwrap_or_default()) {
                Ok(_) if twice => {
                    slot.error_code = error_code::INVALID_REQUEST;
                    slot.message = Some("partition appears twice in the request".into());
                }
                Ok(batches) => {
                    checks.owners.push(checks.slots.len());
                    checks.appends.push(UnstampedAppend { topic: name.clone(), partition: p.index, batches });
                }
                Err(Refused { code, message, record_errors }) => {
                    tracing::debug!(topic = %name, partition = p.index, code, ?message, "produce partition refused");
                    slot.error_code = code;
                    slot.message = message;
                    slot.record_errors = record_errors;
                }
            }
            checks.slots.push(slot);
        }
    }
    checks
}

impl Request<'_> {
    /// One partition's checks, in Kafka's order.
    fn check(&mut self, topic: &str, writable: bool, partition: i32, records: bytes::Bytes) -> Checked {
        let facts = self.snapshot.topics.get(topic);
        if !writable {
            return Err(Refused::from((code::TOPIC_AUTHORIZATION_FAILED, None)));
        }
        // Kafka refuses an append to an internal topic before it looks for the leader.
        if let Some(refused) = internal_refusal(topic, facts.is_some()) {
            return Err(refused);
        }
        if facts.map_or(self.not_leader, |f| !f.leads) {
            return Err(Refused::from((error_code::NOT_LEADER_OR_FOLLOWER, None)));
        }
        if !(self.acks == 0 || self.acks == 1 || self.acks == -1) {
            return Err(Refused::from((error_code::INVALID_REQUIRED_ACKS, None)));
        }
        if let Some(why) = &self.disk_full {
            return Err(Refused::from((error_code::KAFKA_STORAGE_ERROR, Some(why.clone()))));
        }
        let facts = known_partition(facts, topic, partition)?;
        self.check_batches(facts, topic, partition, records)
    }

    fn check_batches(
        &mut self,
        facts: &TopicFacts,
        topic: &str,
        partition: i32,
        records: bytes::Bytes,
    ) -> Checked {
        // A topic whose max.message.bytes predates the cap is held to it too: a larger batch
        // could not fit one Raft entry.
        let cap = onelog_state::limits::MESSAGE_BYTES_MAX as usize;
        let batch_bytes_max = (facts.max_message_bytes.max(0) as usize).min(cap);
        let budget = Budget { batch_bytes_max, inflated_bytes_max: self.inflated_bytes_left };
        let validated = validate(&records, budget).map_err(|e| (e.error_code(), Some(e.to_string())))?;
        self.inflated_bytes_left -= validated.inflated_bytes;
        let batches = validated.batches;
        if facts.compacted {
            check_keys(&batches, topic, partition)?;
        }
        check_idempotent(&batches)?;
        let transactional = batches.iter().map(|b| &b.header).find(|h| h.is_transactional());
        let elsewhere = |h: &&BatchHeader| producer_id_group(h.producer_id) != facts.group;
        if let Some(h) = transactional.filter(|h| !self.ctx.single_group() && elsewhere(h)) {
            if !self.ctx.placed_coordinators() {
                let why = not_in_coordinator_group(h.producer_id, facts.group);
                return Err(Refused::from((error_code::POLICY_VIOLATION, Some(why))));
            }
            // Its coordinator group checks it when this group's leader joins the transaction
            // (`coord::xgroup::participant`).
            return Ok(batches);
        }
        check_transactional(self.ctx, facts.group, (topic, partition), &batches, self.version)?;
        Ok(batches)
    }
}

/// The topic's facts when it has the partition, else UNKNOWN_TOPIC_OR_PARTITION.
fn known_partition<'f>(
    facts: Option<&'f TopicFacts>,
    topic: &str,
    partition: i32,
) -> Result<&'f TopicFacts, Refused> {
    let unknown = |what: String| Refused::from((error_code::UNKNOWN_TOPIC_OR_PARTITION, Some(what)));
    let facts = facts.ok_or_else(|| unknown(format!("unknown topic {topic}")))?;
    if partition < 0 || partition as usize >= facts.partitions {
        return Err(unknown(format!("unknown partition {topic}-{partition}")));
    }
    Ok(facts)
}

/// Why the data directory cannot take more client data now, if it cannot: the reserve is
/// this node's dynamic `log.dir.free.bytes.min` (or the cluster default, or the static value).
fn disk_refusal(ctx: &Ctx, snapshot: &Snapshot) -> Option<String> {
    crate::storage::free_space::refusal(&ctx.data_dir, snapshot.disk_reserve.max(0) as u64)
}

/// The refusal of an append to the virtual `__consumer_offsets`, unless a real topic of that
/// name shadows it (`internal_topic`).
fn internal_refusal(topic: &str, exists: bool) -> Option<Refused> {
    (crate::internal_topic::is_internal(topic) && !exists).then(|| {
        let message = format!("Cannot append to internal topic {topic}");
        Refused::from((error_code::INVALID_TOPIC_EXCEPTION, Some(message)))
    })
}

type Checked = Result<Vec<ValidBatch>, Refused>;

/// Why a partition's batches were refused: the code, the message, and which records.
struct Refused {
    code: i16,
    message: Option<String>,
    record_errors: Vec<(i32, String)>,
}

impl From<(i16, Option<String>)> for Refused {
    fn from((code, message): (i16, Option<String>)) -> Self {
        Refused { code, message, record_errors: Vec::new() }
    }
}

/// Kafka's `LogValidator.validateKey`: a compacted topic keeps the last record per key, so a
/// record without one is refused, INVALID_RECORD with every such record's index in its batch
/// (Produce v8+ carries the list; older versions only the code, as Kafka answers them). The
/// validator found them while walking the records.
fn check_keys(batches: &[ValidBatch], topic: &str, partition: i32) -> Result<(), Refused> {
    let why =
        format!("Compacted topic cannot accept message without key in topic partition {topic}-{partition}.");
    let mut record_errors = Vec::new();
    for batch in batches {
        record_errors.extend(batch.keyless_records.iter().map(|i| (*i, why.clone())));
    }
    if record_errors.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> =
        record_errors.iter().take(3).map(|(i, m)| format!("(batchIndex={i}, message='{m}')")).collect();
    let message = format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
        record_errors.len(),
        shown.join(", ")
    );
    Err(Refused { code: error_code::INVALID_RECORD, message: Some(message), record_errors })
}

/// A transactional batch must come from the current epoch of its transactional id and go to
/// a partition the transaction added (KIP-890 part 1); the transaction coordinator decides.
fn check_transactional(
    ctx: &Ctx,
    group: u32,
    (topic, partition): (&str, i32),
    batches: &[ValidBatch],
    version: i16,
) -> Result<(), (i16, Option<String>)> {
    let Some(header) = batches.iter().map(|b| &b.header).find(|h| h.is_transactional()) else {
        return Ok(());
    };
    // Answered from its committed entry like any acks=all write (issue 17), so only Raft
    // leadership is needed (`may_propose`, checked in `check_request`), not the read lease.
    let id = ProducerIdEpoch { producer_id: header.producer_id, producer_epoch: header.producer_epoch };
    let implicit_add = version >= IMPLICIT_ADD_FROM_VERSION;
    // The snapshot found this node leading the topic's group, so it runs it; its coordinator
    // decides (the batch's producer id is of that group's range, checked above).
    let Some(lane) = ctx.lane(group) else {
        return Err((error_code::NOT_LEADER_OR_FOLLOWER, None));
    };
    lane.txns.admit_write(id, topic, partition, implicit_add).map_err(|refusal| {
        let message = match &refusal {
            WriteRefusal::Txn(e) => format!("transactional batch of producer {}: {e:?}", id.producer_id),
            WriteRefusal::NotAdded { transactional_id } => {
                format!("{topic}-{partition} was not added to transaction '{transactional_id}'")
            }
        };
        (write_refusal_code(&refusal, version), Some(message))
    })
}

/// Kafka's rules for batches carrying a producer id: one batch per partition per request
/// (Produce v3+), and a real epoch and sequence (LogValidator), or INVALID_RECORD.
fn check_idempotent(batches: &[ValidBatch]) -> Result<(), (i16, Option<String>)> {
    let invalid = |why: &str| Err((error_code::INVALID_RECORD, Some(why.to_string())));
    let with_pid = batches.iter().filter(|b| b.header.producer_id >= 0);
    for batch in with_pid.clone() {
        if batch.header.base_sequence < 0 || batch.header.producer_epoch < 0 {
            return invalid("a batch with a producer id needs a sequence and epoch of at least 0");
        }
    }
    if with_pid.count() > 0 && batches.len() > 1 {
        return invalid("produce requests carry one batch per partition when it has a producer id");
    }
    Ok(())
}
