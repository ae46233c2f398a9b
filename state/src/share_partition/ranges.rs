//! Bookkeeping of the in-flight map: a range is split where offsets inside it diverge and
//! joined again with a neighbour of its batch that agrees, so the map stays about as small
//! as Kafka's cache of batches; finished records at the head are dropped as the start
//! offset moves past them; and the window's shape is asserted after every change.

use super::model::SharePartition;

impl SharePartition {
    /// Makes `offset` the first offset of a range when a range spans it.
    pub(super) fn split_at(&mut self, offset: i64) {
        let Some((_, range)) = self.records.range_mut(..offset).next_back() else { return };
        if range.last_offset < offset {
            return;
        }
        let upper = range.clone();
        range.last_offset = offset - 1;
        self.records.insert(offset, upper);
    }

    /// Makes [first, last] exactly a run of whole ranges.
    pub(super) fn isolate(&mut self, first: i64, last: i64) {
        self.split_at(first);
        self.split_at(last + 1);
    }

    /// The keys of the ranges overlapping [first, last].
    pub(super) fn keys_within(&self, first: i64, last: i64) -> Vec<i64> {
        let spanning = self.records.range(..first).next_back().filter(|(_, r)| r.last_offset >= first);
        let from = spanning.map_or(first, |(&k, _)| k);
        self.records.range(from..=last).map(|(&k, _)| k).collect()
    }

    /// Joins agreeing neighbours among the ranges overlapping [first, last] and the ranges
    /// right before and after them.
    pub(super) fn coalesce(&mut self, first: i64, last: i64) {
        let from = self.records.range(..first).next_back().map_or(first, |(&k, _)| k);
        let keys: Vec<i64> = self.records.range(from..=last.saturating_add(1)).map(|(&k, _)| k).collect();
        let mut kept: Option<i64> = None;
        for key in keys {
            if kept.is_some_and(|prev| self.join(prev, key)) {
                continue;
            }
            kept = Some(key);
        }
    }

    /// Joins the range at `key` into the one at `prev` when they agree. Whether it did.
    fn join(&mut self, prev: i64, key: i64) -> bool {
        let (Some(a), Some(b)) = (self.records.get(&prev), self.records.get(&key)) else { return false };
        if a.last_offset + 1 != key || !a.joinable(b) {
            return false;
        }
        let last = b.last_offset;
        self.records.remove(&key);
        if let Some(a) = self.records.get_mut(&prev) {
            a.last_offset = last;
        }
        true
    }

    /// Kafka's `maybeUpdateCachedStateAndOffsets`: the start offset moves over finished
    /// records at the head of the window, which leave the map.
    pub(super) fn advance_start(&mut self) {
        while let Some(head) = self.records.first_entry() {
            if !head.get().state.is_terminal() {
                break;
            }
            self.start_offset = head.remove().last_offset + 1;
        }
    }

    /// Forgets every record below `offset`.
    pub(super) fn drop_below(&mut self, offset: i64) {
        self.split_at(offset);
        self.records = self.records.split_off(&offset);
    }

    /// The window's shape, checked in release builds too: the ranges start at the start
    /// offset and end right before the next offset (contiguity in between is the tests').
    pub(super) fn assert_window(&self) {
        let first = self.records.first_key_value().map(|(&k, _)| k);
        let end = self.records.last_key_value().map(|(_, r)| r.last_offset + 1);
        let shaped = match (first, end) {
            (Some(first), Some(end)) => first == self.start_offset && end == self.next_offset,
            _ => self.start_offset == self.next_offset,
        };
        assert!(
            shaped,
            "share-partition window broken: start {} next {} first range {first:?} end {end:?}",
            self.start_offset, self.next_offset
        );
    }
}
