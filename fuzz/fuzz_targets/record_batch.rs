//! Fuzz target: the record set of one Produce partition, parsed as the produce handler does
//! (broker/src/handlers/produce.rs): `batch::validate_record_set` splits it and validates every
//! batch as Kafka's LogValidator does (CRC, record count, offset deltas, record framing,
//! compressed bodies inflated as a stream within a budget), and each batch it accepts is
//! stamped as the leader stamps it before proposing. A thin call into the library on purpose.
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
