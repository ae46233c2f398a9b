//! The stateful StreamsGroupHeartbeat (Kafka 4.4.0's `streamsGroupHeartbeat`): find or
//! create the group and the member, apply the request's fields, settle the group's topology,
//! bump the group epoch when membership, assignment-relevant metadata, the topics or the
//! assignment configs changed, compute a new target when one is owed and no delay holds it
//! back, reconcile the member and answer.
//!
//! The work is done on a copy of the group that replaces the stored one only when nothing
//! refused, so a refused heartbeat leaves the state unchanged and a heartbeat that changes
//! nothing leaves it equal (the leader then writes no log entry, DESIGN §9).

use std::collections::BTreeMap;

use kafka_compat::error_code::INVALID_REQUEST;

use super::lookup::{check_size, find, group_not_found, Found};
use super::model::{Member, MemberState, StreamsGroup, StreamsGroups};
use super::reconcile::{reconcile, Holders, Step};
use super::request::{
    Heartbeat, HeartbeatAnswer, Refusal, RevocationDeadline, RevocationTimer, StatusEntry, StreamsSettings,
};
use super::target::{endpoints, fingerprint, maybe_assign};
use super::tasks::{Tasks, TasksTuple};
use super::topology::{configure, ConfiguredTopology, Status, Topology};
use super::validate::validate;
use crate::Topic;

impl StreamsGroups {
    /// One heartbeat, with the leader's clock; the member id is the client's.
    pub fn heartbeat(
        &mut self,
        topics: &BTreeMap<String, Topic>,
        hb: &Heartbeat,
        settings: &StreamsSettings,
        now_ms: i64,
    ) -> Result<HeartbeatAnswer, Refusal> {
        validate(hb)?;
        if hb.member_epoch < 0 {
            return self.leave(hb);
        }
        let mut group = match self.groups.get(&hb.group_id) {
            Some(group) => group.clone(),
            None if hb.member_epoch == 0 => StreamsGroup::new(),
            None => return Err(group_not_found(&hb.group_id)),
        };
        if hb.member_epoch == 0 {
            check_size(&group, hb, settings)?;
        }
        let found = find(&hb.group_id, &group, hb)?;
        let answer = beat(&mut group, topics, hb, settings, now_ms, found)?;
        self.groups.insert(hb.group_id.clone(), group);
        Ok(answer)
    }
}

/// The heartbeat's work on the group copy.
fn beat(
    group: &mut StreamsGroup,
    topics: &BTreeMap<String, Topic>,
    hb: &Heartbeat,
    settings: &StreamsSettings,
    now_ms: i64,
    found: Found,
) -> Result<HeartbeatAnswer, Refusal> {
    let was_empty = group.members.is_empty();
    if let Some(old_id) = &found.replaced {
        group.members.remove(old_id);
        if let Some(target) = group.targets.remove(old_id) {
            group.targets.insert(hb.member_id.clone(), target);
        }
    }
    let before = found.member;
    let mut member = updated(before.clone(), hb);
    let mut recompute = metadata_changed(&before, &member, hb);
    let topology = settle_topology(group, hb)?;
    let mut status = stale_status(&topology, &member);
    let configured = configure(&topology, topics);
    if let Some(refusal) = configured.rejected.clone() {
        return Err(refusal);
    }
    let validated = if configured.is_ready() { topology.epoch } else { -1 };
    if let Some(subtopologies) = &configured.subtopologies {
        for tasks in [&hb.active_tasks, &hb.standby_tasks, &hb.warmup_tasks].into_iter().flatten() {
            check_tasks(subtopologies, tasks)?;
        }
    }
    if let Some(offsets) = &hb.task_offsets {
        member.task_offsets = offset_map(offsets);
    }
    let fp = fingerprint(&topology, topics);
    recompute |= fp != group.metadata_fingerprint || validated != group.validated_topology_epoch;
    recompute |= settings.assignment_configs() != group.assignment_configs;
    if recompute {
        group.group_epoch = group.group_epoch.saturating_add(1);
        group.metadata_fingerprint = fp;
        group.validated_topology_epoch = validated;
        group.assignment_configs = settings.assignment_configs();
    }
    if was_empty && settings.initial_rebalance_delay_ms > 0 && group.assign_not_before_ms <= now_ms {
        group.assign_not_before_ms = now_ms.saturating_add(i64::from(settings.initial_rebalance_delay_ms));
    }
    group.members.insert(hb.member_id.clone(), member.clone());
    maybe_assign(group, &configured, settings, now_ms, &mut status)?;
    let reconciled = reconcile_member(group, hb, &member);
    let answering = Answering { before: &before, member: reconciled, status };
    Ok(answer(group, hb, settings, (&configured, topics), answering))
}

