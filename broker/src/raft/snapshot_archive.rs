//! Snapshot archives: what a leader sends a follower that is too far behind for the log
//! (DESIGN §3): the checkpoint plus, for every partition, its stored batches up to the
//! checkpointed log end offset.
//!
//! Format (all integers big-endian):
//! ```text
//! "OLSN" | version u32 | checkpoint_len u64 | checkpoint bytes | partitions u32 |
//!   { topic_id [16] | partition i32 | first_offset i64 | data_len u64 | data }*  | crc32c u32
//! ```
//! The CRC covers everything before it. Batches are copied byte for byte, so a follower
//! installing an archive holds exactly the leader's bytes and its digests match.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::checkpoint::{self, Checkpoint};
use crate::storage::partitions::Partitions;

const MAGIC: &[u8; 4] = b"OLSN";
/// 1: onelog 0.1.0 on. The checkpoint inside carries its own format version.
const VERSION: u32 = 1;

/// Largest checkpoint an archive may claim; checked before allocating.
const CHECKPOINT_BYTES_MAX: u64 = 1 << 30;
/// Partition bytes are copied into an archive in reads of about this size.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Writes that also feed a running CRC32C.
struct CrcWriter<W: Write> {
    inner: W,
    crc: u32,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct CrcReader<R: Read> {
    inner: R,
    crc: u32,
}

impl<R: Read> Read for CrcReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
}

/// Writes the archive of `checkpoint` (whose encoded form is `checkpoint_bytes`) to `path`.
pub fn write(
    path: &Path,
    checkpoint: &Checkpoint,
    checkpoint_bytes: &[u8],
    partitions: &Partitions,
) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = CrcWriter { inner: BufWriter::new(File::create(&tmp)?), crc: 0 };
    out.write_all(MAGIC)?;
    out.write_all(&VERSION.to_be_bytes())?;
    out.write_all(&(checkpoint_bytes.len() as u64).to_be_bytes())?;
    out.write_all(checkpoint_bytes)?;
    let logs: Vec<_> = checkpoint
        .state
        .topics
        .values()
        .flat_map(|t| {
            t.partitions.iter().enumerate().map(move |(p, ps)| (t.topic_id, p as i32, ps.log_end_offset))
        })
        .collect();
    out.write_all(&(logs.len() as u32).to_be_bytes())?;
    for (topic_id, partition, end_offset) in logs {
        let log = partitions.get(&topic_id, partition).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no log for partition {partition}"))
        })?;
        let log = log.lock();
        let (first_offset, len) = log.export_extent(end_offset);
        out.write_all(&topic_id)?;
        out.write_all(&partition.to_be_bytes())?;
        out.write_all(&first_offset.to_be_bytes())?;
        out.write_all(&len.to_be_bytes())?;
        // Batches wherever they lie: the partition's files or the Raft log's.
        let mut written: io::Result<()> = Ok(());
        let (_, copied) =
            log.visit_stored_bytes(first_offset, end_offset, COPY_CHUNK_BYTES, &mut |bytes| {
                if written.is_ok() {
                    written = out.write_all(bytes);
                }
            })?;
        written?;
        if copied != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("partition {partition}: {copied} of {len} bytes"),
            ));
        }
    }
    let crc = out.crc;
    let mut inner = out.inner.into_inner().map_err(|e| e.into_error())?;
    inner.write_all(&crc.to_be_bytes())?;
    inner.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// One partition's data as found in an archive.
pub struct ArchivedPartition {
    pub topic_id: [u8; 16],
    pub partition: i32,
    pub first_offset: i64,
}

/// Reads an archive: returns the checkpoint and calls `sink` with each partition's data
/// reader, which must consume exactly the data. The CRC is verified at the end; the caller
/// must discard what `sink` wrote if this returns an error.
pub fn read(
    path: &Path,
    mut sink: impl FnMut(&ArchivedPartition, &mut dyn Read, u64) -> io::Result<()>,
) -> io::Result<(Checkpoint, Vec<u8>)> {
    let invalid = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("snapshot archive: {why}"));
    let file = File::open(path)?;
    let archive_len = file.metadata()?.len();
    if archive_len < 4 {
        return Err(invalid("too short"));
    }
    let mut input = CrcReader { inner: BufReader::new(file).take(archive_len - 4), crc: 0 };
    let mut head = [0u8; 16];
    input.read_exact(&mut head)?;
    if &head[..4] != MAGIC {
        return Err(invalid("bad magic"));
    }
    let version = u32::from_be_bytes(head[4..8].try_into().expect("4"));
    if version != VERSION {
        let too_new =
            crate::upgrade::TooNew { what: "snapshot archive", found: version, read: VERSION..=VERSION };
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: {too_new}", path.display())));
    }
    let checkpoint_len = u64::from_be_bytes(head[8..16].try_into().expect("8"));
    if checkpoint_len > CHECKPOINT_BYTES_MAX || checkpoint_len > archive_len {
        return Err(invalid("checkpoint length out of range"));
    }
    let mut checkpoint_bytes = vec![0u8; checkpoint_len as usize];
    input.read_exact(&mut checkpoint_bytes)?;
    let checkpoint = checkpoint::decode(&checkpoint_bytes)?;
    let mut count = [0u8; 4];
    input.read_exact(&mut count)?;
    for _ in 0..u32::from_be_bytes(count) {
        let mut h = [0u8; 36];
        input.read_exact(&mut h)?;
        let part = ArchivedPartition {
            topic_id: h[..16].try_into().expect("16"),
            partition: i32::from_be_bytes(h[16..20].try_into().expect("4")),
            first_offset: i64::from_be_bytes(h[20..28].try_into().expect("8")),
        };
        let len = u64::from_be_bytes(h[28..36].try_into().expect("8"));
        if len > archive_len {
            return Err(invalid("partition length out of range"));
        }
        let mut data = (&mut input).take(len);
        sink(&part, &mut data, len)?;
        if data.limit() != 0 {
            return Err(invalid("partition data not fully consumed"));
        }
    }
    let computed = input.crc;
    let mut file = input.inner.into_inner();
    let mut crc = [0u8; 4];
    file.read_exact(&mut crc)?;
    if u32::from_be_bytes(crc) != computed {
        return Err(invalid("CRC mismatch"));
    }
    Ok((checkpoint, checkpoint_bytes))
}
