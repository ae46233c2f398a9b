//! The replicated record state of one share-partition: the in-flight window from the
//! share-partition start offset (SPSO) to the first offset never acquired, as ranges of
//! records in one state, plus totals for metrics; and the read-only questions describe and
//! the leader's timers ask of it.
//!
//! A range remembers the acquisition batch it was cut from (Kafka's `InFlightBatch`): Kafka
//! redelivers a batch's available records together and sizes delivery throttling by the
//! batch, so ranges of different batches are never joined.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Kafka's `RecordState`, without ARCHIVING: onelog has no dead-letter queue, so a record
/// goes straight to Archived where Kafka would first write it to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    /// Acknowledged and Archived records are done with: the start offset moves past them.
    pub fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// A range of in-flight records sharing one state; its first offset is its key in
/// [`SharePartition::records`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    pub last_offset: i64,
    pub state: RecordState,
    /// Deliveries so far; 0 for records that entered the window without being handed out
    /// (the tail of a record-limited fetch, aborted transactions).
    pub delivery_count: i16,
    /// The holder while Acquired, else empty.
    pub member_id: String,
    /// The holder's lock deadline (leader ms) while Acquired, else 0.
    pub deadline_ms: i64,
    /// The acquisition batch this range belongs to (Kafka's `InFlightBatch`).
    pub batch_first_offset: i64,
    pub batch_last_offset: i64,
}

impl InFlight {
    /// A range entering the window unacquired, as part of `batch`.
    pub(super) fn available(last_offset: i64, batch: (i64, i64)) -> Self {
        InFlight {
            last_offset,
            state: RecordState::Available,
            delivery_count: 0,
            member_id: String::new(),
            deadline_ms: 0,
            batch_first_offset: batch.0,
            batch_last_offset: batch.1,
        }
    }

    /// Kafka's `tryUpdateState(ACQUIRED, INCREASE)`: one more delivery, to `member_id`.
    pub(super) fn acquire(&mut self, member_id: &str, deadline_ms: i64) {
        self.state = RecordState::Acquired;
        self.delivery_count = self.delivery_count.saturating_add(1);
        self.member_id = member_id.to_string();
        self.deadline_ms = deadline_ms;
    }

    /// Ends the holder's lock with the record in `state`.
    pub(super) fn settle(&mut self, state: RecordState) {
        self.state = state;
        self.member_id.clear();
        self.deadline_ms = 0;
    }

    /// Kafka's `tryUpdateState(AVAILABLE, NO_OP)`: back to Available for another delivery,
    /// or Archived once the delivery count reached the limit. Whether it was archived.
    pub(super) fn release(&mut self, delivery_count_limit: i16) -> bool {
        let archive = self.delivery_count >= delivery_count_limit;
        self.settle(if archive { RecordState::Archived } else { RecordState::Available });
        archive
    }

    /// Whether `next`, starting right after this range, can join it.
    pub(super) fn joinable(&self, next: &InFlight) -> bool {
        let key = |r: &InFlight| {
            (r.state, r.delivery_count, r.deadline_ms, r.batch_first_offset, r.batch_last_offset)
        };
        key(self) == key(next) && self.member_id == next.member_id
    }
}

/// Running totals for metrics, in records. Deterministic like the rest of the state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Records handed out, first deliveries and redeliveries.
    pub acquired: u64,
    /// Of those, records delivered more than once.
    pub redelivered: u64,
    /// Records acknowledged by Accept.
    pub accepted: u64,
    /// Records acknowledged by Release.
    pub released: u64,
    /// Records acknowledged by Reject.
    pub rejected: u64,
    /// Records archived on release (acknowledged, member gone, lock expired) because their
    /// delivery count reached the limit.
    pub archived_by_limit: u64,
}

/// The group configs a share-partition decides by, as the op carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `group.share.delivery.count.limit`.
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks`: the in-flight window's size.
    pub max_in_flight_records: i32,
    /// Whether the group allows Renew acknowledgements (lock extension).
    pub renew_enabled: bool,
}

/// One share group's records on one topic partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharePartition {
    /// The share-partition start offset (SPSO): every record below it is done with.
    pub start_offset: i64,
    /// The first offset never acquired: the in-flight window is [start_offset, next_offset).
    pub next_offset: i64,
    /// The window, in contiguous non-overlapping ranges keyed by first offset.
    pub records: BTreeMap<i64, InFlight>,
    pub totals: Totals,
}

impl SharePartition {
    /// An empty window starting at `start_offset`.
    pub fn new(start_offset: i64) -> Self {
        SharePartition { start_offset, next_offset: start_offset, ..SharePartition::default() }
    }

    /// Records in the window (Kafka's `numInFlightRecords`), what the record-lock limit caps.
    pub fn in_flight_count(&self) -> i64 {
        self.next_offset - self.start_offset
    }

    /// Records currently acquired by some member.
    pub fn acquired_count(&self) -> i64 {
        self.acquired().map(|(first, r)| r.last_offset - first + 1).sum()
    }

    /// The ranges `member_id` holds, adjacent ones joined.
    pub fn held_by(&self, member_id: &str) -> Vec<(i64, i64)> {
        let mut held: Vec<(i64, i64)> = Vec::new();
        for (first, r) in self.acquired().filter(|(_, r)| r.member_id == member_id) {
            match held.last_mut() {
                Some(range) if range.1 + 1 == first => range.1 = r.last_offset,
                _ => held.push((first, r.last_offset)),
            }
        }
        held
    }

    /// The earliest lock deadline, for the leader's timer.
    pub fn next_deadline(&self) -> Option<i64> {
        self.acquired().map(|(_, r)| r.deadline_ms).min()
    }

    fn acquired(&self) -> impl Iterator<Item = (i64, &InFlight)> {
        self.records.iter().filter(|(_, r)| r.state == RecordState::Acquired).map(|(&k, r)| (k, r))
    }
}

/// The number of records in [first, last].
pub(super) fn span_len(first: i64, last: i64) -> u64 {
    u64::try_from(last - first + 1).unwrap_or(0)
}
