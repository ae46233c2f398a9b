//! Kafka error codes as data (`org.apache.kafka.common.protocol.Errors`).
//!
//! Only the codes onelog returns or its tests expect are named, each once, here: the broker,
//! `state` and the harness use these names and define none of their own. Each constant has
//! Kafka's name (a test checks it against [`name`]); they travel through the broker as plain
//! `i16`s so that one failing partition never fails a whole request.

pub const NONE: i16 = 0;
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const INVALID_FETCH_SIZE: i16 = 4;
pub const LEADER_NOT_AVAILABLE: i16 = 5;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const REQUEST_TIMED_OUT: i16 = 7;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const RECORD_LIST_TOO_LARGE: i16 = 18;
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const INVALID_TIMESTAMP: i16 = 32;
pub const UNSUPPORTED_VERSION: i16 = 35;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REQUEST: i16 = 42;
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
pub const POLICY_VIOLATION: i16 = 44;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const NOT_CONTROLLER: i16 = 41;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
// KIP-554 (SCRAM credentials).
pub const RESOURCE_NOT_FOUND: i16 = 91;
pub const DUPLICATE_RESOURCE: i16 = 92;
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
pub const INVALID_RECORD: i16 = 87;
pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const FENCED_INSTANCE_ID: i16 = 82;
// The consumer group protocol (KIP-848, KIP-1251).
pub const FENCED_MEMBER_EPOCH: i16 = 110;
pub const UNRELEASED_INSTANCE_ID: i16 = 111;
pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
pub const STALE_MEMBER_EPOCH: i16 = 113;
pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
// Streams groups (KIP-1071).
pub const STREAMS_INVALID_TOPOLOGY: i16 = 130;
pub const STREAMS_INVALID_TOPOLOGY_EPOCH: i16 = 131;
pub const STREAMS_TOPOLOGY_FENCED: i16 = 132;
// Share groups (KIP-932).
pub const INVALID_RECORD_STATE: i16 = 121;
pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;
pub const SHARE_SESSION_LIMIT_REACHED: i16 = 133;
// Transactions (KIP-98, KIP-360, KIP-447, KIP-588, KIP-890, KIP-1050).
pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
pub const UNKNOWN_PRODUCER_ID: i16 = 59;
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
pub const PRODUCER_FENCED: i16 = 90;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
pub const TRANSACTION_ABORTABLE: i16 = 120;
// Authorization (`AclAuthorizer`; SECURITY_DISABLED: the ACL APIs with no authorizer).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const SECURITY_DISABLED: i16 = 54;
// SASL (KIP-43, KIP-152).
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
// APIs onelog answers without serving them: delegation tokens (KIP-48), log directories
// (KIP-113), preferred-leader elections (KIP-183, KIP-460), features (KIP-584), client
// telemetry (KIP-714).
pub const LOG_DIR_NOT_FOUND: i16 = 57;
pub const DELEGATION_TOKEN_AUTH_DISABLED: i16 = 61;
pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
pub const ELECTION_NOT_NEEDED: i16 = 84;
pub const INVALID_UPDATE_VERSION: i16 = 95;
pub const FEATURE_UPDATE_FAILED: i16 = 96;
pub const UNKNOWN_SUBSCRIPTION_ID: i16 = 117;

/// Kafka's name of an error code as its clients print it (`GROUP_ID_NOT_FOUND`), from
/// kafka-protocol's table; `NONE` for 0 and `UNKNOWN_ERROR_CODE_<n>` for a code it lacks.
pub fn name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(kafka_protocol::ResponseError::Unknown(n)) => format!("UNKNOWN_ERROR_CODE_{n}"),
        Some(e) => screaming_snake(&format!("{e:?}")),
    }
}

/// `GroupIdNotFound` → `GROUP_ID_NOT_FOUND`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_kafkas() {
        assert_eq!(super::name(super::GROUP_ID_NOT_FOUND), "GROUP_ID_NOT_FOUND");
        assert_eq!(super::name(super::TRANSACTIONAL_ID_NOT_FOUND), "TRANSACTIONAL_ID_NOT_FOUND");
        assert_eq!(super::name(super::UNKNOWN_SERVER_ERROR), "UNKNOWN_SERVER_ERROR");
        assert_eq!(super::name(super::NONE), "NONE");
        assert_eq!(super::name(-999), "UNKNOWN_ERROR_CODE_-999");
    }

    /// Every `pub const NAME: i16 = CODE;` of this file: its name is Kafka's for its code, and
    /// no code is named twice.
    #[test]
    fn every_constant_has_kafkas_name_once() {
        let mut seen = std::collections::BTreeMap::new();
        for line in include_str!("error_code.rs").lines() {
            let Some(rest) = line.strip_prefix("pub const ") else { continue };
            let (name, value) = rest.split_once(": i16 = ").expect("a constant line");
            let code: i16 = value.trim_end_matches(';').parse().expect("a literal code");
            assert_eq!(super::name(code), name, "error code {code}");
            if let Some(other) = seen.insert(code, name) {
                panic!("error code {code} is named twice: {other} and {name}");
            }
        }
        assert!(seen.len() > 70, "only {} constants found", seen.len());
    }
}
