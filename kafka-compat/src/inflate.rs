//! Bounded, streaming decompression of a record batch's records section.
//!
//! The leader validates compressed batches as Kafka's `LogValidator` does, and ListOffsets by
//! timestamp looks inside a stored batch. Neither may cost what the client chooses: a 1 MB gzip
//! body can inflate to 1 GB. So nothing here inflates a whole batch into memory: each codec is
//! read as a stream through a small buffer, and [`Budgeted`] stops the stream with
//! [`BudgetExceeded`] once it has produced more bytes than the caller allowed. Memory is the
//! codec's own state (zstd's window is capped by [`ZSTD_WINDOW_LOG_MAX`]) plus one snappy block
//! of at most the remaining budget.

use std::io::{self, BufRead, BufReader, Read};

/// Kafka's codec ids (the low three bits of the batch attributes).
pub const COMPRESSION_NONE: i16 = 0;
pub const COMPRESSION_GZIP: i16 = 1;
pub const COMPRESSION_SNAPPY: i16 = 2;
pub const COMPRESSION_LZ4: i16 = 3;
pub const COMPRESSION_ZSTD: i16 = 4;

/// Largest zstd window a batch may ask the decoder for (log2 bytes): 16 MiB. zstd levels up to
/// 19, the most any Kafka client uses by default (Java level 3, librdkafka level 3), need at
/// most 2^23; the decoder's own default (2^27, 128 MiB) would let one hostile frame reserve
/// that much per request.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// Buffer between a decoder and the record walker (bytes).
const STREAM_BUFFER_BYTES: usize = 16 * 1024;

/// The error a [`Budgeted`] stream fails with once it passes its budget.
#[derive(Debug)]
pub struct BudgetExceeded;

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inflated past the budget")
    }
}

impl std::error::Error for BudgetExceeded {}

/// Whether `e` is a [`Budgeted`] stream passing its budget (not a corrupt body).
pub fn is_budget_exceeded(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<BudgetExceeded>())
}

/// A reader that fails with [`BudgetExceeded`] once `inner` produced more than `remaining`
/// bytes in total.
pub struct Budgeted<R> {
    inner: R,
    remaining: usize,
    /// Bytes produced so far.
    pub produced: usize,
}

impl<R: Read> Read for Budgeted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > self.remaining {
            return Err(io::Error::other(BudgetExceeded));
        }
        self.remaining -= n;
        self.produced += n;
        Ok(n)
    }
}

/// The inflated records of one batch, buffered, within a budget.
pub type InflatingReader<'a> = BufReader<Budgeted<Box<dyn Read + 'a>>>;

/// A buffered stream of the inflated records of a batch compressed with `codec`, producing at
/// most `budget_bytes`. `None` for an unknown codec.
pub fn inflating_reader<'a>(
    codec: i16,
    compressed: &'a [u8],
    budget_bytes: usize,
) -> io::Result<Option<InflatingReader<'a>>> {
    let decoder: Box<dyn Read + 'a> = match codec {
        // Java's GZIPInputStream reads concatenated members; so does this.
        COMPRESSION_GZIP => Box::new(flate2::read::MultiGzDecoder::new(compressed)),
        COMPRESSION_SNAPPY => Box::new(SnappyReader::new(compressed, budget_bytes)),
        // Kafka v2 batches use the standard LZ4 frame format (KIP-57).
        COMPRESSION_LZ4 => Box::new(Lz4Reader(Some(lz4::Decoder::new(compressed)?))),
        COMPRESSION_ZSTD => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(decoder)
        }
        _ => return Ok(None),
    };
    let budgeted = Budgeted { inner: decoder, remaining: budget_bytes, produced: 0 };
    Ok(Some(BufReader::with_capacity(STREAM_BUFFER_BYTES, budgeted)))
}

/// snappy-java's stream header (`SnappyOutputStream`), which Java producers write; librdkafka
/// writes one raw snappy block. Kafka's `SnappyInputStream` reads both, as does this.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

/// Snappy in Kafka's two framings, one block in memory at a time; a block that declares more
/// inflated bytes than the budget left fails with [`BudgetExceeded`] before it is allocated.
struct SnappyReader<'a> {
    /// Compressed bytes not yet decoded: xerial blocks, or one raw block.
    rest: &'a [u8],
    xerial: bool,
    block: Vec<u8>,
    at: usize,
    budget_bytes: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(compressed: &'a [u8], budget_bytes: usize) -> Self {
        let xerial = compressed.len() >= XERIAL_HEADER_BYTES && compressed.starts_with(XERIAL_MAGIC);
        let rest = if xerial { &compressed[XERIAL_HEADER_BYTES..] } else { compressed };
        SnappyReader { rest, xerial, block: Vec::new(), at: 0, budget_bytes }
    }

    /// Decodes the next block into `self.block`; false at the end of the stream.
    fn next_block(&mut self) -> io::Result<bool> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let raw = if self.xerial {
            let Some((len, body)) = self.rest.split_first_chunk::<4>() else {
                return Err(corrupt("snappy block length is truncated"));
            };
            let len = u32::from_be_bytes(*len) as usize;
            if len > body.len() {
                return Err(corrupt("snappy block runs past the batch"));
            }
            let (raw, rest) = body.split_at(len);
            self.rest = rest;
            raw
        } else {
            std::mem::take(&mut self.rest)
        };
        let len = snap::raw::decompress_len(raw).map_err(|e| corrupt(&e.to_string()))?;
        if len > self.budget_bytes {
            return Err(io::Error::other(BudgetExceeded));
        }
        self.budget_bytes -= len;
        self.block.clear();
        self.block.resize(len, 0);
        let n = snap::raw::Decoder::new()
            .decompress(raw, &mut self.block)
            .map_err(|e| corrupt(&e.to_string()))?;
        self.block.truncate(n);
        self.at = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// An LZ4 frame reader that fails on a frame cut short: the `lz4` crate's decoder reports the
/// end of its input as the end of the stream, which librdkafka and Java do not accept.
struct Lz4Reader<'a>(Option<lz4::Decoder<&'a [u8]>>);

impl Read for Lz4Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(decoder) = self.0.as_mut() else { return Ok(0) };
        let n = decoder.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let (_, finished) = self.0.take().expect("checked above").finish();
            finished.map_err(|_| corrupt("lz4 frame is cut short"))?;
        }
        Ok(n)
    }
}

fn corrupt(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// Skips `n` bytes of `r` without copying them anywhere; false if the stream ended first.
pub fn skip(r: &mut impl BufRead, mut n: usize) -> io::Result<bool> {
    while n > 0 {
        let available = r.fill_buf()?.len();
        if available == 0 {
            return Ok(false);
        }
        let step = available.min(n);
        r.consume(step);
        n -= step;
    }
    Ok(true)
}
