//! Acquisition, the state change behind ShareFetch (Kafka's `SharePartition.acquire`):
//! first redeliveries, batch by batch from the lowest available record, with Kafka's
//! delivery-count throttling near the limit; then new records from the log (`acquire_new`).
//! One record budget covers both; the in-flight window limit decides whether new records
//! may join at all.

use super::model::{Limits, RecordState, SharePartition};

/// A record batch of the partition log, as the leader read its boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    /// read_committed only: the batch belongs to an aborted transaction, so its records are
    /// archived instead of handed out.
    pub aborted: bool,
}

/// One ShareFetch's acquisition on this partition.
#[derive(Debug, Clone, Copy)]
pub struct AcquireInput<'a> {
    pub member_id: &'a str,
    /// What is left of the request's MaxRecords.
    pub max_records: i32,
    /// The request's BatchSize: new records are cut into in-flight batches of about this.
    pub batch_size: i32,
    /// ShareFetch v2 ShareAcquireMode=1 (record limit): never more than `max_records`
    /// acquired, even mid-batch.
    pub record_limit_mode: bool,
    /// Lock deadline (leader ms) of what this fetch acquires.
    pub deadline_ms: i64,
    /// The log from `next_offset` on, ascending, capped by the leader at the HWM or LSO.
    /// Batches already in flight are skipped; a gap ends what is used.
    pub batches: &'a [LogBatch],
    /// The partition's log start offset: records below it are gone.
    pub log_start_offset: i64,
}

/// An acquired range, as ShareFetch's AcquiredRecords reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acquired {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// One acquisition under way: who takes, the record budget and what was taken.
pub(super) struct Take<'a> {
    pub member_id: &'a str,
    pub deadline_ms: i64,
    pub budget: i64,
    pub count: i64,
    pub acquired: Vec<Acquired>,
}

impl SharePartition {
    /// Acquires records for `input.member_id`: redeliveries first, then new batches, within
    /// `max_records` (batch-aligned unless in record-limit mode, as Kafka) and the in-flight
    /// window; increments delivery counts; archives aborted batches instead of handing them
    /// out; forgets records below the log start offset. Returns what ShareFetch reports.
    pub fn acquire(&mut self, input: &AcquireInput, limits: &Limits) -> Vec<Acquired> {
        self.log_start_moved(input.log_start_offset);
        let Some((budget, new_allowed)) = self.budget(input.max_records, limits) else { return Vec::new() };
        let mut take = Take {
            member_id: input.member_id,
            deadline_ms: input.deadline_ms,
            budget,
            count: 0,
            acquired: Vec::new(),
        };
        let throttled = self.redeliver(&mut take, input.record_limit_mode, limits);
        if new_allowed && !throttled && take.count < budget {
            self.acquire_new(&mut take, input);
        }
        self.count_acquired(&take.acquired);
        self.advance_start();
        self.assert_window();
        take.acquired
    }

    /// Kafka's `lastOffsetAndMaxRecordsToAcquire`: the fetch's record budget and whether new
    /// records may join. A full window still lets available records be redelivered, up to
    /// the records from the first of them to the window's end.
    fn budget(&self, max_records: i32, limits: &Limits) -> Option<(i64, bool)> {
        if max_records <= 0 {
            return None;
        }
        let max_records = i64::from(max_records);
        let headroom = i64::from(limits.max_in_flight_records) - self.in_flight_count();
        if headroom > 0 {
            return Some((max_records.min(headroom), true));
        }
        let (&first_available, _) = self.records.iter().find(|(_, r)| r.state == RecordState::Available)?;
        Some((max_records.min(self.next_offset - first_available), false))
    }

    /// Redeliveries, batch by batch. Kafka stops at a throttled batch unless it comes first,
    /// and takes nothing more after one (it zeroes the fetch's budget): returns whether so.
    fn redeliver(&mut self, take: &mut Take, record_limit_mode: bool, limits: &Limits) -> bool {
        let throttle_from = throttle_limit(limits.delivery_count_limit);
        let mut from = self.start_offset;
        while let Some(batch) = self.next_available_batch(from) {
            if take.count >= take.budget {
                return false;
            }
            from = batch.1 + 1;
            let throttled = self.max_available_count(batch) >= throttle_from;
            if throttled && take.count > 0 {
                return true;
            }
            let remaining = if record_limit_mode { take.budget - take.count } else { i64::MAX };
            let plan = self.plan_batch(batch, remaining, limits.delivery_count_limit);
            if self.take_planned(&plan, take) > 0 && throttled {
                return true;
            }
        }
        false
    }

