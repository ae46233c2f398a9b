//! The deliberate faults of `a_broken_replica_is_caught_at_the_step_it_breaks`: which way
//! replica `FAULTY` is broken, and from which step.
//!
//! Kept apart so that the normal run's code reads without them; `Cluster::apply` and
//! `Cluster::checkpoint` (in `cluster`) inject them where they happen.

use crate::cluster::Cluster;
use crate::FAULTY;

/// A way to break replica `FAULTY`, from the first step at or after `from_step` where it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    /// Its storage misses one effect.
    DropEffect {
        from_step: u64,
    },
    /// It applies the entry without its last op.
    SkipOp {
        from_step: u64,
    },
    /// Its apply leaves one partition's log end one offset further.
    MoveLogEnd {
        from_step: u64,
    },
    /// A checkpoint of it loses the idempotent producers' partition state.
    LossyCheckpoint {
        from_step: u64,
    },
    /// Not a replica's fault but every leader's: writes of an open transaction answered once
    /// stamped, what onelog did before issue 17 (the broker's `leader::bugs`).
    /// With no takeover abort, a lost entry then lets a transaction commit without a write
    /// its client was told about.
    AckTxnAtStamping,
}

impl Fault {
    pub(crate) fn first_step(self) -> Option<u64> {
        match self {
            Fault::None | Fault::AckTxnAtStamping => None,
            Fault::DropEffect { from_step }
            | Fault::SkipOp { from_step }
            | Fault::MoveLogEnd { from_step }
            | Fault::LossyCheckpoint { from_step } => Some(from_step),
        }
    }
}

impl Cluster {
    pub(crate) fn fault_due(&self, step: u64) -> bool {
        self.fault_at.is_none() && self.fault.first_step().is_some_and(|from| step >= from)
    }

    pub(crate) fn lossy_checkpoint_due(&self, step: u64) -> bool {
        matches!(self.fault, Fault::LossyCheckpoint { .. })
            && self.fault_due(step)
            && self.replicas[FAULTY].state.producers.live.values().any(|p| !p.topics.is_empty())
    }
}