/// The member with the request's fields applied: a field the request leaves null is kept;
/// the endpoint is the request's on a join; client id and host are overwritten.
fn updated(mut member: Member, hb: &Heartbeat) -> Member {
    if let Some(instance_id) = &hb.instance_id {
        member.instance_id = Some(instance_id.clone());
    }
    if let Some(rack_id) = &hb.rack_id {
        member.rack_id = Some(rack_id.clone());
    }
    if hb.rebalance_timeout_ms != -1 {
        member.rebalance_timeout_ms = hb.rebalance_timeout_ms;
    }
    if let Some(topology) = &hb.topology {
        member.topology_epoch = topology.epoch;
    }
    if let Some(process_id) = &hb.process_id {
        member.process_id = process_id.clone();
    }
    if let Some(tags) = &hb.client_tags {
        member.client_tags = tags.clone();
    }
    if hb.member_epoch == 0 || hb.user_endpoint.is_some() {
        member.user_endpoint = hb.user_endpoint.clone();
    }
    member.client_id.clone_from(&hb.client_id);
    member.client_host.clone_from(&hb.client_host);
    member
}

/// Kafka re-assigns when a dynamic member's metadata changed at all, and when a static
/// member's topology epoch, rack, client tags or process changed.
fn metadata_changed(before: &Member, after: &Member, hb: &Heartbeat) -> bool {
    let mut before = before.clone();
    before.task_offsets = after.task_offsets.clone();
    if before == *after {
        return false;
    }
    hb.instance_id.is_none()
        || before.topology_epoch != after.topology_epoch
        || before.rack_id != after.rack_id
        || before.client_tags != after.client_tags
        || before.process_id != after.process_id
}

/// The first member's topology becomes the group's; an older epoch keeps the group's; the
/// same or a newer epoch with different content is refused (Kafka 4.4 cannot update a
/// topology in place).
fn settle_topology(group: &mut StreamsGroup, hb: &Heartbeat) -> Result<Topology, Refusal> {
    match (&group.topology, &hb.topology) {
        (None, Some(sent)) => {
            group.topology = Some(sent.clone());
            Ok(sent.clone())
        }
        (Some(have), Some(sent)) if have.epoch > sent.epoch || have == sent => Ok(have.clone()),
        (Some(_), Some(_)) => Err(Refusal::new(INVALID_REQUEST, "Topology updates are not supported yet.")),
        (Some(have), None) => Ok(have.clone()),
        // Not reachable for a validated request: a join carries a topology, and a group
        // exists only once a join set one.
        (None, None) => Err(Refusal::new(INVALID_REQUEST, "Topology must be non-null when (re-)joining.")),
    }
}

fn stale_status(topology: &Topology, member: &Member) -> Vec<StatusEntry> {
    if member.topology_epoch >= topology.epoch {
        return Vec::new();
    }
    let detail = format!(
        "The member's topology epoch {} is behind the group's topology epoch {}.",
        member.topology_epoch, topology.epoch
    );
    vec![StatusEntry { code: Status::StaleTopology.code(), detail }]
}

