//! Acknowledgement, the state change behind ShareAcknowledge and the acknowledgements a
//! ShareFetch carries (Kafka's `SharePartition.acknowledge`): a member settles records it
//! holds — Accept, Release, Reject, Gap — or extends its lock on them (Renew).
//!
//! All or nothing per partition: Kafka rolls back the partition's state changes when one
//! batch fails, so the work is done on a copy that replaces the partition only on success.
//! The error messages are Kafka's, which tell a whole in-flight batch from a part of one.

use kafka_compat::error_code::{INVALID_RECORD_STATE, INVALID_REQUEST};

use super::model::{span_len, Limits, RecordState, SharePartition};

/// One acknowledgement batch of a request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AckBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    /// One type for the whole range, or one per offset: 0 Gap, 1 Accept, 2 Release,
    /// 3 Reject, 4 Renew.
    pub types: Vec<u8>,
}

/// Why a partition's acknowledgements failed: INVALID_RECORD_STATE or INVALID_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message} (error code {code})")]
pub struct AckError {
    pub code: i16,
    pub message: String,
}

/// Kafka's `AcknowledgeType`, with 0 for a gap in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckType {
    Gap,
    Accept,
    Release,
    Reject,
    Renew,
}

impl AckType {
    fn from_id(id: u8) -> Option<AckType> {
        [AckType::Gap, AckType::Accept, AckType::Release, AckType::Reject, AckType::Renew]
            .get(usize::from(id))
            .copied()
    }
}

/// The request's context: who acknowledges, a renewed lock's deadline, the group's limits.
struct Ack<'a> {
    member_id: &'a str,
    deadline_ms: i64,
    limits: &'a Limits,
}

impl SharePartition {
    /// Applies `member_id`'s acknowledgements, all or nothing. Every offset acknowledged must
    /// be Acquired by `member_id`; Accept makes it Acknowledged, Release Available (Archived
    /// at the delivery limit), Reject and Gap Archived, Renew keeps it Acquired until
    /// `now_ms + lock_ms` (if the group allows it). Offsets already below the start offset
    /// are skipped. Then the start offset moves over finished records.
    pub fn acknowledge(
        &mut self,
        member_id: &str,
        batches: &[AckBatch],
        now_ms: i64,
        lock_ms: i64,
        limits: &Limits,
    ) -> Result<(), AckError> {
        let kinds = check_request(batches)?;
        let ack = Ack { member_id, deadline_ms: now_ms.saturating_add(lock_ms), limits };
        let mut work = self.clone();
        for (batch, kinds) in batches.iter().zip(&kinds) {
            work.ack_batch(&ack, batch, kinds)?;
        }
        work.advance_start();
        work.assert_window();
        *self = work;
        Ok(())
    }

    fn ack_batch(&mut self, ack: &Ack, batch: &AckBatch, kinds: &[AckType]) -> Result<(), AckError> {
        // Kafka: "All offsets in the acknowledgement batch are already archived".
        if batch.last_offset < self.start_offset {
            return Ok(());
        }
        self.check_in_flight(batch)?;
        for (first, last, kind) in type_runs(batch, kinds, self.start_offset) {
            self.ack_run(ack, first, last, kind)?;
        }
        Ok(())
    }

    /// Kafka's `fetchSubMapForAcknowledgementBatch`: the batch must lie in the window.
    fn check_in_flight(&self, batch: &AckBatch) -> Result<(), AckError> {
        if self.records.is_empty() {
            return Err(invalid_state(
                "Batch record not found. The request batch offsets are not found in the cache.",
            ));
        }
        if batch.first_offset >= self.next_offset {
            return Err(invalid_request(
                "Batch record not found. The first offset in request is past acquired records.",
            ));
        }
        if batch.last_offset >= self.next_offset {
            return Err(invalid_request(
                "Batch record not found. The last offset in request is past acquired records.",
            ));
        }
        Ok(())
    }

    /// One run of offsets acknowledged alike: every range checked, then all applied.
    fn ack_run(&mut self, ack: &Ack, first: i64, last: i64, kind: AckType) -> Result<(), AckError> {
        for key in self.keys_within(first, last) {
            self.check_ackable(key, ack, kind)?;
        }
        self.isolate(first, last);
        for key in self.keys_within(first, last) {
            self.apply_ack(key, ack, kind);
        }
        self.coalesce(first, last);
        Ok(())
    }