    /// The batch of the first range at or after `from` with available records.
    fn next_available_batch(&self, from: i64) -> Option<(i64, i64)> {
        let (_, r) = self.records.range(from..).find(|(_, r)| r.state == RecordState::Available)?;
        Some((r.batch_first_offset, r.batch_last_offset))
    }

    fn max_available_count(&self, (first, last): (i64, i64)) -> i16 {
        let ranges = self.records.range(first..=last).map(|(_, r)| r);
        ranges.filter(|r| r.state == RecordState::Available).map(|r| r.delivery_count).max().unwrap_or(0)
    }

    /// Kafka's `acquireSubsetBatchRecords`: the available records of one batch this fetch
    /// takes, as (first, last) pieces each inside one range. A record on its last delivery
    /// attempt goes alone; a throttled batch (delivery count at or above the throttle limit)
    /// gives `batch size >> (count - limit + 1)` records; record-limit mode stops at the
    /// fetch's budget. Kafka compares with `==`, so a cap already passed never stops it.
    fn plan_batch(&self, (first, last): (i64, i64), remaining: i64, limit: i16) -> Vec<(i64, i64)> {
        let throttle_from = throttle_limit(limit);
        let (mut cap, mut taken, mut plan) = (None, 0, Vec::new());
        for (&key, r) in self.records.range(first..=last).filter(|(_, r)| r.state == RecordState::Available) {
            let count = r.delivery_count;
            if limit > 2 && count == limit - 1 && taken > 0 {
                break;
            }
            if count >= throttle_from && cap.is_none() {
                cap = Some(throttle_cap(last - first + 1, count, throttle_from));
            }
            let last_attempt = limit > 2 && count + 1 == limit;
            let mut n = if last_attempt { 1 } else { r.last_offset - key + 1 }.min(remaining - taken);
            if let Some(cap) = cap.filter(|&c| c > taken) {
                n = n.min(cap - taken);
            }
            plan.push((key, key + n - 1));
            taken += n;
            if last_attempt || taken == remaining || cap == Some(taken) {
                break;
            }
        }
        plan
    }

    /// Acquires the planned pieces of one batch; returns how many records.
    fn take_planned(&mut self, plan: &[(i64, i64)], take: &mut Take) -> i64 {
        let (Some(&(first, _)), Some(&(_, last))) = (plan.first(), plan.last()) else { return 0 };
        let mut pieces = Vec::new();
        for &(a, z) in plan {
            self.isolate(a, z);
            if let Some(r) = self.records.get_mut(&a) {
                r.acquire(take.member_id, take.deadline_ms);
                pieces.push(Acquired { first_offset: a, last_offset: z, delivery_count: r.delivery_count });
            }
        }
        self.coalesce(first, last);
        let taken: i64 = pieces.iter().map(|p| p.last_offset - p.first_offset + 1).sum();
        take.count += taken;
        accumulate(&mut take.acquired, pieces);
        taken
    }

    fn count_acquired(&mut self, acquired: &[Acquired]) {
        for a in acquired {
            let n = super::model::span_len(a.first_offset, a.last_offset);
            self.totals.acquired += n;
            if a.delivery_count > 1 {
                self.totals.redelivered += n;
            }
        }
    }
}

/// Kafka's `throttleRecordsDeliveryLimit`: max(2, ceil(limit / 2)).
fn throttle_limit(limit: i16) -> i16 {
    (limit / 2 + limit % 2).max(2)
}

/// Kafka's throttled share of a batch: max(1, batch size >> (count - throttle limit + 1)).
fn throttle_cap(batch_size: i64, count: i16, throttle_from: i16) -> i64 {
    let shift = u32::from((count - throttle_from + 1).unsigned_abs());
    batch_size.checked_shr(shift).unwrap_or(0).max(1)
}

/// Kafka's `ShareFetchUtils.accumulateAcquiredRecords`: one batch's consecutive pieces
/// with one delivery count are reported as one range.
fn accumulate(out: &mut Vec<Acquired>, pieces: Vec<Acquired>) {
    let batch_start = out.len();
    for piece in pieces {
        let joins_previous = out.len() > batch_start;
        match out.last_mut() {
            Some(prev)
                if joins_previous
                    && prev.last_offset + 1 == piece.first_offset
                    && prev.delivery_count == piece.delivery_count =>
            {
                prev.last_offset = piece.last_offset
            }
            _ => out.push(piece),
        }
    }
}
