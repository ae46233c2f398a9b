//! The seeded fault plan: which fault, when, and for how long, drawn from one seed so that a
//! run can be repeated exactly (the seed and the command are printed first).
//!
//! Pure: the plan is a function of the seed, the run's length and the kinds allowed; its tests
//! check that it is reproducible and stays inside the run.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// One kind of fault the runner knows how to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// kill -9 of the leader, restarted after the fault's length.
    KillLeader,
    /// kill -9 of a follower, restarted after the fault's length.
    KillFollower,
    /// kill -9 of every node at once, all restarted after the fault's length.
    KillAll,
    /// SIGSTOP of the leader, longer than the election timeout, then SIGCONT.
    PauseLeader,
    /// SIGSTOP of a follower, then SIGCONT.
    PauseFollower,
    /// Every Raft link of the leader black-holed both ways, then healed.
    IsolateLeader,
    /// Every Raft link of a follower black-holed both ways, then healed.
    IsolateFollower,
    /// The leader's links to the followers black-holed one way (it hears them, they do not
    /// hear it), then healed.
    OneWayLeader,
    /// The clients' link to the leader black-holed (Raft unaffected), then healed.
    ClientLinkLeader,
    /// A writer drops its producer in the middle of a transaction (no abort, no commit); its
    /// next instance's `init_transactions` must fence and abort it.
    ClientCrash,
    /// A second producer with a writer's `transactional.id` initialises while the writer is
    /// in a transaction: the writer is fenced, its transaction aborted.
    TxnHijack,
    /// One node's file system (a tmpfs of its own) filled to within a few MiB, below the
    /// free-space reserve and below one Raft log segment, then given back.
    DiskFull,
}

pub const ALL_KINDS: &[FaultKind] = &[
    FaultKind::KillLeader,
    FaultKind::KillFollower,
    FaultKind::KillAll,
    FaultKind::PauseLeader,
    FaultKind::PauseFollower,
    FaultKind::IsolateLeader,
    FaultKind::IsolateFollower,
    FaultKind::OneWayLeader,
    FaultKind::ClientLinkLeader,
    FaultKind::ClientCrash,
    FaultKind::TxnHijack,
    FaultKind::DiskFull,
];

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillLeader => "kill-leader",
            FaultKind::KillFollower => "kill-follower",
            FaultKind::KillAll => "kill-all",
            FaultKind::PauseLeader => "pause-leader",
            FaultKind::PauseFollower => "pause-follower",
            FaultKind::IsolateLeader => "isolate-leader",
            FaultKind::IsolateFollower => "isolate-follower",
            FaultKind::OneWayLeader => "one-way-leader",
            FaultKind::ClientLinkLeader => "client-link-leader",
            FaultKind::ClientCrash => "client-crash",
            FaultKind::TxnHijack => "txn-hijack",
            FaultKind::DiskFull => "disk-full",
        }
    }

    /// Faults the workload's clients inject themselves, not the cluster.
    pub fn is_client_side(self) -> bool {
        matches!(self, FaultKind::ClientCrash | FaultKind::TxnHijack)
    }

    /// How long it lasts, drawn from its range: a pause is longer than the election timeout
    /// (at most 600 ms here) so that a new leader is elected meanwhile.
    fn length(self, rng: &mut StdRng) -> Duration {
        let ms = match self {
            FaultKind::PauseLeader | FaultKind::PauseFollower => rng.gen_range(1_500..4_000),
            FaultKind::KillLeader | FaultKind::KillFollower | FaultKind::KillAll => rng.gen_range(300..3_000),
            FaultKind::IsolateLeader | FaultKind::IsolateFollower | FaultKind::OneWayLeader => {
                rng.gen_range(2_000..6_000)
            }
            FaultKind::ClientLinkLeader => rng.gen_range(1_000..4_000),
            FaultKind::DiskFull => rng.gen_range(2_000..6_000),
            FaultKind::ClientCrash | FaultKind::TxnHijack => 0,
        };
        Duration::from_millis(ms)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ALL_KINDS.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ALL_KINDS.iter().map(|k| k.name()).collect();
            format!("unknown fault {s:?}; one of {}", names.join(", "))
        })
    }
}

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub at: Duration,
    pub kind: FaultKind,
    pub length: Duration,
}

/// Quiet time before the first fault and between two, drawn from this range: long enough for
/// the workload to make progress, so recovery can be measured.
const GAP_MS: std::ops::Range<u64> = 2_000..6_000;
/// No fault starts in the last part of the run: it ends with the cluster whole.
const QUIET_END: Duration = Duration::from_secs(5);

/// The plan for a run of `length` with faults of `kinds`, from `seed`. Every kind appears at
/// least once when the run is long enough (they are dealt from a shuffled deck).
pub fn plan(seed: u64, length: Duration, kinds: &[FaultKind]) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut deck: Vec<FaultKind> = Vec::new();
    let mut at = Duration::ZERO;
    if kinds.is_empty() {
        return out;
    }
    loop {
        at += Duration::from_millis(rng.gen_range(GAP_MS));
        if deck.is_empty() {
            deck = kinds.to_vec();
            deck.shuffle(&mut rng);
        }
        let kind = deck.pop().expect("refilled");
        let fault_length = kind.length(&mut rng);
        if at + fault_length + QUIET_END > length {
            return out;
        }
        out.push(Planned { at, kind, length: fault_length });
        at += fault_length;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_a_function_of_its_seed_and_stays_inside_the_run() {
        let length = Duration::from_secs(180);
        let a = plan(7, length, ALL_KINDS);
        assert_eq!(a, plan(7, length, ALL_KINDS));
        assert_ne!(a, plan(8, length, ALL_KINDS));
        for kind in ALL_KINDS {
            assert!(a.iter().any(|p| p.kind == *kind), "{kind} planned in three minutes");
        }
        for pair in a.windows(2) {
            assert!(pair[0].at + pair[0].length < pair[1].at, "faults do not overlap");
        }
        let last = a.last().expect("faults");
        assert!(last.at + last.length + QUIET_END <= length);
    }

    #[test]
    fn fault_names_parse_back() {
        for kind in ALL_KINDS {
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(*kind));
        }
        assert!("meteor".parse::<FaultKind>().is_err());
    }
}
