//! Small helpers shared by handlers: string conversions, Kafka's "no value" defaults, and the
//! checks every group API makes alike.

use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use onelog_state::txns::ProducerIdEpoch;

use crate::errors::{propose_error_code, Addressed};
use crate::leader::proposer::ProposeError;
use crate::security::authz::code;

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub fn topic_name(s: impl Into<String>) -> TopicName {
    TopicName(str_bytes(s))
}

/// Kafka's own message for an authorization failure (`Errors.message()`), which some refusals
/// carry beside the code; None for any other code.
pub fn refusal_message(code: i16) -> Option<StrBytes> {
    let message = match code {
        code::TOPIC_AUTHORIZATION_FAILED => "Topic authorization failed.",
        code::GROUP_AUTHORIZATION_FAILED => "Group authorization failed.",
        code::CLUSTER_AUTHORIZATION_FAILED => "Cluster authorization failed.",
        code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => "Transactional Id authorization failed.",
        _ => return None,
    };
    Some(str_bytes(message))
}

pub fn uuid(id: &[u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id)
}

pub fn uuid_bytes(id: &uuid::Uuid) -> [u8; 16] {
    *id.as_bytes()
}

/// Before the coordinator answers for a group, a new leader takes it over from the last
/// generation recorded in the log (see `Coordinator::adopt`).
pub fn adopt_group(lane: crate::ctx::Lane, group_id: &str) {
    let classic = &lane.coordinators.classic;
    classic.observe_term(lane.leadership.term());
    let (record, downgraded) = lane.applied.state(|s| {
        let record = s.groups.groups.get(group_id).and_then(|g| g.generation.clone());
        (record, s.consumer_groups.downgraded.contains(group_id))
    });
    match record {
        // A downgrade's generation: its first rebalance hands out the partitions of the
        // consumer-protocol member that left (online migration).
        Some(record) if downgraded => classic.adopt_downgraded(&record),
        Some(record) => classic.adopt(&record),
        None => {}
    }
}

/// A group id Kafka refuses (empty) or onelog cannot store (longer than
/// `GROUP_ID_BYTES_MAX`): INVALID_GROUP_ID.
pub fn group_id_invalid(group_id: &str) -> bool {
    group_id.is_empty() || group_id.len() > crate::limits::GROUP_ID_BYTES_MAX
}

/// A group op that did not reach the log: NOT_COORDINATOR sends the client to find the new
/// leader (every client retries it); a stopped node is COORDINATOR_NOT_AVAILABLE.
pub fn group_op_failed(e: &ProposeError) -> i16 {
    if let ProposeError::Fatal(_) = e {
        tracing::warn!(error = %e, "group op not committed");
    }
    propose_error_code(e, Addressed::Coordinator)
}

/// A request's producer id and epoch.
pub fn producer(id: ProducerId, epoch: i16) -> ProducerIdEpoch {
    ProducerIdEpoch { producer_id: id.0, producer_epoch: epoch }
}

/// A refused group heartbeat (ConsumerGroupHeartbeat, StreamsGroupHeartbeat): counted, one log
/// line per interval (a client looping on a bad request must not flood the log). A coordinator
/// move is routine and not logged.
pub fn log_heartbeat_refusal(
    incident: &crate::incident::Incident,
    api: &'static str,
    (group_id, member_id): (&str, &str),
    code: i16,
    message: Option<&str>,
) {
    if [kafka_compat::error_code::NOT_COORDINATOR, kafka_compat::error_code::COORDINATOR_NOT_AVAILABLE]
        .contains(&code)
    {
        return;
    }
    incident.record(|tally| {
        tracing::info!(
            group_id,
            member_id,
            error = kafka_compat::error_code::name(code),
            message = message.unwrap_or(""),
            suppressed = tally.suppressed,
            total = tally.total,
            "{api} refused"
        )
    });
}
