//! Who leads a topic's partitions, as Metadata and DescribeTopicPartitions report it (issue
//! 32): the leader of the Raft group that holds the topic, with that group's term as the
//! leader epoch and its voters as the replicas. With one group that is group 0's leader for
//! every partition, as before.
//!
//! A node knows the leader of the groups it runs from their Raft; for a group it is not a voter
//! of (more nodes than the replication factor) it names the leader the group's voters last
//! reported (`raft::remote_leaders`, the group's voters as replicas and in-sync replicas), and
//! answers LEADER_NOT_AVAILABLE, which clients retry, until it has heard from one.

use kafka_compat::error_code;

use crate::ctx::Ctx;

/// One group's leader as a partition of it reports it.
#[derive(Debug, Clone)]
pub struct PartitionLeader {
    /// The leader's broker id, -1 if unknown.
    pub leader: i32,
    pub epoch: i32,
    pub voters: Vec<i32>,
    pub in_sync: Vec<i32>,
}

impl PartitionLeader {
    fn unknown() -> Self {
        PartitionLeader { leader: -1, epoch: -1, voters: Vec::new(), in_sync: Vec::new() }
    }

    /// LEADER_NOT_AVAILABLE while the group has no known leader.
    pub fn error_code(&self) -> i16 {
        if self.leader < 0 {
            error_code::LEADER_NOT_AVAILABLE
        } else {
            error_code::NONE
        }
    }
}

/// A group this node does not run, as its voters last reported it.
fn remote(ctx: &Ctx, group: u32) -> PartitionLeader {
    let Some(heard) = ctx.remote_leaders.get(group) else { return PartitionLeader::unknown() };
    let voters: Vec<i32> = heard.voters.iter().map(|v| *v as i32).collect();
    PartitionLeader {
        leader: heard.leader as i32,
        epoch: i32::try_from(heard.term).unwrap_or(i32::MAX),
        voters: voters.clone(),
        in_sync: voters,
    }
}

/// Each group's leader as this node sees it, by group number.
pub struct PartitionLeaders(Vec<PartitionLeader>);

impl PartitionLeaders {
    pub fn of(ctx: &Ctx) -> Self {
        let groups = ctx.config.settings.raft_groups.groups.max(1);
        let view = |group| {
            let Some(lane) = ctx.lane(group) else { return remote(ctx, group) };
            let leadership = lane.leadership;
            PartitionLeader {
                leader: leadership.leader_id().map_or(-1, |l| l as i32),
                epoch: leadership.leader_epoch(),
                voters: leadership.voter_ids(),
                in_sync: leadership.in_sync_voter_ids(),
            }
        };
        PartitionLeaders((0..groups).map(view).collect())
    }

    /// The leader of the partitions of a topic with `configs` (group 0's record).
    pub fn of_topic(&self, configs: &std::collections::BTreeMap<String, String>) -> &PartitionLeader {
        self.group(onelog_state::xgroup::placement::recorded_topic_group(configs))
    }

    /// Group `group`'s; group 0's for a number past the last (it cannot be recorded).
    pub fn group(&self, group: u32) -> &PartitionLeader {
        self.0.get(group as usize).unwrap_or(&self.0[0])
    }
}
