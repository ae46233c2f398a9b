//! The classic coordinator's side of online migration (around-spec §4.3, §4.5): the snapshot
//! of a live group that an upgrade converts, handing the group over once the conversion is in
//! the log (its parked JoinGroups and SyncGroups are told REBALANCE_IN_PROGRESS, so they rejoin
//! the consumer group), and adopting a downgraded group rebalancing, so that the partitions of
//! the consumer-protocol member that left are handed out again.

use std::time::Instant;

use kafka_compat::error_code;
use onelog_state::command::GenerationOp;
use onelog_state::consumer_group::{
    ClassicGroupSnapshot, ClassicProtocol, ClassicSnapshotMember, CONSUMER_PROTOCOL_TYPE,
};

use super::effects::{Effects, Out};
use super::messages::{JoinResult, SyncResult};
use super::state::{Group, Groups};

/// What an upgrade finds of a classic group in this coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// No member: nothing to convert (an empty group converts without one).
    NotLive,
    Ready(ClassicGroupSnapshot),
    /// Adopted from the log after a leader change: the members' subscriptions and assignments
    /// come back with the rebalance this starts. Kafka's "the coordinator is loading".
    Loading,
}

impl Groups {
    /// `max_members`: the consumer group size limit, None when the policy forbids upgrades.
    /// A group that cannot upgrade (policy, size, not a consumer group) is snapshot as it is,
    /// for apply to refuse with Kafka's reason: no rebalance is started for a join that cannot
    /// convert the group.
    pub(super) fn snapshot(
        &mut self,
        group_id: &str,
        max_members: Option<usize>,
        out: &mut Effects,
    ) -> Snapshot {
        let Some(group) = self.groups.get_mut(group_id).filter(|g| !g.members.is_empty()) else {
            return Snapshot::NotLive;
        };
        let protocol_name = group.protocol_name.clone().unwrap_or_default();
        let consumer = group.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE);
        let unknown = group.members.values().any(|m| m.metadata(&protocol_name).is_empty());
        let upgradable = max_members.is_some_and(|max| group.members.len() <= max);
        if unknown && consumer && upgradable {
            if group.state == super::GroupState::Stable {
                group.prepare_rebalance(&self.config, &mut Out::new(group_id, out));
            }
            return Snapshot::Loading;
        }
        Snapshot::Ready(snapshot_of(group, protocol_name))
    }

    /// The group is a consumer group now: parked requests rejoin, the group is forgotten.
    pub(super) fn hand_over(&mut self, group_id: &str, out: &mut Effects) {
        let Some(group) = self.groups.remove(group_id) else { return };
        let mut out = Out::new(group_id, out);
        for (id, m) in &group.members {
            if m.awaiting_join {
                out.join(id, JoinResult::error(error_code::REBALANCE_IN_PROGRESS, id));
            }
            if m.awaiting_sync {
                out.sync(id, SyncResult::error(error_code::REBALANCE_IN_PROGRESS));
            }
        }
    }

    /// Adopts a group a downgrade made (`ConsumerGroups::downgraded`) and starts its rebalance.
    pub(super) fn adopt_downgraded(&mut self, record: &GenerationOp, now: Instant, out: &mut Effects) {
        if self.groups.contains_key(&record.group_id) {
            return;
        }
        self.adopt(record, now);
        if let Some(group) = self.groups.get_mut(&record.group_id).filter(|g| !g.members.is_empty()) {
            group.prepare_rebalance(&self.config, &mut Out::new(&record.group_id, out));
        }
    }
}

fn snapshot_of(group: &Group, protocol_name: String) -> ClassicGroupSnapshot {
    let members = group
        .members
        .iter()
        .map(|(id, m)| ClassicSnapshotMember {
            member_id: id.clone(),
            instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            session_timeout_ms: m.session_timeout_ms,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            protocols: m
                .protocols
                .iter()
                .map(|(name, metadata)| ClassicProtocol { name: name.clone(), metadata: metadata.to_vec() })
                .collect(),
            assignment: m.assignment.to_vec(),
        })
        .collect();
    ClassicGroupSnapshot {
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        protocol_name,
        members,
    }
}
