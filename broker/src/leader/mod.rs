//! Being the leader: who leads and whether this node may act as leader now (`leadership`,
//! with its read lease), the proposer that turns requests into entries, and the duties the
//! leader runs on a clock (retention, expiry, naming the cluster). The fault-injection build
//! adds the chaos checker's test bugs (`bugs`).

#[cfg(feature = "fault-injection")]
pub mod bugs;
pub mod duties;
pub mod leadership;
pub mod lease;
pub mod proposer;
mod sequencer;
