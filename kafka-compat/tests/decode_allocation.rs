//! Regression tests for decoders that reserved memory from a count read off the wire before
//! decoding a single element (found by the `request_decode` fuzz target, issue 13; fixed in the
//! vendored kafka-protocol, vendor/kafka-protocol/ONELOG.md). Each decodes a few bytes that claim
//! millions of elements and asserts that no single allocation on this thread exceeded
//! `ALLOCATION_BYTES_MAX`: the decode must fail for lack of bytes, having reserved at most a
//! few elements' worth.
//!
//! A counting global allocator records the largest allocation per thread (tests run on
//! parallel threads; a const-initialized thread-local allocates nothing itself).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_compat::codec::{decode_request, DecodeError};
use kafka_compat::kafka_protocol::records::RecordBatchDecoder;

struct PeakAlloc;

thread_local! {
    static PEAK_BYTES: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; only records the requested size.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = PEAK_BYTES.try_with(|p| p.set(p.get().max(layout.size())));
        // SAFETY: the caller's contract is passed on to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = PEAK_BYTES.try_with(|p| p.set(p.get().max(new_size)));
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// The largest single allocation a decode of these tiny inputs may make: generous for a few
/// KiB of input, far below the hundreds of MB the unchecked counts asked for.
const ALLOCATION_BYTES_MAX: usize = 1 << 20;

/// Runs `f` and returns the largest single allocation it made on this thread.
fn peak_allocation(f: impl FnOnce()) -> usize {
    PEAK_BYTES.with(|p| p.set(0));
    f();
    PEAK_BYTES.with(|p| p.get())
}

#[test]
fn array_count_from_the_wire_is_not_reserved_alter_client_quotas_v0() {
    // The fuzzer's reproducer (14 bytes): AlterClientQuotas v0, an empty client id, then an
    // entries count of 8,618,883 (0x00838383) with no entries: 620 MB reserved before the fix.
    let frame = Bytes::from_static(&[0, 49, 0, 0, 131, 131, 131, 131, 0, 0, 0, 131, 131, 131]);
    let mut result = None;
    let peak = peak_allocation(|| result = Some(decode_request(frame)));
    assert!(matches!(result, Some(Err(DecodeError::Malformed { .. }))), "{result:?}");
    assert!(peak <= ALLOCATION_BYTES_MAX, "one allocation of {peak} bytes for a 14-byte frame");
}

#[test]
fn compact_array_count_from_the_wire_is_not_reserved_metadata_v12() {
    // Metadata v12 (flexible: header v2, compact arrays): a null client id, no tagged fields,
    // then a topics count of 2^22 encoded as the unsigned varint 2^22 + 1, and nothing else.
    let mut frame = BytesMut::new();
    frame.put_i16(3);
    frame.put_i16(12);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_u8(0);
    let mut n: u32 = (1 << 22) + 1;
    while n >= 0x80 {
        frame.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    frame.put_u8(n as u8);
    let len = frame.len();
    let mut result = None;
    let peak = peak_allocation(|| result = Some(decode_request(frame.freeze())));
    assert!(matches!(result, Some(Err(DecodeError::Malformed { .. }))), "{result:?}");
    assert!(peak <= ALLOCATION_BYTES_MAX, "one allocation of {peak} bytes for a {len}-byte frame");
}

#[test]
fn record_count_from_the_wire_is_not_reserved_by_the_record_decoder() {
    // An uncompressed v2 batch with a valid CRC that claims 2,000,000 records and holds none:
    // the produce handler decodes records like this for compacted topics (handlers/produce.rs).
    let record_count: i32 = 2_000_000;
    let mut batch = BytesMut::new();
    batch.put_i64(0); // base offset
    batch.put_i32(49); // batch length: the header after this field
    batch.put_i32(-1); // partition leader epoch
    batch.put_i8(2); // magic
    batch.put_u32(0); // crc, set below
    batch.put_i16(0); // attributes: uncompressed, create time
    batch.put_i32(record_count - 1); // last offset delta
    batch.put_i64(0); // base timestamp
    batch.put_i64(0); // max timestamp
    batch.put_i64(-1); // producer id
    batch.put_i16(-1); // producer epoch
    batch.put_i32(-1); // base sequence
    batch.put_i32(record_count);
    let crc = kafka_compat::batch::compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut bytes = batch.freeze();
    let mut failed = false;
    let peak = peak_allocation(|| failed = RecordBatchDecoder::decode(&mut bytes).is_err());
    assert!(failed, "a batch claiming {record_count} records and holding none decoded");
    assert!(peak <= ALLOCATION_BYTES_MAX, "one allocation of {peak} bytes for a 61-byte batch");
}
