//! Being the leader: who leads and whether this node may act as leader now (`leadership`,
//! with its read lease), the proposer that turns requests into entries, and the duties the
//! leader runs on a clock (retention, expiry, naming the cluster), and handing each Raft group
//! back to its preferred leader (`rebalance`). The fault-injection build
//! adds the chaos checker's test bugs (`bugs`).

#[cfg(feature = "fault-injection")]
pub mod bugs;
pub mod duties;
pub mod groups;
pub mod leadership;
pub mod lease;
pub mod mirror;
pub mod proposer;
pub mod rebalance;
mod sequencer;
