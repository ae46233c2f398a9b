//! Records leaving their holder without an acknowledgement, and the window moving under the
//! group: a member leaving, being fenced or closing its share session (Kafka's
//! `releaseAcquiredRecords`), a lock deadline passing (Kafka's acquisition lock timeout),
//! the log start offset moving past in-flight records (retention, DeleteRecords: Kafka's
//! `updateCacheAndOffsets`), and an offset reset of an empty group.

use super::model::{span_len, InFlight, Limits, RecordState, SharePartition};

impl SharePartition {
    /// `member_id`'s acquired records become Available again, delivery counts kept (Archived
    /// at the delivery limit). Returns how many records it held.
    pub fn release_member(&mut self, member_id: &str, limits: &Limits) -> usize {
        self.release_where(limits, |r| r.member_id == member_id)
    }

    /// Lock expiry: acquired records whose deadline is at or before `now_ms` become
    /// Available again (Archived at the delivery limit). Returns how many.
    pub fn expire(&mut self, now_ms: i64, limits: &Limits) -> usize {
        self.release_where(limits, |r| r.deadline_ms <= now_ms)
    }

    fn release_where(&mut self, limits: &Limits, held: impl Fn(&InFlight) -> bool) -> usize {
        let mut released = 0;
        for (&first, r) in
            self.records.iter_mut().filter(|(_, r)| r.state == RecordState::Acquired && held(r))
        {
            let n = span_len(first, r.last_offset);
            if r.release(limits.delivery_count_limit) {
                self.totals.archived_by_limit += n;
            }
            released += n;
        }
        if released > 0 {
            self.coalesce(self.start_offset, self.next_offset - 1);
            self.advance_start();
        }
        self.assert_window();
        usize::try_from(released).unwrap_or(usize::MAX)
    }

    /// The log start offset moved to `log_start_offset`: in-flight records below it are gone
    /// from the log, so they are forgotten (Kafka archives them) and the window starts there.
    pub fn log_start_moved(&mut self, log_start_offset: i64) {
        if log_start_offset <= self.start_offset {
            return;
        }
        self.drop_below(log_start_offset);
        self.start_offset = log_start_offset;
        self.next_offset = self.next_offset.max(log_start_offset);
        self.advance_start();
        self.assert_window();
    }

    /// AlterShareGroupOffsets or an offset reset, only while the group is empty: the window
    /// starts over, empty, at `offset`. Totals are kept.
    pub fn reset(&mut self, offset: i64) {
        *self = SharePartition { totals: self.totals, ..SharePartition::new(offset) };
    }
}
