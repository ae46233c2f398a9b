//! `GET /metrics`' gauges, read from the node's state at each scrape: a [`Snapshot`],
//! gathered by [`gather`] (async: the Raft commit index comes from the Raft core), then encoded
//! as a collector beside the recorded metrics (`crate::metrics`). Nothing here is kept between
//! scrapes.

use onelog_state::xgroup::placement::holds_topic_data;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::share_groups::{self, ShareGroupRow};
use crate::ctx::SharedCtx;
use crate::metrics::recorded::PLAINTEXT;
use crate::net::incidents::STATS;
use crate::raft::applied::AppliedView;
use crate::raft::transport::vote_gate::{VoteGate, Votes};
use crate::raft::{Metrics, Raft};
use crate::storage::partitions::Partitions;
use onelog_state::BrokerState;

/// What a scrape reads from.
pub struct Sources<'a> {
    pub node_id: u64,
    pub raft: &'a Raft,
    pub applied: &'a AppliedView,
    pub votes: &'a VoteGate,
    /// The serving node's context, once it has caught up (the group coordinator lives there).
    pub serving: Option<SharedCtx>,
    /// Every Raft group the node runs.
    pub groups: &'a crate::raft::groups::NodeGroups,
}

#[derive(Debug, Clone)]
pub struct PartitionRow {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
}

/// One scrape's reading of the node.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub node_id: u64,
    pub term: u64,
    /// The leader this node knows, or -1.
    pub leader: i64,
    pub is_leader: bool,
    pub last_log_index: Option<u64>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub checkpoint_index: Option<u64>,
    pub voters: usize,
    pub learners: usize,
    /// Leader only: entries each follower is behind the leader's last log index.
    pub follower_lag: Vec<(u64, u64)>,
    pub votes_withheld: bool,
    pub partitions: Vec<PartitionRow>,
    pub transactions_open: usize,
    pub transactional_ids: usize,
    /// Consumer groups (classic and KIP-848) by state (`Stable`, `Empty`, ...); only where the
    /// node coordinates.
    pub groups: ByState,
    /// KIP-1071 Streams groups by state (`NotReady`, `Stable`, ...); only where the node
    /// coordinates.
    pub streams_groups: ByState,
    /// KIP-932 share groups by state (`Empty`, `Stable`), and each one's figures; only where
    /// the node coordinates.
    pub share_groups: ByState,
    pub share_group_rows: Vec<ShareGroupRow>,
    pub connections_open: u64,
    pub request_memory_bytes: u64,
    pub listener_incidents: Vec<(&'static str, u64)>,
    /// Each Raft group this node runs (`raft_groups`).
    pub raft_groups: Vec<super::raft_groups::GroupRow>,
}

