//! Benchmark (not a test) of the leader's batch validation, per codec and batch size:
//! `batch::validate` (CRC, header, every record walked, compressed batches inflated as a
//! bounded stream) against the CRC check alone, which is all the produce path did for a
//! compressed batch before issue 13. Prints MB/s of batch bytes and µs per batch.
//!
//!   cargo run --release -p kafka-compat --features testing --example validate_bench

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_compat::batch::{compute_crc, validate, Budget};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

const MEASURE_FOR: Duration = Duration::from_millis(400);

/// `count` records of `value_bytes` each: JSON-like text that compresses about 3-5x.
fn batch(count: usize, value_bytes: usize, compression: Compression) -> Bytes {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let records: Vec<Record> = (0..count)
        .map(|i| {
            let mut value = Vec::with_capacity(value_bytes);
            while value.len() < value_bytes {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                value.extend_from_slice(
                    format!("{{\"id\":{},\"v\":\"{:x}\"}},", i, seed % 100_000).as_bytes(),
                );
            }
            value.truncate(value_bytes);
            let key = format!("key-{i}");
            kafka_compat::testing::record(
                i as i64,
                1_700_000_000_000 + i as i64,
                Some(key.as_bytes()),
                &value,
            )
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression })
        .expect("encode");
    buf.freeze()
}

/// Mean time of one call of `f`, repeated for `MEASURE_FOR`.
fn time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < MEASURE_FOR {
        f();
        n += 1;
    }
    start.elapsed() / n
}

fn main() {
    let budget = Budget { batch_bytes_max: 64 << 20, inflated_bytes_max: 256 << 20 };
    println!(
        "{:<8} {:>10} {:>12} {:>12} {:>12} {:>10}",
        "codec", "records", "batch bytes", "crc µs", "validate µs", "MB/s"
    );
    for (count, value_bytes) in [(100, 150), (1_000, 1_000)] {
        for codec in
            [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
        {
            let bytes = batch(count, value_bytes, codec);
            assert!(validate(&bytes, budget).is_ok());
            let crc = time(|| {
                std::hint::black_box(compute_crc(&bytes));
            });
            let full = time(|| {
                std::hint::black_box(validate(&bytes, budget).is_ok());
            });
            let mb_s = bytes.len() as f64 / full.as_secs_f64() / 1e6;
            println!(
                "{:<8} {:>10} {:>12} {:>12.1} {:>12.1} {:>10.0}",
                format!("{codec:?}"),
                count,
                bytes.len(),
                crc.as_secs_f64() * 1e6,
                full.as_secs_f64() * 1e6,
                mb_s
            );
        }
    }
}
