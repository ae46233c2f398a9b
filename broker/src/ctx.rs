//! The request context: what a Kafka request handler can reach, and nothing more.
//!
//! A leadership view (is-leader, term, lease, brokers), an applied-state view (read closures;
//! it alone holds the state machine's locks), the configuration parsed at start-up, the
//! proposer, the coordinators and the quota sensors. No lock and no Raft handle is reachable from here: only
//! node start-up, the leader's duties and the admin API hold openraft. Cloned cheaply (`Arc`)
//! into each request's task.

use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::coord::lane::GroupCoordinators;
use crate::coord::txn::TxnCoordinator;
use crate::errors::{ProposeError, TxnFailure};
use crate::leader::leadership::Leadership;
use crate::leader::proposer::Proposer;
use crate::raft::applied::AppliedView;
use crate::raft::transport::peers::Peers;
use crate::security::authz::Authorizer;
use crate::security::quotas::QuotaManager;
use onelog_state::features::{GROUP_PLACEMENT, ONELOG_VERSION, ONELOG_VERSION_GROUP_COORDINATORS};
use onelog_state::xgroup::placement::{recorded_topic_group, IdKind};

pub struct Ctx {
    pub node_id: u64,
    /// The node's data directory: its one Kafka log dir (DescribeLogDirs).
    pub data_dir: std::path::PathBuf,
    pub leadership: Arc<Leadership>,
    pub applied: AppliedView,
    pub config: Arc<BrokerConfig>,
    pub proposer: Proposer,
    /// The coordinators of the consumer, Streams and share groups placed in group 0, served
    /// while this node leads it (`coord::lane`); the groups themselves are applied state.
    pub coordinators: GroupCoordinators,
    /// Transactions, coordinated while this node leads (see `coord::txn`).
    pub txns: Arc<TxnCoordinator>,
    /// Who may do what: the authorization settings over the applied ACLs (`security::authz`).
    pub authorizer: Authorizer,
    /// This node's byte-rate measurements against the replicated client quotas.
    pub quotas: QuotaManager,
    /// This node's connections to its peers, which its Raft node uses too: forwarding to the
    /// leader goes over the authenticated Raft transport (`net::forward`).
    pub peers: Arc<Peers>,
    /// The leadership, applied state and proposer of each Raft group other than 0 this node
    /// runs (`leader::groups`): requests on a topic placed in one reach it through [`Ctx::lane`].
    pub group_leaders: Vec<GroupLane>,
    /// Who leads each Raft group this node is not a voter of, as its voters last said
    /// (`raft::remote_leaders`), for Metadata.
    pub remote_leaders: crate::raft::remote_leaders::RemoteLeaders,
}

/// A Raft group other than 0 that this node runs: its leadership, applied state and proposer,
/// and the coordinators of the transactional ids and group ids placed in it.
pub struct GroupLane {
    pub leader: crate::leader::groups::GroupLeader,
    pub txns: Arc<TxnCoordinator>,
    pub coordinators: GroupCoordinators,
}

/// One Raft group as a request on its partitions sees it (issue 32): whether this node leads
/// it, its applied state (the partitions' data and offsets) and its proposer. Group 0's is the
/// context's own `leadership`, `applied` and `proposer`.
#[derive(Clone, Copy)]
pub struct Lane<'a> {
    pub group: u32,
    pub leadership: &'a Arc<Leadership>,
    pub applied: &'a AppliedView,
    pub proposer: &'a Proposer,
    /// The coordinator of the transactional ids placed in the group.
    pub txns: &'a Arc<TxnCoordinator>,
    /// The coordinators of the group ids placed in the group.
    pub coordinators: &'a GroupCoordinators,
}

impl Lane<'_> {
    /// Whether this node may act as the group's leader now (see [`Leadership::is_leader`]).
    pub fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }

    /// Whether this node may take a write of the group answered from its committed entry (see
    /// [`Leadership::may_propose`]).
    pub fn may_propose(&self) -> bool {
        self.leadership.may_propose()
    }
}

