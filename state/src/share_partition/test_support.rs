//! Helpers of the share-partition tests: a log from batch boundaries, a fetch with
//! defaults, an acknowledgement, and a compact view of the window.

use super::*;

/// Kafka's default delivery limit; a window large enough not to matter unless a test says.
pub(super) const LIMITS: Limits =
    Limits { delivery_count_limit: 5, max_in_flight_records: 200, renew_enabled: true };

/// Committed log batches from (first, last) pairs.
pub(super) fn log(spans: &[(i64, i64)]) -> Vec<LogBatch> {
    spans
        .iter()
        .map(|&(first_offset, last_offset)| LogBatch { first_offset, last_offset, aborted: false })
        .collect()
}

/// One ShareFetch's acquisition: 500 records, batch size 500, batch mode, lock deadline
/// 30 000, log start 0 unless changed.
#[derive(Clone, Copy)]
pub(super) struct Fetch<'a> {
    pub member: &'a str,
    pub max_records: i32,
    pub batch_size: i32,
    pub record_limit: bool,
    pub deadline_ms: i64,
    pub log_start: i64,
}

impl<'a> Fetch<'a> {
    pub fn by(member: &'a str) -> Self {
        Fetch {
            member,
            max_records: 500,
            batch_size: 500,
            record_limit: false,
            deadline_ms: 30_000,
            log_start: 0,
        }
    }

    pub fn max(self, max_records: i32) -> Self {
        Fetch { max_records, ..self }
    }

    pub fn batch_size(self, batch_size: i32) -> Self {
        Fetch { batch_size, ..self }
    }

    pub fn record_limit(self) -> Self {
        Fetch { record_limit: true, ..self }
    }

    pub fn run(&self, sp: &mut SharePartition, log: &[LogBatch], limits: &Limits) -> Vec<(i64, i64, i16)> {
        let input = AcquireInput {
            member_id: self.member,
            max_records: self.max_records,
            batch_size: self.batch_size,
            record_limit_mode: self.record_limit,
            deadline_ms: self.deadline_ms,
            batches: log,
            log_start_offset: self.log_start,
        };
        sp.acquire(&input, limits).iter().map(|a| (a.first_offset, a.last_offset, a.delivery_count)).collect()
    }
}

/// `member` acknowledges [first, last] with `types`, at time 0 with a 30 000 ms lock.
pub(super) fn ack(
    sp: &mut SharePartition,
    member: &str,
    first: i64,
    last: i64,
    types: &[u8],
) -> Result<(), AckError> {
    let batch = AckBatch { first_offset: first, last_offset: last, types: types.to_vec() };
    sp.acknowledge(member, &[batch], 0, 30_000, &LIMITS)
}

/// The window as (first, last, state, delivery count, holder).
pub(super) fn view(sp: &SharePartition) -> Vec<(i64, i64, RecordState, i16, &str)> {
    let rows = sp.records.iter();
    rows.map(|(&first, r)| (first, r.last_offset, r.state, r.delivery_count, r.member_id.as_str())).collect()
}
