//! The one mapping from transaction errors to Kafka error codes, by API and version.
//!
//! KIP-588: PRODUCER_FENCED exists from InitProducerId v3… and the transaction APIs' next
//! versions; older versions get INVALID_PRODUCER_EPOCH for the same condition. KIP-890 /
//! KIP-1050: TRANSACTION_ABORTABLE is understood from InitProducerId v6, AddPartitionsToTxn v5,
//! AddOffsetsToTxn v4, TxnOffsetCommit v4, EndTxn v4 and Produce v11; before that, the error
//! that makes Java (≥ 2.5) and librdkafka abort and bump the epoch is UNKNOWN_PRODUCER_ID.

use kafka_compat::error_code;
use kafka_protocol::messages::ApiKey;

use crate::txns::TxnError;

/// The first version of `api` that knows PRODUCER_FENCED (KIP-588).
fn producer_fenced_since(api: ApiKey) -> i16 {
    match api {
        ApiKey::InitProducerId => 4,
        ApiKey::AddPartitionsToTxn | ApiKey::AddOffsetsToTxn | ApiKey::EndTxn => 2,
        ApiKey::TxnOffsetCommit => 3,
        _ => i16::MAX,
    }
}

/// The first version of `api` that knows TRANSACTION_ABORTABLE (KIP-890).
fn abortable_since(api: ApiKey) -> i16 {
    match api {
        ApiKey::InitProducerId => 6,
        ApiKey::AddPartitionsToTxn => 5,
        ApiKey::AddOffsetsToTxn | ApiKey::TxnOffsetCommit | ApiKey::EndTxn => 4,
        ApiKey::Produce => 11,
        _ => i16::MAX,
    }
}

pub fn code(error: &TxnError, api: ApiKey, version: i16) -> i16 {
    match error {
        TxnError::InvalidProducerIdMapping => error_code::INVALID_PRODUCER_ID_MAPPING,
        TxnError::Fenced if api == ApiKey::Produce => error_code::INVALID_PRODUCER_EPOCH,
        TxnError::Fenced if version >= producer_fenced_since(api) => error_code::PRODUCER_FENCED,
        TxnError::Fenced => error_code::INVALID_PRODUCER_EPOCH,
        TxnError::AbortedByBroker(_) if version >= abortable_since(api) => error_code::TRANSACTION_ABORTABLE,
        // Produce: what Kafka answers after its coordinator aborted a transaction (the markers
        // bumped the epoch). InvalidProducerEpochException is abortable in Java ≥ 2.7; Java < 2.7
        // and librdkafka (2.12, rdkafka_request.c) treat it as fatal "fenced", so such a client
        // recreates its producer. UNKNOWN_PRODUCER_ID would be abortable for librdkafka, but Java
        // (2.5+) retries it until delivery.timeout.ms while the answer's log_start_offset is -1
        // or above the partition's last acked offset (a first write).
        TxnError::AbortedByBroker(_) if api == ApiKey::Produce => error_code::INVALID_PRODUCER_EPOCH,
        TxnError::AbortedByBroker(_) => error_code::UNKNOWN_PRODUCER_ID,
        TxnError::InvalidState(_) => error_code::INVALID_TXN_STATE,
        TxnError::InvalidTimeout(_) => error_code::INVALID_TRANSACTION_TIMEOUT,
        TxnError::ProducerIdsExhausted(_) => error_code::COORDINATOR_LOAD_IN_PROGRESS,
        // Retriable for every client: the commit is sent again after the writes.
        TxnError::CommitBeforeWrites => error_code::CONCURRENT_TRANSACTIONS,
        // Retriable: the decision it waits for is one round away.
        TxnError::PreviousUndecided => error_code::CONCURRENT_TRANSACTIONS,
    }
}

/// Not-yet-added partition in a transactional produce (KIP-890 part 1).
pub fn partition_not_added(version: i16) -> i16 {
    if version >= abortable_since(ApiKey::Produce) {
        error_code::TRANSACTION_ABORTABLE
    } else {
        // Abortable for Java ≥ 2.7 (fatal for librdkafka, see `code`); INVALID_TXN_STATE would be
        // fatal for Java too.
        error_code::INVALID_PRODUCER_EPOCH
    }
}