impl Ctx {
    /// Whether this node may act as the Kafka leader now (see [`Leadership::is_leader`]).
    pub fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }

    /// Whether this node may take a write answered from its committed entry (see
    /// [`Leadership::may_propose`]).
    pub fn may_propose(&self) -> bool {
        self.leadership.may_propose()
    }

    /// The current Raft leader, if known.
    pub fn leader_id(&self) -> Option<u64> {
        self.leadership.leader_id()
    }

    /// Group 0, which every node runs.
    pub fn group0(&self) -> Lane<'_> {
        let (leadership, applied, proposer) = (&self.leadership, &self.applied, &self.proposer);
        let (txns, coordinators) = (&self.txns, &self.coordinators);
        Lane { group: 0, leadership, applied, proposer, txns, coordinators }
    }

    /// Group `group` as this node runs it; `None` for a group it is not a voter of.
    pub fn lane(&self, group: u32) -> Option<Lane<'_>> {
        if group == 0 {
            return Some(self.group0());
        }
        let lane = self.group_leaders.iter().find(|l| l.leader.group == group)?;
        Some(Lane {
            group,
            leadership: &lane.leader.duty.leadership,
            applied: &lane.leader.duty.applied,
            proposer: &lane.leader.duty.proposer,
            txns: &lane.txns,
            coordinators: &lane.coordinators,
        })
    }

    /// Every group this node runs, group 0 first.
    pub fn lanes(&self) -> impl Iterator<Item = Lane<'_>> {
        let others = self.group_leaders.iter().map(|l| l.leader.group);
        std::iter::once(0).chain(others).filter_map(|g| self.lane(g))
    }

    /// The Raft address of `node`, from group 0's membership (every node is in it): where a
    /// forwarded request or a message between groups' leaders goes.
    pub fn raft_address(&self, node: u64) -> Option<String> {
        let metrics = self.leadership.metrics();
        let m = metrics.borrow();
        m.membership_config.membership().get_node(&node).map(|n| n.raft.clone())
    }

    /// The node leading `group` as this node knows it: from the group's Raft where this node
    /// is a voter, else as its voters last said (`raft::remote_leaders`).
    pub fn group_leader_id(&self, group: u32) -> Option<u64> {
        match self.lane(group) {
            Some(lane) => lane.leadership.leader_id(),
            None => self.remote_leaders.get(group).map(|heard| heard.leader),
        }
    }

    /// Whether transactional ids are coordinated in the group they are placed in: a cluster of
    /// several groups at `onelog.version` 8 (docs/SCALING.md §2). Below that level every
    /// transaction is group 0's, as it was when the cluster was made.
    pub fn placed_coordinators(&self) -> bool {
        !self.single_group()
            && self.applied.state(|s| s.features.level(ONELOG_VERSION) >= ONELOG_VERSION_GROUP_COORDINATORS)
    }

    /// The group coordinating `transactional_id`: its `txn:` rule, else its hash
    /// (`Placement::id`); 0 while coordinators are not placed.
    pub fn txn_group(&self, transactional_id: &str) -> u32 {
        if !self.placed_coordinators() {
            return 0;
        }
        self.config.settings.raft_groups.placement.id(IdKind::Txn, transactional_id)
    }

    /// The coordinator of `transactional_id` on this node; NOT_COORDINATOR (as not leading)
    /// where this node does not run its group.
    pub fn txn_coordinator(&self, transactional_id: &str) -> Result<&Arc<TxnCoordinator>, TxnFailure> {
        let lane = self.lane(self.txn_group(transactional_id));
        lane.map(|l| l.txns).ok_or(TxnFailure::Propose(ProposeError::NotLeader))
    }

    /// Whether consumer, Streams and share groups live in the Raft group their id is placed
    /// in: a cluster of several groups created with `onelog.group.placement` 1
    /// (docs/SCALING.md §2). Otherwise every group lives in group 0.
    pub fn placed_groups(&self) -> bool {
        !self.single_group() && self.applied.state(|s| s.features.level(GROUP_PLACEMENT) >= 1)
    }

    /// The Raft group whose log holds the state of group `group_id` (consumer, Streams or
    /// share): its `group:` rule, else its hash (`Placement::id`); 0 while groups are not
    /// placed.
    pub fn group_id_group(&self, group_id: &str) -> u32 {
        if !self.placed_groups() {
            return 0;
        }
        self.config.settings.raft_groups.placement.id(IdKind::Group, group_id)
    }

    /// The dynamic configs of group `group_id` (IncrementalAlterConfigs on a GROUP resource):
    /// group 0 holds them, wherever the group's state lives.
    pub fn group_overrides(&self, group_id: &str) -> Option<onelog_state::configs::Overrides> {
        self.applied.state(|s| s.configs.groups.get(group_id).cloned())
    }

    /// The settings share group `group_id` runs with: the broker's, under its dynamic configs.
    pub fn share_group_settings(&self, group_id: &str) -> crate::config::share_group::ShareGroupSettings {
        self.config.settings.share_group.for_group(self.group_overrides(group_id).as_ref())
    }

    /// The leader of Raft group `group` and its epoch, as a NOT_LEADER_OR_FOLLOWER answer
    /// names them (`Leadership::leader_hint`); the epoch is -1 for a group this node does not
    /// run, whose leader its voters named.
    pub fn group_leader_hint(&self, group: u32) -> (i32, i32) {
        match self.lane(group) {
            Some(lane) => lane.leadership.leader_hint(),
            None => self.group_leader_id(group).map_or((-1, -1), |leader| (leader as i32, -1)),
        }
    }

    /// The lane of group `group_id`'s Raft group ([`Ctx::group_id_group`]); `None` where this
    /// node does not run it (the group APIs answer NOT_COORDINATOR), and in a cluster of
    /// several groups until it recorded its first levels, which say where groups live.
    pub fn group_lane(&self, group_id: &str) -> Option<Lane<'_>> {
        if !self.single_group() && !self.applied.state(|s| s.features.is_recorded()) {
            return None;
        }
        let lane = self.lane(self.group_id_group(group_id))?;
        // A group other than 0 serves groups once it follows group 0's levels (a new cluster's
        // groups take them within a second of group 0).
        (lane.group == 0 || lane.applied.state(|s| s.features.is_recorded())).then_some(lane)
    }

    /// Whether this node serves reads of each of `groups` now (`Leadership::serves_reads`):
    /// false for a group it does not run.
    pub async fn serves_reads_of(&self, groups: &[u32]) -> std::collections::BTreeMap<u32, bool> {
        let mut serving = std::collections::BTreeMap::new();
        for group in distinct(groups) {
            let serves = match self.lane(group) {
                Some(lane) => lane.leadership.serves_reads().await,
                None => false,
            };
            serving.insert(group, serves);
        }
        serving
    }

    /// Whether the cluster runs one Raft group: every topic's data is in group 0.
    pub fn single_group(&self) -> bool {
        self.config.settings.raft_groups.groups <= 1
    }

    /// The group holding `topic`'s data, as group 0 recorded it at creation (0 for a topic it
    /// does not know: its requests are answered as today's).
    pub fn topic_group(&self, topic: &str) -> u32 {
        if self.single_group() {
            return 0;
        }
        self.applied.state(|s| s.topics.get(topic).map_or(0, |t| recorded_topic_group(&t.configs)))
    }
}

pub type SharedCtx = Arc<Ctx>;

/// The distinct groups of `groups`, ascending.
pub fn distinct(groups: &[u32]) -> impl Iterator<Item = u32> {
    groups.iter().copied().collect::<std::collections::BTreeSet<u32>>().into_iter()
}
