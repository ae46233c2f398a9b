//! Frees Raft log segments that journaled partitions keep for a few live batches (issue 31).
//!
//! A purged Raft log segment stays on disk while any partition retains a batch in it
//! (`raft_store::Retention`). Retention that removes everything of a segment at about the same
//! time (the usual case: one retention for all topics) frees it whole. A topic that retains a
//! little of many segments would keep every one of them, with every other partition's dead
//! bytes in it: a long `retention.ms`, compaction off, or a slow partition whose active
//! segment, never full, spans weeks of log. So after each checkpoint, a parked segment whose
//! live batches are below `COPY_LIVE_PERCENT_MAX` of it has them copied into their
//! partitions' own files, as a segment without journal holds them, and the next checkpoint
//! releases it. Those bytes are written twice; only those that outlive most of their segment.
//!
//! The copy never blocks a partition for long: a sealed segment is copied without its lock
//! (`segment::CopyPlan`) and switched to its copy under it. An active segment pointing into a
//! doomed segment is closed first (its next batch rolls a new one). A kill -9 on either side
//! of the switch (fault points `crash-mid-segment-copy`, `crash-after-segment-copy-switch`;
//! harness/tests/crash_points.rs) finds the doomed segments still parked.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use super::partitions::SharedLog;
use crate::limits::{COPY_BYTES_PER_CHECKPOINT_MAX, COPY_LIVE_PERCENT_MAX};

/// The parked segments to free now: `parked` are (first index, bytes on disk), `live` the
/// bytes partitions retain in each. Oldest first, until `COPY_BYTES_PER_CHECKPOINT_MAX`
/// live bytes (at least one segment, whatever its live bytes).
pub fn doomed(parked: &[(u64, u64)], live: &BTreeMap<u64, u64>) -> BTreeSet<u64> {
    let mut chosen = BTreeSet::new();
    let mut budget = 0u64;
    for (segment, bytes) in parked {
        let retained = live.get(segment).copied().unwrap_or(0);
        if retained == 0 || retained * 100 >= bytes * COPY_LIVE_PERCENT_MAX {
            continue;
        }
        if !chosen.is_empty() && budget + retained > COPY_BYTES_PER_CHECKPOINT_MAX {
            break;
        }
        budget += retained;
        chosen.insert(*segment);
    }
    chosen
}

/// Copies every batch of `logs` that lies in a `doomed` segment into its partition's own
/// files; returns the bytes copied.
pub fn copy_out(logs: &[SharedLog], doomed: &BTreeSet<u64>) -> io::Result<u64> {
    let mut copied = 0;
    if doomed.is_empty() {
        return Ok(0);
    }
    for log in logs {
        let bases = {
            let mut log = log.lock();
            log.close_active_if_in(doomed)?;
            log.segments_in(doomed)
        };
        for base in bases {
            let Some(plan) = log.lock().copy_plan(base, doomed)? else { continue };
            let done = plan.run(doomed)?;
            // Copies durable in the own file, the journal still pointing into the doomed
            // segments (kept parked): a restart must serve the old locations.
            crate::fault::point("crash-mid-segment-copy");
            let bytes = done.copied_bytes;
            if log.lock().switch_to(done)? {
                // The journal points at the copies, no checkpoint has released the doomed
                // segments yet: a restart must serve the copies.
                crate::fault::point("crash-after-segment-copy-switch");
                copied += bytes;
            }
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mostly_dead_segments_are_doomed_oldest_first_within_the_budget() {
        let mib = 1024 * 1024;
        let parked = [(1, 64 * mib), (100, 64 * mib), (200, 64 * mib), (300, 64 * mib), (400, 64 * mib)];
        let live = BTreeMap::from([(1, mib), (100, 40 * mib), (200, 31 * mib), (400, 2 * mib)]);
        // 100 is 62 % live: kept; 300 has nothing live: the checkpoint releases it, no copy.
        assert_eq!(doomed(&parked, &live), BTreeSet::from([1, 200, 400]));
        let huge = [(1, 1024 * mib), (2, 1024 * mib), (3, 1024 * mib)];
        let live = BTreeMap::from([(1, 200 * mib), (2, 200 * mib), (3, 1)]);
        assert_eq!(doomed(&huge, &live), BTreeSet::from([1]), "256 MiB of copying per checkpoint at most");
    }
}