    /// Kafka's ownership checks, with its messages for a whole batch or a part of one.
    fn check_ackable(&self, key: i64, ack: &Ack, kind: AckType) -> Result<(), AckError> {
        let Some(r) = self.records.get(&key) else { return Ok(()) };
        let whole = key == r.batch_first_offset && r.last_offset == r.batch_last_offset;
        if r.state != RecordState::Acquired {
            return Err(invalid_state(if whole {
                "The batch cannot be acknowledged. The batch is not in the acquired state."
            } else {
                "The offset cannot be acknowledged. The offset is not acquired."
            }));
        }
        if r.member_id != ack.member_id {
            return Err(invalid_state(if whole {
                "Member is not the owner of batch record"
            } else {
                "Member is not the owner of offset"
            }));
        }
        if kind == AckType::Renew && !ack.limits.renew_enabled {
            return Err(invalid_state("Renewing acquisition locks is not enabled for the group."));
        }
        Ok(())
    }

    fn apply_ack(&mut self, key: i64, ack: &Ack, kind: AckType) {
        let Some(r) = self.records.get_mut(&key) else { return };
        let n = span_len(key, r.last_offset);
        match kind {
            AckType::Accept => {
                r.settle(RecordState::Acknowledged);
                self.totals.accepted += n;
            }
            AckType::Release => {
                if r.release(ack.limits.delivery_count_limit) {
                    self.totals.archived_by_limit += n;
                }
                self.totals.released += n;
            }
            AckType::Reject => {
                r.settle(RecordState::Archived);
                self.totals.rejected += n;
            }
            AckType::Gap => r.settle(RecordState::Archived),
            AckType::Renew => r.deadline_ms = ack.deadline_ms,
        }
    }
}

/// The request-level checks Kafka makes before the partition sees the batches (KafkaApis'
/// `validateAcknowledgementBatches`) and the type check of `fetchAckTypeMapForBatch`;
/// returns each batch's types.
fn check_request(batches: &[AckBatch]) -> Result<Vec<Vec<AckType>>, AckError> {
    let mut kinds = Vec::with_capacity(batches.len());
    let mut prev_last = -1;
    for batch in batches {
        let span = batch.last_offset.checked_sub(batch.first_offset).unwrap_or(-1);
        if span < 0 || batch.first_offset < prev_last {
            return Err(invalid_request("Acknowledgement batches must be well-formed and ascending."));
        }
        let per_offset = usize::try_from(span).ok().and_then(|s| s.checked_add(1));
        if batch.types.is_empty() || (batch.types.len() > 1 && Some(batch.types.len()) != per_offset) {
            return Err(invalid_request("Acknowledge types must be one, or one per offset of the batch."));
        }
        let parsed: Option<Vec<AckType>> = batch.types.iter().map(|&t| AckType::from_id(t)).collect();
        let Some(parsed) = parsed else {
            return Err(invalid_request(&format!("Invalid acknowledge type: {:?}", batch.types)));
        };
        kinds.push(parsed);
        prev_last = batch.last_offset;
    }
    Ok(kinds)
}

/// The batch from `start` on as runs of (first, last, type), consecutive offsets of one
/// type joined.
fn type_runs(batch: &AckBatch, kinds: &[AckType], start: i64) -> Vec<(i64, i64, AckType)> {
    if let [only] = kinds[..] {
        return vec![(batch.first_offset.max(start), batch.last_offset, only)];
    }
    let mut runs: Vec<(i64, i64, AckType)> = Vec::new();
    for (offset, &kind) in (batch.first_offset..).zip(kinds).filter(|&(offset, _)| offset >= start) {
        match runs.last_mut() {
            Some(run) if run.2 == kind => run.1 = offset,
            _ => runs.push((offset, offset, kind)),
        }
    }
    runs
}

fn invalid_state(message: &str) -> AckError {
    AckError { code: INVALID_RECORD_STATE, message: message.to_string() }
}

fn invalid_request(message: &str) -> AckError {
    AckError { code: INVALID_REQUEST, message: message.to_string() }
}
