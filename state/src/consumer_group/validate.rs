//! The stateless checks of a ConsumerGroupHeartbeat (spec §2, rules V1-V10), in Kafka's
//! order and with Kafka's messages: the handler runs them before proposing anything, and
//! the state machine runs them again so that a log entry can never carry an invalid request.

use kafka_compat::error_code;

use super::request::{
    GroupSettings, Heartbeat, Refusal, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};

/// Kafka's "empty": Java's `String.trim()` removes every char up to U+0020.
fn is_blank(s: &str) -> bool {
    s.trim_matches(|c: char| c <= ' ').is_empty()
}

fn invalid(message: &str) -> Result<(), Refusal> {
    Err(Refusal::new(error_code::INVALID_REQUEST, message))
}

pub fn validate(hb: &Heartbeat, settings: &GroupSettings) -> Result<(), Refusal> {
    let epoch = hb.member_epoch;
    // V1: v1 clients generate their id (KIP-1082); a v0 join or static leave may omit it.
    if (hb.version >= 1 || epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH) && is_blank(&hb.member_id) {
        return invalid("MemberId can't be empty.");
    }
    if is_blank(&hb.group_id) {
        return invalid("GroupId can't be empty.");
    }
    if hb.instance_id.as_deref().is_some_and(is_blank) {
        return invalid("InstanceId can't be empty.");
    }
    if hb.rack_id.as_deref().is_some_and(is_blank) {
        return invalid("RackId can't be empty.");
    }
    validate_epoch(hb)?;
    validate_assignor(hb, settings)
}

/// V5-V9: what a join must carry, and which negative epochs exist.
fn validate_epoch(hb: &Heartbeat) -> Result<(), Refusal> {
    match hb.member_epoch {
        0 => {
            if hb.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if hb.topic_partitions.as_ref().is_none_or(|tp| !tp.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // An empty list or an empty regex is a join with no subscription, and allowed.
            if hb.subscribed_topic_names.is_none() && hb.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
            Ok(())
        }
        LEAVE_GROUP_STATIC_MEMBER_EPOCH if hb.instance_id.is_none() => invalid("InstanceId can't be null."),
        epoch if epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH => invalid("MemberEpoch is invalid."),
        _ => Ok(()),
    }
}

/// V10: exact, case-sensitive names of the configured assignors.
fn validate_assignor(hb: &Heartbeat, settings: &GroupSettings) -> Result<(), Refusal> {
    let Some(name) = &hb.server_assignor else { return Ok(()) };
    if settings.assignors.iter().any(|a| a.name() == name) {
        return Ok(());
    }
    let names: Vec<&str> = settings.assignors.iter().map(|a| a.name()).collect();
    let message =
        format!("ServerAssignor {name} is not supported. Supported assignors: {}.", names.join(", "));
    Err(Refusal::new(error_code::UNSUPPORTED_ASSIGNOR, message))
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
