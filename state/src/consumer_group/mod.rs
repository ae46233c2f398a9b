//! KIP-848 consumer groups (the `consumer` group protocol), coordinator side, as pure state:
//! ConsumerGroupHeartbeat joins, heartbeats and leaves, the timers' fencing, the server-side
//! assignors, what ConsumerGroupDescribe reports and the OffsetCommit check. Kafka 4.4's
//! behaviour as researched from Kafka's code in docs/kafka/kip848-heartbeat.md (cited as
//! "spec §n") and docs/kafka/kip848-around.md ("around-spec §n").
//!
//! Kafka keeps this state in `__consumer_offsets` records; onelog applies each heartbeat as an
//! op in the one Raft log (DESIGN §9), so everything here is deterministic: BTreeMaps only,
//! time and member ids come from the caller, no randomness. Timers run on the leader, which
//! asks [`ConsumerGroups::timers`] what to arm and calls [`ConsumerGroups::fence`] when one
//! fires. A heartbeat that changes nothing leaves the state equal, so the leader can skip the
//! log entry for it.
//!
//! Files: `model` (the stored state), `request` (inputs, answers, settings), `validate`
//! (stateless rules), `heartbeat` (the flow), `lookup` (member lookup and epoch checks),
//! `subscription` (names, regexes, fingerprint, preferred assignor), `target`, `reconcile`,
//! the assignors (`assignor`, `uniform`, `uniform_heterogeneous`, `range`), `leave`,
//! `describe` and `commit`; online migration from and to classic groups: `migration` (the
//! conversions), `classic` (classic members served inside a consumer group) and `embedded`
//! (the consumer protocol inside the classic APIs' bytes).

mod assignor;

mod classic;
mod commit;
mod describe;
mod embedded;
mod heartbeat;
mod leave;
mod lookup;
mod migration;
mod model;
mod range;
mod reconcile;
mod request;
mod subscription;
mod target;
mod uniform;
mod uniform_heterogeneous;
mod validate;

pub use classic::{ClassicBeat, ClassicJoin, ClassicJoinAnswer, ClassicLeft, ClassicSync};
pub(crate) use commit::fetch_check;
pub use commit::{CommitApi, CommitRequest};
pub use describe::{GroupState, MemberDescription};
pub use embedded::{parse_subscription, write_assignment, Malformed, Subscription};
pub use leave::MemberTimers;
pub use migration::{
    downgraded_generation, downgrades_without, upgrade, upgrade_and_join, ClassicGroupSnapshot,
    ClassicSnapshotMember, CONSUMER_PROTOCOL_TYPE,
};
pub use model::{
    without_epochs, Assignment, ClassicMember, ClassicProtocol, ConsumerGroup, ConsumerGroups,
    EpochAssignment, Member, MemberState, TopicId,
};
pub use request::{
    Assignor, GroupSettings, Heartbeat, HeartbeatAnswer, Migration, MigrationPolicy, Refusal,
    RevocationDeadline, RevocationTimer, TopicPartitions, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
pub(crate) use subscription::Fnv64;
pub use validate::validate;

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod heartbeat_tests;

#[cfg(test)]
mod scenario_tests;
