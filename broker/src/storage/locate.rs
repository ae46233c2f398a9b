//! Where the produced batches of an applied entry lie in the Raft log's files (issue 31,
//! step 2 of docs/PERFORMANCE.md's write-amplification design).
//!
//! The leader stamps a batch before it proposes it, so the bytes of a batch inside a Raft entry
//! are the bytes a Fetch returns, and a partition index can point at them instead of a copy.
//! The entry's record holds bincode of the entry, and bincode writes a `Bytes` field as its
//! length and then the bytes, verbatim, in one write. Serializing the entry again into a sink
//! that only counts, and noting where each large write starts and from which memory it came,
//! gives every batch's position without copying a byte: the apply's `Effect::Append` carries a
//! clone of the very `Bytes` of the entry (same address, same length), so it is found by
//! identity. A batch apply makes itself (a transaction marker) is not in the entry and is not
//! found: it goes to the partition's own file.
//!
//! bincode 1.3's encoding of a value is deterministic in its layout (a map's order may differ,
//! never its length), so the positions are those of the record raft-store wrote. Reads check
//! each located batch's base offset and length anyway (`segment::check_located`).

use std::io;

use bytes::Bytes;
use raft_store::RecordLocation;

use kafka_compat::batch::BATCH_HEADER_BYTES;

/// Where one batch lies: the Raft log segment (by first index) and the byte position in its
/// file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLocation {
    pub segment: u64,
    pub position: u64,
}

/// The batches of one entry found in its record: (address, length) of their bytes in memory,
/// and their position in the segment file.
#[derive(Debug, Default)]
pub struct LocatedBatches {
    segment: u64,
    spans: Vec<(usize, usize, u64)>,
}

impl LocatedBatches {
    /// Locates every batch-sized `Bytes` of `entry`, whose record is at `record`.
    pub fn of<T: serde::Serialize>(entry: &T, record: RecordLocation) -> io::Result<LocatedBatches> {
        let mut sink = Spans { position: record.payload_position(), found: Vec::new() };
        bincode::serialize_into(&mut sink, entry).map_err(|e| io::Error::other(e.to_string()))?;
        let end = record.position + u64::from(record.len);
        if sink.position != end {
            // Not the layout raft-store wrote: locate nothing rather than something wrong.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("entry re-encoded to {} bytes, its record ends at {end}", sink.position),
            ));
        }
        Ok(LocatedBatches { segment: record.segment, spans: sink.found })
    }

    /// Where `batch` lies, if it is one of the entry's own `Bytes`.
    pub fn find(&self, batch: &Bytes) -> Option<LogLocation> {
        let key = (batch.as_ptr() as usize, batch.len());
        let (_, _, position) = self.spans.iter().find(|(at, len, _)| (*at, *len) == key)?;
        Some(LogLocation { segment: self.segment, position: *position })
    }
}

/// A writer that keeps nothing: it counts bytes and notes where each batch-sized write starts.
struct Spans {
    position: u64,
    found: Vec<(usize, usize, u64)>,
}

impl io::Write for Spans {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() >= BATCH_HEADER_BYTES {
            self.found.push((buf.as_ptr() as usize, buf.len(), self.position));
        }
        self.position += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use onelog_state::command::{Command, LeaderStamp, Op, PartitionAppend, ProduceOp};
    use openraft::storage::RaftLogStorageExt;
    use openraft::RaftLogReader;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    use super::*;
    use crate::raft::TypeConfig;

    fn produce_entry(index: u64, batches: &[Vec<Bytes>]) -> Entry<TypeConfig> {
        let partitions = batches
            .iter()
            .enumerate()
            .map(|(p, b)| PartitionAppend {
                topic: format!("topic-{p}"),
                partition: p as i32,
                batches: b.clone(),
            })
            .collect();
        let command =
            Command { stamp: LeaderStamp::default(), ops: vec![Op::Produce(ProduceOp { partitions })] };
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(command),
        }
    }

    fn batch(len: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    /// Entries written by raft-store, located again from the entries as applied (here the same
    /// values, read back and decoded as openraft hands them to apply): every batch's bytes are
    /// found at its location in the segment file, and a batch of equal bytes elsewhere in
    /// memory is not taken for one of them.
    #[tokio::test]
    async fn every_batch_is_found_where_raft_store_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            raft_store::LogStore::<TypeConfig>::open(dir.path(), raft_store::LogStoreOptions::default())
                .unwrap();
        let entries: Vec<_> = (1..=3u64)
            .map(|i| {
                let sizes = [[61, 300], [1000, 4096], [70, 61]][i as usize - 1];
                produce_entry(
                    i,
                    &[vec![batch(sizes[0], i as u8)], vec![batch(sizes[1], 10 + i as u8), batch(80, 7)]],
                )
            })
            .collect();
        store.blocking_append(entries).await.unwrap();
        let reader = store.reader();
        let applied = store.try_get_log_entries(1..=3).await.unwrap();
        for entry in &applied {
            let record = reader.location(entry.log_id.index).unwrap();
            let located = LocatedBatches::of(entry, record).unwrap();
            let EntryPayload::Normal(command) = &entry.payload else { unreachable!() };
            let Op::Produce(op) = &command.ops[0] else { unreachable!() };
            for batch in op.partitions.iter().flat_map(|p| &p.batches) {
                let at = located.find(batch).expect("a batch of the entry is located");
                let file = reader.segment_file(at.segment).unwrap();
                let mut stored = vec![0u8; batch.len()];
                file.read_exact_at(&mut stored, at.position).unwrap();
                assert_eq!(stored, batch.as_ref(), "entry {}", entry.log_id.index);
                assert_eq!(located.find(&Bytes::copy_from_slice(batch)), None, "a copy is not the entry's");
            }
        }
    }

    /// A record of another length than the entry re-encodes to is refused, not mislocated.
    #[test]
    fn a_record_that_does_not_match_the_encoding_locates_nothing() {
        let entry = produce_entry(1, &[vec![batch(100, 1)]]);
        let len = bincode::serialized_size(&entry).unwrap() as u32 + raft_store::RECORD_HEADER_BYTES as u32;
        let record = RecordLocation { segment: 1, position: 0, len };
        assert!(LocatedBatches::of(&entry, record).is_ok());
        let shorter = RecordLocation { len: len - 1, ..record };
        assert!(LocatedBatches::of(&entry, shorter).is_err());
    }
}
