//! The stateless checks of a ShareGroupHeartbeat, in Kafka's order and with its messages
//! (`GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid`). The state machine
//! runs them on every heartbeat, so a log entry can never carry an invalid request.

use kafka_compat::error_code;

use super::request::{Heartbeat, LEAVE_GROUP_MEMBER_EPOCH};
use crate::consumer_group::Refusal;

/// Kafka's `throwIfEmptyString`: a present value that Java's `trim()` (every char up to
/// U+0020) leaves empty.
fn is_blank(s: &str) -> bool {
    s.trim_matches(|c: char| c <= ' ').is_empty()
}

fn invalid(message: &str) -> Result<(), Refusal> {
    Err(Refusal::new(error_code::INVALID_REQUEST, message))
}

pub fn validate(hb: &Heartbeat) -> Result<(), Refusal> {
    // v1 clients generate their member id (KIP-932): an empty one is never valid, not even on
    // a join.
    if is_blank(&hb.member_id) {
        return invalid("MemberId can't be empty.");
    }
    if is_blank(&hb.group_id) {
        return invalid("GroupId can't be empty.");
    }
    if hb.rack_id.as_deref().is_some_and(is_blank) {
        return invalid("RackId can't be empty.");
    }
    if hb.member_epoch == 0 && hb.subscribed_topic_names.as_ref().is_none_or(Vec::is_empty) {
        return invalid("SubscribedTopicNames must be set in first request.");
    }
    if hb.member_epoch < LEAVE_GROUP_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    Ok(())
}
