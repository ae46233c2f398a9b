//! KIP-932 share groups' membership, coordinator side, as pure state: the ShareGroupHeartbeat
//! flow (join with epoch 0, heartbeat, leave with -1), the group, assignment and member
//! epochs, the server-side SimpleAssignor and the target assignment, fencing by the leader's
//! session timer, and what ShareGroupDescribe and ListGroups report. Kafka 4.4.0's behaviour,
//! as read from its group coordinator (`GroupMetadataManager.shareGroupHeartbeat`,
//! `ShareGroupAssignmentBuilder`, `SimpleAssignor`). Share-partition record state
//! (acquisitions, acknowledgements) is `crate::share_partition`'s.
//!
//! Like `consumer_group`, everything here is applied as ops of the one Raft log (DESIGN §9):
//! deterministic (BTreeMaps, time and member ids from the caller, no randomness), and a
//! heartbeat that changes nothing leaves the state equal, so the leader writes no entry for
//! it (`ShareGroups::trial`). Session timers run on the leader, which asks
//! [`ShareGroups::timers`] what to arm and calls [`ShareGroups::fence`] when one fires.
//!
//! Files: `model` (the stored state), `request` (inputs, answer, settings), `validate`
//! (stateless rules), `lookup` (group, size and epoch checks), `heartbeat` (the flow),
//! `subscription` (names resolved against topics), `target`, the SimpleAssignor (`simple`,
//! `simple_homogeneous`, `simple_heterogeneous`), `leave` (leave, fence, liveness, timers)
//! and `describe`.

mod describe;
mod heartbeat;
mod leave;
mod lookup;
mod model;
mod request;
mod simple;
mod simple_heterogeneous;
mod simple_homogeneous;
mod subscription;
mod target;
mod validate;

pub use describe::{Description, MemberDescription, NamedPartitions, ShareGroupState, PROTOCOL_TYPE};
pub use leave::MemberTimers;
pub use model::{ShareGroup, ShareGroups, ShareMember};
pub use request::{Heartbeat, HeartbeatAnswer, ShareSettings, LEAVE_GROUP_MEMBER_EPOCH};
pub use simple::ASSIGNOR_NAME;
pub use validate::validate;

#[cfg(test)]
mod testkit;

#[cfg(test)]
mod heartbeat_tests;

#[cfg(test)]
mod random_tests;
