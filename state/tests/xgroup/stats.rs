//! What a run exercised, and the minimums a fixed seed must reach so that the test cannot
//! pass by generating nothing.

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub entries: u64,
    pub entries_lost: u64,
    pub writes: u64,
    pub acked: u64,
    pub refused: u64,
    /// TxnOffsetCommits applied, [in the coordinator's group, in another].
    pub offset_commits: [u64; 2],
    /// EndTxn answered, [abort, commit].
    pub ended: [u64; 2],
    /// Decisions with participants in other groups, [abort, commit].
    pub cross_group_decisions: [u64; 2],
    pub decisions_sent: u64,
    /// JoinTxn answers for a request the leader no longer holds (duplicated, or after a
    /// leader change): ignored.
    pub stale_answers: u64,
    pub resends: u64,
    pub deferred: u64,
    /// Decisions carried ahead of a producer's next write.
    pub priors: u64,
    pub pulls: u64,
    /// Pull answers, [abort, commit].
    pub pulled: [u64; 2],
    pub timeouts: u64,
    /// InitProducerId or EndTxn applied after its client stopped waiting for it.
    pub late_requests: u64,
    pub leader_changes: u64,
    pub crashes: u64,
    pub client_crashes: u64,
    /// Transactions-v1 EndTxns of added-only transactions, ended in the leader's memory.
    pub added_only_ends: u64,
    /// Topics an operator deleted (and created again).
    pub topic_deletions: u64,
    /// Transactions open on a topic when it was deleted, [coordinated here, another group's].
    pub deleted_under_open: [u64; 2],
}

impl Stats {
    pub fn summary(&self) -> String {
        format!(
            "{} entries ({} lost), {} writes ({} acknowledged, {} refused), offset commits local/remote {}/{}, \
             EndTxn commit/abort {}/{}, \
             cross-group decisions commit/abort {}/{}, {} decisions sent ({} resends, {} deferred), \
             {} stale JoinTxn answers ignored, \
             {} priors, {} pulls (answered commit/abort {}/{}), {} timeouts, {} late client requests, {} leader changes, \
             {} crashes of every node, {} client crashes, {} added-only v1 transactions ended in memory, {} topics deleted (under {}/{} open transactions, \
             coordinated here/elsewhere)",
            self.entries,
            self.entries_lost,
            self.writes,
            self.acked,
            self.refused,
            self.offset_commits[0],
            self.offset_commits[1],
            self.ended[1],
            self.ended[0],
            self.cross_group_decisions[1],
            self.cross_group_decisions[0],
            self.decisions_sent,
            self.resends,
            self.deferred,
            self.stale_answers,
            self.priors,
            self.pulls,
            self.pulled[1],
            self.pulled[0],
            self.timeouts,
            self.late_requests,
            self.leader_changes,
            self.crashes,
            self.client_crashes,
            self.added_only_ends,
            self.topic_deletions,
            self.deleted_under_open[0],
            self.deleted_under_open[1]
        )
    }

    /// The minimums for `steps` steps, scaled from 10,000.
    pub fn check_coverage(&self, steps: usize) -> Result<(), String> {
        let scale = |n: u64| n * steps as u64 / 10_000;
        let wanted = [
            ("cross-group commits", self.cross_group_decisions[1], scale(300)),
            ("cross-group aborts", self.cross_group_decisions[0], scale(20)),
            ("priors carried", self.priors, scale(20)),
            ("pulls answered abort", self.pulled[0], scale(2)),
            ("leader changes", self.leader_changes, scale(50)),
            ("entries lost", self.entries_lost, scale(20)),
            ("refused writes", self.refused, scale(20)),
            ("offset commits in the coordinator's group", self.offset_commits[0], scale(50)),
            ("offset commits in another group", self.offset_commits[1], scale(100)),
            ("timeout aborts", self.timeouts, scale(3)),
            ("late client requests", self.late_requests, scale(5)),
            ("topics deleted", self.topic_deletions, scale(4)),
            ("added-only v1 transactions ended in memory", self.added_only_ends, scale(5)),
            ("topics deleted under another group's open transaction", self.deleted_under_open[1], scale(2)),
        ];
        let missing: Vec<String> = wanted
            .iter()
            .filter(|(_, got, min)| got < min)
            .map(|(name, got, min)| format!("{name} {got} < {min}"))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(missing.join(", "))
        }
    }
}
