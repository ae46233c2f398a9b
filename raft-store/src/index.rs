//! The in-memory index from log index to record location, so reading an entry is one `pread`.
//!
//! It covers the live entries only: `[first, end)`, contiguous (Raft logs have no holes).
//! Which segment a record is in is found from the segment bases, so a location is 12 bytes of
//! payload per entry.

use std::collections::VecDeque;

/// Where one record lives inside its segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    /// Byte offset of the record header in the segment file.
    pub pos: u64,
    /// Bytes of the whole record, header included.
    pub len: u32,
}

impl Loc {
    pub fn end(&self) -> u64 {
        self.pos + u64::from(self.len)
    }
}

/// Locations of the live entries `[first, first + locs.len())`.
#[derive(Debug, Default)]
pub(crate) struct EntryIndex {
    first: u64,
    locs: VecDeque<Loc>,
}

impl EntryIndex {
    /// An empty index whose next entry will be `first`.
    pub fn new(first: u64) -> Self {
        EntryIndex { first, locs: VecDeque::new() }
    }

    pub fn first(&self) -> u64 {
        self.first
    }

    /// One past the last live index: the index the next append must carry.
    pub fn end(&self) -> u64 {
        self.first + self.locs.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    pub fn get(&self, index: u64) -> Option<Loc> {
        let offset = index.checked_sub(self.first)?;
        self.locs.get(usize::try_from(offset).ok()?).copied()
    }

    /// Records the location of entry `end()`.
    pub fn push(&mut self, loc: Loc) {
        self.locs.push_back(loc);
    }

    /// Drops every entry `>= index`.
    pub fn truncate_from(&mut self, index: u64) {
        let keep = index.saturating_sub(self.first).min(self.locs.len() as u64);
        self.locs.truncate(keep as usize);
    }

    /// Drops every entry `<= index`; an empty index then expects `index + 1` next.
    pub fn purge_upto(&mut self, index: u64) {
        if index < self.first {
            return;
        }
        let drop = (index - self.first + 1).min(self.locs.len() as u64);
        self.locs.drain(..drop as usize);
        self.first = index + 1;
    }

    /// Forgets everything; the next entry will be `first`.
    pub fn reset(&mut self, first: u64) {
        self.locs.clear();
        self.first = first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(first: u64, n: u64) -> EntryIndex {
        let mut idx = EntryIndex::new(first);
        for i in 0..n {
            idx.push(Loc { pos: i * 10, len: 10 });
        }
        idx
    }

    #[test]
    fn truncate_and_purge_keep_positions() {
        let mut idx = index_of(5, 10); // 5..15
        assert_eq!(idx.get(7), Some(Loc { pos: 20, len: 10 }));
        assert_eq!(idx.get(4), None);
        idx.truncate_from(12);
        assert_eq!(idx.end(), 12);
        idx.purge_upto(6);
        assert_eq!((idx.first(), idx.end()), (7, 12));
        assert_eq!(idx.get(7), Some(Loc { pos: 20, len: 10 }));
        idx.purge_upto(20);
        assert!(idx.is_empty());
        assert_eq!(idx.end(), 21);
        idx.truncate_from(0);
        assert_eq!(idx.end(), 21);
    }
}
