//! The stateless rules a StreamsGroupHeartbeat must meet before the group is looked at
//! (Kafka 4.4's `GroupCoordinatorService` checks), with Kafka's codes and messages.

use kafka_compat::error_code::{INVALID_REQUEST, STREAMS_INVALID_TOPOLOGY};

use super::request::{Heartbeat, Refusal, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use super::topology::Topology;

pub fn validate(hb: &Heartbeat) -> Result<(), Refusal> {
    let invalid = |message: &str| Err(Refusal::new(INVALID_REQUEST, message));
    if let Some(t) = hb.topology.as_ref() {
        if t.subtopologies.values().any(|s| !s.source_topic_regex.is_empty()) {
            return invalid("Regular expressions for source topics are not supported yet.");
        }
    }
    if hb.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if hb.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if hb.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    check_epoch(hb)?;
    let sent = [&hb.active_tasks, &hb.standby_tasks, &hb.warmup_tasks].iter().filter(|t| t.is_some()).count();
    if sent != 0 && sent != 3 {
        return invalid("If one task-type is non-null, all must be non-null.");
    }
    if hb.member_epoch != 0 && hb.topology.is_some() {
        return invalid("Topology can only be provided when (re-)joining.");
    }
    Ok(())
}

fn check_epoch(hb: &Heartbeat) -> Result<(), Refusal> {
    let invalid = |message: String| Err(Refusal::new(INVALID_REQUEST, message));
    match hb.member_epoch {
        0 => check_join(hb),
        LEAVE_GROUP_STATIC_MEMBER_EPOCH if hb.instance_id.is_none() => {
            invalid("InstanceId can't be null.".to_string())
        }
        e if e < LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            invalid(format!("MemberEpoch is {e}, but must be greater than or equal to -2."))
        }
        _ => Ok(()),
    }
}

fn check_join(hb: &Heartbeat) -> Result<(), Refusal> {
    let invalid = |message: &str| Err(Refusal::new(INVALID_REQUEST, message));
    if hb.rebalance_timeout_ms == -1 {
        return invalid("RebalanceTimeoutMs must be provided in first request.");
    }
    let non_empty = |t: &Option<super::tasks::Tasks>| t.as_ref().is_some_and(|t| !t.is_empty());
    if non_empty(&hb.active_tasks) {
        return invalid("ActiveTasks must be empty when (re-)joining.");
    }
    if non_empty(&hb.standby_tasks) {
        return invalid("StandbyTasks must be empty when (re-)joining.");
    }
    if non_empty(&hb.warmup_tasks) {
        return invalid("WarmupTasks must be empty when (re-)joining.");
    }
    match &hb.topology {
        None => invalid("Topology must be non-null when (re-)joining."),
        Some(topology) => check_topology(topology),
    }
}

/// Changelog topics get one partition per task: a member may not fix their count.
fn check_topology(topology: &Topology) -> Result<(), Refusal> {
    for subtopology in topology.subtopologies.values() {
        if let Some(t) = subtopology.state_changelog_topics.iter().find(|t| t.partitions != 0) {
            let message = format!(
                "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                t.name, t.partitions
            );
            return Err(Refusal::new(STREAMS_INVALID_TOPOLOGY, message));
        }
    }
    Ok(())
}