/// Reads the node for one scrape. Each part of the [`Snapshot`] comes from where it lives:
/// openraft's metrics (role, indexes, membership, follower lag), the Raft core (commit index),
/// the applied state under one lock (partitions, transactions), the group coordinator (only
/// where this node leads) and the listener's counters.
pub async fn gather(sources: Sources<'_>) -> Snapshot {
    let metrics = sources.raft.metrics().borrow().clone();
    // The commit index is not in openraft's metrics; the Raft core answers it. `None` if the
    // core has stopped.
    let commit_index = sources.raft.with_raft_state(|st| st.committed.map(|l| l.index)).await.ok().flatten();
    let membership = metrics.membership_config.membership();
    let mut applied =
        sources.applied.with_partitions(|applied, logs| AppliedReading::of(&applied.state, logs, 0));
    // Each other Raft group this node runs holds its topics' data and transactions (issue 32).
    for handle in sources.groups.handles.iter().filter(|h| h.group != 0) {
        let g = handle.group;
        applied
            .add(handle.applied.with_partitions(|applied, logs| AppliedReading::of(&applied.state, logs, g)));
    }
    let is_leader = metrics.current_leader == Some(sources.node_id);
    let groups = match &sources.serving {
        Some(ctx) if is_leader => GroupReading::of(ctx),
        _ => GroupReading::default(),
    };
    Snapshot {
        node_id: sources.node_id,
        term: metrics.current_term,
        leader: metrics.current_leader.map_or(-1, |l| l as i64),
        is_leader,
        last_log_index: metrics.last_log_index,
        commit_index,
        applied_index: metrics.last_applied.map(|l| l.index),
        checkpoint_index: metrics.snapshot.map(|l| l.index),
        voters: membership.voter_ids().count(),
        learners: membership.learner_ids().count(),
        follower_lag: follower_lag(&metrics, sources.node_id),
        votes_withheld: sources.votes.votes() != Votes::Open,
        partitions: applied.partitions,
        transactions_open: applied.transactions_open,
        transactional_ids: applied.transactional_ids,
        groups: groups.consumer,
        streams_groups: groups.streams,
        share_groups: groups.share,
        share_group_rows: groups.share_rows,
        connections_open: STATS.connections_open.load(Ordering::Relaxed),
        request_memory_bytes: STATS.request_memory_bytes.load(Ordering::Relaxed),
        listener_incidents: listener_incidents(),
        raft_groups: super::raft_groups::rows(sources.groups, sources.node_id),
    }
}

