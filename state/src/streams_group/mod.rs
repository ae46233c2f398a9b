//! KIP-1071 Streams groups (`group.protocol=streams`), coordinator side, as pure state: the
//! StreamsGroupHeartbeat flow (`heartbeat`, with `validate` and `lookup`), the topology a
//! group runs and how it meets the topics that exist (`topology`), broker-side task
//! assignment (`assignor`, `target`), the revoke-before-assign reconciliation of each member
//! (`reconcile`), leaves and fencing (`leave`), and what StreamsGroupDescribe reports
//! (`describe`). Kafka 4.4.0's behaviour, as read from its group coordinator.
//!
//! Like `consumer_group`, everything here is applied as ops of the one Raft log (DESIGN §9):
//! deterministic (BTreeMaps, time and ids from the caller), and a heartbeat that changes
//! nothing leaves the state equal, so the leader writes no entry for it.

mod assignor;
mod commit;
mod heartbeat;
mod leave;
mod lookup;
mod model;
mod reconcile;
mod request;
mod target;
mod tasks;
mod topology;
mod validate;

pub use assignor::{assign, AssignmentConfigs, AssignorMember};
pub use commit::NamedPartition;
pub use leave::MemberTimers;
pub use model::{AssignedTasks, EpochTasks, GroupState, Member, MemberState, StreamsGroup, StreamsGroups};
pub use request::{
    EndpointPartitions, Heartbeat, HeartbeatAnswer, StatusEntry, StreamsSettings, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
pub use target::interval_passed;
pub use tasks::{Tasks, TasksTuple};
pub use topology::{
    configure, ConfiguredSubtopology, ConfiguredTopology, CopartitionGroup, InternalTopic, Status,
    Subtopology, TopicError, TopicInfo, Topology,
};
pub use validate::validate;

#[cfg(test)]
mod heartbeat_tests;