/// INVALID_REQUEST for a task the configured topology does not have.
fn check_tasks(
    subtopologies: &BTreeMap<String, super::topology::ConfiguredSubtopology>,
    tasks: &Tasks,
) -> Result<(), Refusal> {
    for (id, partitions) in tasks {
        let Some(subtopology) = subtopologies.get(id) else {
            let message = format!("Subtopology {id} does not exist in the topology.");
            return Err(Refusal::new(INVALID_REQUEST, message));
        };
        let n = subtopology.num_tasks;
        if let Some(p) = partitions.iter().find(|p| **p < 0 || **p >= n) {
            let message = format!(
                "Task {p} for subtopology {id} is invalid. Number of tasks for this subtopology: {n}"
            );
            return Err(Refusal::new(INVALID_REQUEST, message));
        }
    }
    Ok(())
}

fn offset_map(offsets: &[(String, i32, i64)]) -> BTreeMap<String, BTreeMap<i32, i64>> {
    let mut map: BTreeMap<String, BTreeMap<i32, i64>> = BTreeMap::new();
    for (s, p, o) in offsets {
        map.entry(s.clone()).or_default().insert(*p, *o);
    }
    map
}

fn reconcile_member(group: &StreamsGroup, hb: &Heartbeat, member: &Member) -> Member {
    let empty = TasksTuple::default();
    let target = group.targets.get(&hb.member_id).unwrap_or(&empty);
    let owned = hb.owned();
    let holders = Holders::of(group);
    let step =
        Step { target_epoch: group.assignment_epoch, target, owned: owned.as_ref(), holders: &holders };
    reconcile(member, &step)
}

struct Answering<'a> {
    before: &'a Member,
    member: Member,
    status: Vec<StatusEntry>,
}

/// Stores the reconciled member and builds the response.
fn answer(
    group: &mut StreamsGroup,
    hb: &Heartbeat,
    settings: &StreamsSettings,
    (configured, topics): (&ConfiguredTopology, &BTreeMap<String, Topic>),
    a: Answering<'_>,
) -> HeartbeatAnswer {
    let Answering { before, member, mut status } = a;
    let joining = hb.member_epoch == 0;
    let tasks_changed = before.assigned != member.assigned;
    let endpoint_changed = before.user_endpoint != member.user_endpoint;
    if endpoint_changed || (tasks_changed && member.user_endpoint.is_some()) {
        group.endpoint_information_epoch = group.endpoint_information_epoch.saturating_add(1);
    }
    let timer = revocation_timer(before, &member);
    let tasks = (joining || tasks_changed).then(|| member.assigned.tuple());
    if hb.shutdown_application {
        group.shutdown_requested_by = Some(hb.member_id.clone());
    }
    group.members.insert(hb.member_id.clone(), member.clone());
    if let Some(error) = &configured.error {
        status.push(StatusEntry { code: error.status.code(), detail: error.message.clone() });
    }
    if let Some(by) = &group.shutdown_requested_by {
        let detail = format!(
            "Streams group member {by} encountered a fatal error and requested a shutdown for the entire application."
        );
        status.push(StatusEntry { code: Status::ShutdownApplication.code(), detail });
    }
    let behind = group.endpoint_information_epoch != hb.endpoint_information_epoch;
    HeartbeatAnswer {
        member_id: hb.member_id.clone(),
        member_epoch: member.member_epoch,
        heartbeat_interval_ms: settings.heartbeat_interval_ms,
        acceptable_recovery_lag: settings.acceptable_recovery_lag,
        task_offset_interval_ms: settings.task_offset_interval_ms,
        status,
        tasks,
        endpoint_information_epoch: group.endpoint_information_epoch,
        endpoints: behind.then(|| endpoints(group, configured, topics)),
        revocation_timer: timer,
    }
}

/// Armed when a reconcile writes UNREVOKED_TASKS, cancelled when it writes anything else,
/// untouched when it writes nothing.
fn revocation_timer(before: &Member, after: &Member) -> RevocationTimer {
    let moved = before.state != after.state
        || before.member_epoch != after.member_epoch
        || before.assigned != after.assigned
        || before.pending_revocation != after.pending_revocation;
    if !moved {
        RevocationTimer::Keep
    } else if after.state == MemberState::UnrevokedTasks {
        RevocationTimer::Arm(RevocationDeadline {
            rebalance_timeout_ms: after.rebalance_timeout_ms,
            member_epoch: after.member_epoch,
        })
    } else {
        RevocationTimer::Cancel
    }
}