/// Leader only (openraft reports replication on the leader): entries each follower is behind
/// the leader's last log index. A follower with nothing matched yet is a whole log behind.
fn follower_lag(metrics: &Metrics, node_id: u64) -> Vec<(u64, u64)> {
    match (&metrics.replication, metrics.last_log_index) {
        (Some(replication), Some(last)) => replication
            .iter()
            .filter(|(id, _)| **id != node_id)
            .map(|(id, matched)| {
                let lag = matched.map_or(last + 1, |m| last.saturating_sub(m.index));
                (*id, lag)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// What a scrape reads from the applied state, taken under one read of it so that the
/// partitions and transactions agree with each other.
struct AppliedReading {
    partitions: Vec<PartitionRow>,
    transactions_open: usize,
    transactional_ids: usize,
}

impl AppliedReading {
    /// Raft group `group`'s reading. Group 0 holds an empty copy of each topic placed in
    /// another group (its metadata), which is not a replica: only its own topics count.
    fn of(state: &BrokerState, logs: &Partitions, group: u32) -> AppliedReading {
        let transactions_open =
            state.txns.by_id.values().filter(|m| m.state == onelog_state::txns::TxnState::Ongoing).count();
        AppliedReading {
            partitions: partition_rows(state, logs, group),
            transactions_open,
            transactional_ids: state.txns.by_id.len(),
        }
    }

    /// Another group's reading added: partitions in topic-name order again, counts summed.
    fn add(&mut self, other: AppliedReading) {
        self.partitions.extend(other.partitions);
        self.partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        self.transactions_open += other.transactions_open;
        self.transactional_ids += other.transactional_ids;
    }
}

/// One row per partition, in topic-name order, with the bytes its segment files hold.
fn partition_rows(state: &BrokerState, logs: &Partitions, group: u32) -> Vec<PartitionRow> {
    let mut rows = Vec::new();
    for (name, topic) in state.topics.iter().filter(|(_, t)| holds_topic_data(group, &t.configs)) {
        for (index, p) in topic.partitions.iter().enumerate() {
            let partition = index as i32;
            let size_bytes = logs.get(&topic.topic_id, partition).map_or(0, |log| log.lock().total_bytes());
            rows.push(PartitionRow {
                topic: name.clone(),
                partition,
                log_start_offset: p.log_start_offset,
                high_watermark: p.high_watermark(),
                last_stable_offset: p.last_stable_offset(),
                // Only committed entries are applied, so a replica's log ends at the high
                // watermark; the two differ in Kafka, whose followers fetch ahead of it.
                log_end_offset: p.log_end_offset,
                size_bytes,
            });
        }
    }
    rows
}

/// The listener's incident counters, by the `kind` label each is exposed under.
fn listener_incidents() -> Vec<(&'static str, u64)> {
    vec![
        ("malformed_request", STATS.malformed_requests.total()),
        ("request_failure", STATS.request_failures.total()),
        ("handler_panic", STATS.handler_panics.total()),
        ("frame_read_timeout", STATS.frame_read_timeouts.total()),
        ("idle_connection_closed", STATS.idle_connections_closed.total()),
        ("connection_refused", STATS.connections_refused.total()),
        ("accept_error", STATS.accept_errors.total()),
        ("cut_off_close", STATS.cut_off_closes.total()),
    ]
}

/// Groups counted by state name.
type ByState = Vec<(&'static str, usize)>;

/// What a scrape reads of the groups on the serving leader. By state: the consumer groups
/// (classic and KIP-848), then the Streams and the share groups, whose states are of another
/// kind (`NotReady`) and whose dashboards are another's; and each share group's figures.
#[derive(Default)]
struct GroupReading {
    consumer: ByState,
    streams: ByState,
    share: ByState,
    share_rows: Vec<ShareGroupRow>,
}

impl GroupReading {
    fn of(ctx: &SharedCtx) -> GroupReading {
        let (mut consumer, mut streams, mut share) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for group in crate::handlers::list_groups::listed(ctx) {
            let by_state = if group.is_streams() {
                &mut streams
            } else if group.is_share() {
                &mut share
            } else {
                &mut consumer
            };
            *by_state.entry(group.state).or_insert(0) += 1;
        }
        GroupReading {
            consumer: consumer.into_iter().collect(),
            streams: streams.into_iter().collect(),
            share: share.into_iter().collect(),
            // Each Raft group's share groups (every one of them lives in group 0 unless the
            // cluster places its groups), their share partitions from their topics' groups.
            share_rows: share_groups::across(ctx),
        }
    }
}

/// A gauge series: labels and value.
pub(super) type Series = Vec<(Vec<(&'static str, String)>, i64)>;

pub(super) fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: Series,
) -> std::fmt::Result {
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in series {
        if labels.is_empty() {
            // No `{}`: a series without labels is written bare.
            ConstGauge::new(value).encode(metric)?;
            return Ok(());
        }
        ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn one(value: i64) -> Series {
    vec![(Vec::new(), value)]
}

fn index(value: Option<u64>) -> Series {
    // An index not yet known (an empty log) is left out rather than reported as 0.
    value.map(|v| one(v as i64)).unwrap_or_default()
}

impl Collector for Snapshot {
    /// The exposition, one section per concern, always in this order (pinned by
    /// `exposition_is_pinned`): the node's Raft role, its log indexes, the membership, the
    /// partitions, the coordinators, the Kafka listener.
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let e = &mut encoder;
        self.encode_role(e)?;
        self.encode_raft_groups(e)?;
        self.encode_indexes(e)?;
        self.encode_membership(e)?;
        self.encode_partitions(e)?;
        self.encode_coordinators(e)?;
        self.encode_listener(e)
    }
}

impl Snapshot {
    /// Who this node is and whom it follows: what an operator reads first.
    fn encode_role(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(e, "node_id", "This node's id", None, one(self.node_id as i64))?;
        gauge(e, "raft_term", "The Raft term this node is in", None, one(self.term as i64))?;
        gauge(e, "raft_leader", "The leader this node knows (node id), or -1", None, one(self.leader))?;
        gauge(
            e,
            "raft_is_leader",
            "1 if this node is the Raft (and Kafka) leader",
            None,
            one(self.is_leader as i64),
        )
    }

    /// How far this node's log, commit, apply and checkpoint have come; the apply lag is the
    /// gap between the two that a slow state machine opens.
    fn encode_indexes(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(
            e,
            "raft_last_log_index",
            "Index of the last entry in this node's Raft log",
            None,
            index(self.last_log_index),
        )?;
        gauge(
            e,
            "raft_commit_index",
            "Index of the last entry this node knows committed",
            None,
            index(self.commit_index),
        )?;
        gauge(
            e,
            "raft_applied_index",
            "Index of the last entry applied to this node's state",
            None,
            index(self.applied_index),
        )?;
        let lag = match (self.commit_index, self.applied_index) {
            (Some(c), a) => one(c.saturating_sub(a.unwrap_or(0)) as i64),
            _ => Vec::new(),
        };
        gauge(e, "raft_apply_lag_entries", "Committed entries not yet applied on this node", None, lag)?;
        gauge(
            e,
            "raft_checkpoint_index",
            "Index the latest checkpoint (snapshot) covers",
            None,
            index(self.checkpoint_index),
        )
    }

    /// The membership, how far behind the leader each follower is, and whether this node may
    /// vote: what decides whether the cluster can elect and commit.
    fn encode_membership(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(e, "raft_voters", "Voters in the membership", None, one(self.voters as i64))?;
        gauge(e, "raft_learners", "Learners in the membership", None, one(self.learners as i64))?;
        let lag = self
            .follower_lag
            .iter()
            .map(|(id, lag)| (vec![("follower", id.to_string())], *lag as i64))
            .collect();
        gauge(
            e,
            "raft_replication_lag_entries",
            "Leader only: entries a follower is behind the leader's log",
            None,
            lag,
        )?;
        gauge(
            e,
            "raft_votes_withheld",
            "1 while this node, having lost its log, withholds votes until caught up",
            None,
            one(self.votes_withheld as i64),
        )
    }

    /// The transaction and group coordinators' state, as the applied log and this node (if it
    /// leads) hold it.
    fn encode_coordinators(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(
            e,
            "transactions_open",
            "Transactions written to and not yet decided",
            None,
            one(self.transactions_open as i64),
        )?;
        gauge(
            e,
            "transactional_ids",
            "Transactional ids the log holds",
            None,
            one(self.transactional_ids as i64),
        )?;
        let groups =
            self.groups.iter().map(|(state, n)| (vec![("state", state.to_string())], *n as i64)).collect();
        gauge(e, "consumer_groups", "Leader only: consumer groups by state", None, groups)?;
        let streams = self
            .streams_groups
            .iter()
            .map(|(state, n)| (vec![("state", state.to_string())], *n as i64))
            .collect();
        gauge(e, "streams_groups", "Leader only: Streams groups by state", None, streams)?;
        let share = self
            .share_groups
            .iter()
            .map(|(state, n)| (vec![("state", state.to_string())], *n as i64))
            .collect();
        gauge(e, "share_groups", "Leader only: share groups (KIP-932) by state", None, share)?;
        share_groups::encode(e, &self.share_group_rows)
    }

    /// The Kafka listener's load and incidents, labelled with the listener (one: `PLAINTEXT`).
    /// Incidents are counters, so they are encoded here rather than through [`gauge`].
    fn encode_listener(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let listener = || vec![("listener", PLAINTEXT.to_string())];
        gauge(
            e,
            "kafka_connections_open",
            "Client connections open",
            None,
            vec![(listener(), self.connections_open as i64)],
        )?;
        gauge(
            e,
            "kafka_request_memory",
            "Request memory reserved now (queued.max.request.bytes)",
            Some(&Unit::Bytes),
            vec![(listener(), self.request_memory_bytes as i64)],
        )?;
        let mut incidents = e.encode_descriptor(
            "kafka_listener_incidents",
            "Listener incidents, by kind",
            None,
            MetricType::Counter,
        )?;
        for (kind, total) in &self.listener_incidents {
            let labels = [("kind", *kind)];
            ConstCounter::new(*total).encode(incidents.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// Each partition's offsets and size, one family per quantity, each series labelled by
    /// topic and partition.
    fn encode_partitions(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let labels =
            |p: &PartitionRow| vec![("topic", p.topic.clone()), ("partition", p.partition.to_string())];
        let series = |f: fn(&PartitionRow) -> i64| -> Series {
            self.partitions.iter().map(|p| (labels(p), f(p))).collect()
        };
        gauge(
            e,
            "partition_log_start_offset",
            "First offset of the partition",
            None,
            series(|p| p.log_start_offset),
        )?;
        gauge(
            e,
            "partition_high_watermark",
            "High watermark: offsets below it are committed",
            None,
            series(|p| p.high_watermark),
        )?;
        gauge(
            e,
            "partition_last_stable_offset",
            "Last stable offset: below it no transaction is undecided (read_committed reads to here)",
            None,
            series(|p| p.last_stable_offset),
        )?;
        gauge(
            e,
            "partition_log_end_offset",
            "Offset the next record appended gets",
            None,
            series(|p| p.log_end_offset),
        )?;
        gauge(
            e,
            "partition_size",
            "Record data in the partition's segment files",
            Some(&Unit::Bytes),
            series(|p| p.size_bytes as i64),
        )?;
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    /// A snapshot that reaches every branch of the encoder: followers and groups (a share
    /// group with its figures among them), an index not yet known (left out), votes withheld,
    /// a partition of each kind of offset.
    pub(in crate::admin_api) fn fixed_snapshot() -> Snapshot {
        let row = |topic: &str, partition, lso, hw, size_bytes| PartitionRow {
            topic: topic.to_string(),
            partition,
            log_start_offset: 2,
            high_watermark: hw,
            last_stable_offset: lso,
            log_end_offset: hw,
            size_bytes,
        };
        Snapshot {
            node_id: 1,
            term: 7,
            leader: 1,
            is_leader: true,
            last_log_index: Some(120),
            commit_index: Some(118),
            applied_index: None,
            checkpoint_index: None,
            voters: 2,
            learners: 1,
            follower_lag: vec![(2, 3), (3, 121)],
            votes_withheld: true,
            partitions: vec![row("orders", 0, 40, 42, 5000), row("orders", 1, 9, 9, 3 << 20)],
            transactions_open: 1,
            transactional_ids: 4,
            groups: vec![("Empty", 1), ("Stable", 2)],
            streams_groups: vec![("NotReady", 1), ("Stable", 1)],
            share_groups: vec![("Stable", 1)],
            share_group_rows: vec![ShareGroupRow {
                group_id: "jobs".to_string(),
                state: "Stable",
                members: 2,
                in_flight: 30,
                acquired: 20,
                lag: 45,
                redelivered: 3,
                accepted: 120,
                archived: 2,
            }],
            connections_open: 5,
            request_memory_bytes: 4096,
            listener_incidents: vec![("malformed_request", 2), ("accept_error", 0)],
            raft_groups: vec![
                super::super::raft_groups::GroupRow {
                    group: 0,
                    term: 7,
                    leader: 1,
                    is_leader: true,
                    role: "leader",
                    voters: vec![1, 2],
                    preferred_leader: Some(1),
                    last_log_index: Some(120),
                    applied_index: None,
                    ..Default::default()
                },
                super::super::raft_groups::GroupRow {
                    group: 1,
                    term: 3,
                    leader: 3,
                    is_leader: false,
                    role: "follower",
                    voters: vec![1, 2],
                    preferred_leader: Some(2),
                    last_log_index: Some(9),
                    applied_index: Some(9),
                    ..Default::default()
                },
            ],
        }
    }

    /// The exposition is an interface (dashboards and alerts name its series): pinned byte for
    /// byte, so a refactoring of the encoder cannot change it unseen.
    #[test]
    fn exposition_is_pinned() {
        let mut registry = Registry::with_prefix("onelog");
        registry.register_collector(Box::new(fixed_snapshot()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert_eq!(text, include_str!("testdata/metrics.txt"));
    }
}
