//! Fuzz target: the record set of one Produce partition, parsed as the produce handler does
//! (broker/src/handlers/produce.rs): `batch::validate_record_set` splits and validates it, and
//! each batch it accepts is stamped as the leader stamps it before proposing.
//!
//! Kept a thin call into the library on purpose: when the full batch validator (decompression
//! with a budget, record-count checks; issue 13) lands, this target points at it.
#![no_main]

use bytes::Bytes;
use kafka_compat::batch::{stamp_batch, validate_record_set, BatchStamp};
use libfuzzer_sys::fuzz_target;

/// `message.max.bytes`' default (Kafka: 1 MiB + 12 bytes of log overhead).
const MESSAGE_MAX_BYTES: usize = 1_048_588;

fuzz_target!(|records: &[u8]| {
    let Ok(batches) = validate_record_set(&Bytes::copy_from_slice(records), MESSAGE_MAX_BYTES) else {
        return;
    };
    for batch in batches {
        let stamp =
            BatchStamp { base_offset: 1 << 40, partition_leader_epoch: 7, log_append_time_ms: Some(1) };
        let stamped = stamp_batch(&batch.bytes, stamp);
        assert_eq!(stamped.len(), batch.bytes.len(), "stamping changes no length");
    }
});
