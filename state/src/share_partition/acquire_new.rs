//! New records joining the in-flight window (Kafka's `acquireNewBatchRecords`,
//! `createBatches` and the read_committed filter of aborted transactions): the log batches
//! from `next_offset` on, up to the fetch's remaining budget rounded up to a batch end, cut
//! into in-flight batches of at least the request's batch size. Aborted batches enter the
//! window Archived and are not reported.
//!
//! The leader passes the batches it read; apply uses them only as given: what is already in
//! flight is skipped, and the first gap (or malformed batch) ends what is used, so a stale
//! read can only acquire less, never a record twice.

use super::acquire::{AcquireInput, Acquired, LogBatch, Take};
use super::model::{InFlight, RecordState, SharePartition};

impl SharePartition {
    /// Acquires new records with what is left of the budget; `next_offset` moves past them.
    pub(super) fn acquire_new(&mut self, take: &mut Take, input: &AcquireInput) {
        let spans = contiguous(input.batches, self.next_offset);
        let Some(end) = spans.last().map(|b| b.last_offset) else { return };
        let first = self.next_offset;
        let remaining = take.budget - take.count;
        let last = if remaining < end - first + 1 { batch_end(&spans, first + remaining - 1) } else { end };
        // Record-limit mode: one in-flight batch, acquired up to the budget; its tail enters
        // the window Available, never delivered (Kafka's `createBatches`).
        let (chunks, through) = if input.record_limit_mode {
            (vec![(first, last)], (first + remaining - 1).min(last))
        } else {
            (chunk(&spans, first, last, input.batch_size), last)
        };
        for batch in chunks {
            self.insert_batch(batch, through, &spans, take);
        }
        self.next_offset = last + 1;
    }

    /// Enters one in-flight batch: acquired up to `through`, Available after it, Archived
    /// where a transaction aborted.
    fn insert_batch(&mut self, batch: (i64, i64), through: i64, spans: &[LogBatch], take: &mut Take) {
        for (a, z, aborted) in runs(spans, batch) {
            if aborted {
                let mut archived = InFlight::available(z, batch);
                archived.state = RecordState::Archived;
                self.records.insert(a, archived);
                continue;
            }
            if a <= through {
                let mut acquired = InFlight::available(z.min(through), batch);
                acquired.acquire(take.member_id, take.deadline_ms);
                self.records.insert(a, acquired);
                take.acquired.push(Acquired {
                    first_offset: a,
                    last_offset: z.min(through),
                    delivery_count: 1,
                });
                take.count += z.min(through) - a + 1;
            }
            if z > through {
                self.records.insert(a.max(through + 1), InFlight::available(z, batch));
            }
        }
    }
}

/// The batches usable from `from` on, the first clipped at `from`: batches wholly below it
/// are skipped, and the first gap or malformed batch ends the list.
fn contiguous(batches: &[LogBatch], from: i64) -> Vec<LogBatch> {
    let mut usable = Vec::new();
    let mut next = from;
    for batch in batches {
        if batch.last_offset < batch.first_offset || batch.first_offset > next {
            break;
        }
        if batch.last_offset < next {
            continue;
        }
        usable.push(LogBatch { first_offset: next, ..*batch });
        next = batch.last_offset + 1;
    }
    usable
}

/// Kafka's `lastOffsetFromBatchWithRequestOffset`: the last offset of the batch holding
/// `offset`, so a fetch never ends mid-batch.
fn batch_end(spans: &[LogBatch], offset: i64) -> i64 {
    spans.iter().find(|b| b.last_offset >= offset).map_or(offset, |b| b.last_offset)
}

/// Kafka's `createBatches`: a fetch of more than `batch_size` records is cut at log batch
/// boundaries into in-flight batches of at least `batch_size` records.
fn chunk(spans: &[LogBatch], first: i64, last: i64, batch_size: i32) -> Vec<(i64, i64)> {
    let batch_size = i64::from(batch_size.max(1));
    let mut chunks = Vec::new();
    let mut from = first;
    if last - first + 1 > batch_size {
        for span in spans.iter().take_while(|b| b.first_offset <= last) {
            if span.first_offset - from >= batch_size {
                chunks.push((from, span.first_offset - 1));
                from = span.first_offset;
            }
        }
    }
    chunks.push((from, last));
    chunks
}

/// The log within `batch` as runs of (first, last, aborted), neighbours alike joined.
fn runs(spans: &[LogBatch], (first, last): (i64, i64)) -> Vec<(i64, i64, bool)> {
    let mut runs: Vec<(i64, i64, bool)> = Vec::new();
    for span in spans {
        let (a, z) = (span.first_offset.max(first), span.last_offset.min(last));
        if a > z {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.2 == span.aborted => run.1 = z,
            _ => runs.push((a, z, span.aborted)),
        }
    }
    runs
}
