//! The broker's domain errors and the one mapping from them to Kafka error codes: proposals
//! that did not commit (by whom the request addressed), transaction failures, and transaction
//! errors by API and version (that table is `onelog_state::txn_errors`, shared with apply's
//! re-check of transactional writes). Every `match` here is exhaustive, without a catch-all
//! arm. A leaf module: it depends on nothing else of the broker.

use kafka_compat::error_code;
use kafka_protocol::messages::ApiKey;
pub use onelog_state::txn_errors::partition_not_added;
use onelog_state::txns::TxnError;

/// Why a proposal did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    #[error("this node is not the Raft leader")]
    NotLeader,
    #[error("the Raft node has stopped: {0}")]
    Fatal(String),
    /// The proposal alone would pass the Raft entry limit (`limits::ENTRY_BYTES_MAX`); nothing
    /// of it was proposed.
    #[error("the request needs {bytes} bytes in one Raft entry, over the limit of {max}")]
    TooLarge { bytes: usize, max: usize },
    /// The op's kind needs a higher `onelog.version` than the cluster finalized: a member of an
    /// older build could not read it (`Op::onelog_version`; `kafka-features.sh upgrade`).
    #[error("this needs onelog.version {needs}, and the cluster finalized {finalized}: finalize it with kafka-features.sh upgrade once every node runs a build that supports it")]
    NotFinalized { needs: i16, finalized: i16 },
}

/// Why a transaction request failed (`coord::txn`).
#[derive(Debug, Clone)]
pub enum TxnFailure {
    /// Not committed here, or this node does not coordinate (not the leader).
    Propose(ProposeError),
    /// The transaction state refused it.
    Txn(TxnError),
    /// A request Kafka refuses before looking at any transaction: the Kafka error code.
    Invalid(i16),
}

impl From<ProposeError> for TxnFailure {
    fn from(e: ProposeError) -> Self {
        TxnFailure::Propose(e)
    }
}

impl From<TxnError> for TxnFailure {
    fn from(e: TxnError) -> Self {
        TxnFailure::Txn(e)
    }
}

/// Why a transactional batch may not be written (Produce).
#[derive(Debug, Clone)]
pub enum WriteRefusal {
    Txn(TxnError),
    /// KIP-890 part 1: the transaction did not add the partition.
    NotAdded {
        transactional_id: String,
    },
}

/// Whom a request addressed: the same failed proposal means different things to each.
#[derive(Debug, Clone, Copy)]
pub enum Addressed {
    /// A partition's leader (Produce, WriteTxnMarkers): clients look the leader up again.
    PartitionLeader,
    /// The controller (topic administration): admin clients move to the controller.
    Controller,
    /// The group or transaction coordinator: clients find the coordinator again.
    Coordinator,
    /// Any broker, for an idempotent producer id (InitProducerId without a transactional id):
    /// Java's idempotent producer has no coordinator to move to, and retries this as it is.
    AnyBroker,
    /// `kafka-transactions.sh abort` (WriteTxnMarkers): the admin client looks the
    /// partition's leader up again and retries there, whatever stopped the abort.
    MarkerPartitionLeader,
}

pub fn propose_error_code(e: &ProposeError, addressed: Addressed) -> i16 {
    match (addressed, e) {
        // As a Kafka cluster answers a request whose feature is not finalized.
        (_, ProposeError::NotFinalized { .. }) => error_code::UNSUPPORTED_VERSION,
        (Addressed::PartitionLeader, ProposeError::NotLeader) => error_code::NOT_LEADER_OR_FOLLOWER,
        (Addressed::PartitionLeader, ProposeError::Fatal(_)) => error_code::KAFKA_STORAGE_ERROR,
        // Kafka's code for records that cannot be appended as one unit.
        (Addressed::PartitionLeader | Addressed::MarkerPartitionLeader, ProposeError::TooLarge { .. }) => {
            error_code::RECORD_LIST_TOO_LARGE
        }
        (
            Addressed::Controller | Addressed::Coordinator | Addressed::AnyBroker,
            ProposeError::TooLarge { .. },
        ) => error_code::INVALID_REQUEST,
        (Addressed::Controller, ProposeError::NotLeader) => error_code::NOT_CONTROLLER,
        (Addressed::Controller, ProposeError::Fatal(_)) => error_code::KAFKA_STORAGE_ERROR,
        (Addressed::Coordinator, ProposeError::NotLeader) => error_code::NOT_COORDINATOR,
        (Addressed::Coordinator, ProposeError::Fatal(_)) => error_code::COORDINATOR_NOT_AVAILABLE,
        (Addressed::AnyBroker, ProposeError::NotLeader | ProposeError::Fatal(_)) => {
            error_code::COORDINATOR_LOAD_IN_PROGRESS
        }
        (Addressed::MarkerPartitionLeader, ProposeError::NotLeader | ProposeError::Fatal(_)) => {
            error_code::NOT_LEADER_OR_FOLLOWER
        }
    }
}

/// A transaction error for `api` at `version` (KIP-588, KIP-890; see the table's header).
pub fn txn_error_code(e: &TxnError, api: ApiKey, version: i16) -> i16 {
    onelog_state::txn_errors::code(e, api, version)
}

/// A transaction request's failure for `api` at `version`.
pub fn txn_failure_code(failure: &TxnFailure, api: ApiKey, version: i16) -> i16 {
    match failure {
        TxnFailure::Propose(e) => propose_error_code(e, Addressed::Coordinator),
        TxnFailure::Txn(e) => txn_error_code(e, api, version),
        TxnFailure::Invalid(code) => *code,
    }
}

/// A transactional batch refused by the coordinator, for Produce at `version`.
pub fn write_refusal_code(refusal: &WriteRefusal, version: i16) -> i16 {
    match refusal {
        WriteRefusal::Txn(e) => txn_error_code(e, ApiKey::Produce, version),
        WriteRefusal::NotAdded { .. } => partition_not_added(version),
    }
}
