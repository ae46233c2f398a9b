//! The status page at `GET /`: one server-rendered HTML page (maud, which escapes every value),
//! no script, refreshed by the browser every few seconds. It shows what an operator looks at
//! first: the cluster (leader, term, voters and their lag), nodes, topics with partition
//! offsets and sizes, groups (classic, consumer, Streams and share) with their lag (and a
//! share group's records in flight), open transactions with age and partitions, and the leader
//! changes this node has seen. `/status` stays the JSON for scripts.

use maud::{html, Markup, DOCTYPE};

use super::leader_changes::LeaderChange;
use super::metrics::{self, PartitionRow, Snapshot};
use super::share_groups::ShareGroupRow;
use super::AdminCtx;
use crate::clock::wall_clock_ms;
use crate::ctx::SharedCtx;
use crate::handlers::list_groups::{TYPE_CLASSIC, TYPE_SHARE};
use crate::raft::applied::AppliedView;
use crate::raft::Metrics;
use onelog_state::xgroup::placement::recorded_topic_group;
use onelog_state::BrokerState;

/// Seconds between the browser's reloads.
const REFRESH_S: u32 = 3;

struct NodeRow {
    id: u64,
    voter: bool,
    raft: String,
    kafka: String,
    /// Entries behind the leader, as this node (if the leader) sees it.
    lag: Option<u64>,
}

struct GroupRow {
    id: String,
    /// `classic`, `consumer`, `streams` or `share`; None where this node does not coordinate.
    group_type: Option<&'static str>,
    state: &'static str,
    members: Option<usize>,
    /// Records between the committed offsets and the high watermarks of their partitions; for
    /// a share group, which commits none, its share partitions' lag (`share_groups`).
    lag: i64,
    partitions: usize,
    /// A share group's records in flight (`share_groups`); None for the other types.
    in_flight: Option<i64>,
}

struct TxnRow {
    transactional_id: String,
    producer: String,
    age_ms: i64,
    partitions: Vec<String>,
}

pub struct PageData {
    snapshot: Snapshot,
    role: &'static str,
    serving: bool,
    nodes: Vec<NodeRow>,
    groups: Vec<GroupRow>,
    transactions: Vec<TxnRow>,
    leader_changes: Vec<LeaderChange>,
    now_ms: i64,
}

/// Reads what the page shows: the metrics' [`Snapshot`] (role, indexes, partitions), the
/// membership's nodes, and the groups and open transactions from one read of the applied state
/// (and of each other Raft group's, for the transactions coordinated there).
pub async fn gather(ctx: &AdminCtx) -> PageData {
    let snapshot = metrics::gather(ctx.metric_sources()).await;
    let m = ctx.raft.metrics().borrow().clone();
    let nodes = nodes(&m, &snapshot);
    let serving_ctx = ctx.serving.get().cloned();
    let now_ms = wall_clock_ms();
    let groups = groups(ctx, serving_ctx.as_ref(), snapshot.is_leader, &snapshot.share_group_rows);
    let mut transactions = ctx.applied.state(|s| open_transactions(s, now_ms));
    // The transactions coordinated in the other Raft groups this node runs (issue 32).
    for handle in ctx.groups.handles.iter().filter(|h| h.group != 0) {
        transactions.extend(handle.applied.state(|s| open_transactions(s, now_ms)));
    }
    PageData {
        role: super::status::role(m.state),
        serving: crate::raft::leads_with_own_term_applied(&m),
        snapshot,
        nodes,
        groups,
        transactions,
        leader_changes: ctx.leader_changes.recent(),
        now_ms,
    }
}

/// Every node of the membership, with its lag as the leader sees it (the leader itself is 0
/// behind; on a follower no lag is known).
fn nodes(m: &Metrics, snapshot: &Snapshot) -> Vec<NodeRow> {
    let membership = m.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let lag_of = |id: u64| snapshot.follower_lag.iter().find(|(f, _)| *f == id).map(|(_, lag)| *lag);
    membership
        .nodes()
        .map(|(id, addr)| NodeRow {
            id: *id,
            voter: voters.contains(id),
            raft: addr.raft.clone(),
            kafka: addr.kafka.clone(),
            lag: if *id == snapshot.node_id && snapshot.is_leader { Some(0) } else { lag_of(*id) },
        })
        .collect()
}

/// The groups (classic, consumer, Streams and share) with their lag: those of every Raft
/// group this node leads. Which type holds an id, and a classic group's state, are known only
/// to the group coordinator, which runs on the leader of the id's Raft group; on a node not
/// leading group 0 the groups that committed offsets there are listed too, as `Unknown`. Members are those the coordinator knows, or for a consumer or Streams
/// group those the log holds. A share group's figures are the ones `/metrics` read (`shares`).
/// Each group is read from the Raft group holding it, each partition's high watermark from
/// the one holding the topic.
fn groups(
    ctx: &AdminCtx,
    serving: Option<&SharedCtx>,
    is_leader: bool,
    shares: &[ShareGroupRow],
) -> Vec<GroupRow> {
    let mut listed: Vec<(String, Option<&'static str>, &'static str)> = serving
        .map(|c| crate::handlers::list_groups::listed(c))
        .unwrap_or_default()
        .into_iter()
        .map(|g| (g.group_id, Some(g.group_type), g.state))
        .collect();
    if !is_leader || serving.is_none() {
        // Group 0's groups that committed offsets, whose coordinator is another node.
        let known: Vec<String> = listed.iter().map(|(id, _, _)| id.clone()).collect();
        let in_group0: Vec<String> = ctx.applied.state(|s| s.groups.groups.keys().cloned().collect());
        let others = in_group0.into_iter().filter(|id| !known.contains(id));
        listed.extend(others.map(|id| (id, None, "Unknown")));
    }
    listed
        .into_iter()
        .map(|(id, group_type, group_state)| {
            if let Some(share) = shares.iter().find(|r| r.group_id == id) {
                return share_row(share);
            }
            let held_in = serving.map_or(0, |c| c.group_id_group(&id));
            let Some(view) = group_view(ctx, held_in) else {
                let (members, lag, partitions) = (None, 0, 0);
                return GroupRow {
                    id,
                    group_type,
                    state: group_state,
                    members,
                    lag,
                    partitions,
                    in_flight: None,
                };
            };
            let committed = committed_offsets(ctx, view, &id);
            let lag = committed.iter().map(|(c, hw)| hw.map_or(0, |hw| (hw - c).max(0))).sum();
            let members = match group_type {
                Some(TYPE_CLASSIC) | None => serving
                    .and_then(|c| c.group_lane(&id)?.coordinators.classic.describe(&id))
                    .map(|v| v.members.len()),
                Some(_) => view.state(|s| members_in_log(s, &id)),
            };
            let partitions = committed.len();
            GroupRow { id, group_type, state: group_state, members, lag, partitions, in_flight: None }
        })
        .collect()
}

/// The applied state of Raft group `group` on this node, if it runs it.
fn group_view(ctx: &AdminCtx, group: u32) -> Option<&AppliedView> {
    if group == 0 {
        return Some(&ctx.applied);
    }
    ctx.groups.handles.iter().find(|h| h.group == group).map(|h| &h.applied)
}

/// A share group's row: it commits no offsets, its lag and records in flight are its share
/// partitions'.
fn share_row(share: &ShareGroupRow) -> GroupRow {
    GroupRow {
        id: share.group_id.clone(),
        group_type: Some(TYPE_SHARE),
        state: share.state,
        members: Some(share.members),
        lag: share.lag,
        partitions: 0,
        in_flight: Some(share.in_flight),
    }
}

/// The members of the consumer, Streams or share group `group_id`, whose membership the log
/// holds.
fn members_in_log(state: &BrokerState, group_id: &str) -> Option<usize> {
    let consumer = state.consumer_groups.groups.get(group_id).map(|g| g.members.len());
    let streams = || state.streams_groups.groups.get(group_id).map(|g| g.members.len());
    let share = || state.share_groups.groups.get(group_id).map(|g| g.members.len());
    consumer.or_else(streams).or_else(share)
}

/// A group's committed offsets in `view` (the Raft group holding it), each beside the high
/// watermark of its partition, read from the Raft group holding the topic (`None` for a
/// partition that no longer exists, or of a group this node does not run).
fn committed_offsets(ctx: &AdminCtx, view: &AppliedView, group_id: &str) -> Vec<(i64, Option<i64>)> {
    let offsets: Vec<(String, i32, i64)> = view.state(|s| {
        let offsets = s.groups.groups.get(group_id).map(|g| &g.offsets).into_iter().flatten();
        offsets
            .flat_map(|(topic, parts)| parts.iter().map(move |(p, c)| (topic.clone(), *p, c.offset)))
            .collect()
    });
    let hw = |topic: &str, partition: i32| {
        let placed = ctx.applied.state(|s| s.topics.get(topic).map(|t| recorded_topic_group(&t.configs)))?;
        group_view(ctx, placed)?.state(|s| {
            s.topics.get(topic).and_then(|t| t.partitions.get(partition as usize)).map(|p| p.high_watermark())
        })
    };
    offsets.into_iter().map(|(topic, p, c)| (c, hw(&topic, p))).collect()
}

/// The transactions written to and not yet decided, with their age (0 for one whose start
/// time the log does not hold).
fn open_transactions(state: &BrokerState, now_ms: i64) -> Vec<TxnRow> {
    state
        .txns
        .by_id
        .iter()
        .filter(|(_, meta)| meta.state == onelog_state::txns::TxnState::Ongoing)
        .map(|(id, meta)| TxnRow {
            transactional_id: id.clone(),
            producer: format!("{}/{}", meta.producer_id, meta.producer_epoch),
            age_ms: if meta.start_ms >= 0 { (now_ms - meta.start_ms).max(0) } else { 0 },
            partitions: meta.partitions.keys().map(|(t, p)| format!("{t}/{p}")).collect(),
        })
        .collect()
}

fn leader_name(leader: i64) -> String {
    if leader < 0 {
        "none".to_string()
    } else {
        format!("node {leader}")
    }
}

fn ago(now_ms: i64, at_ms: i64) -> String {
    let s = (now_ms - at_ms).max(0) as f64 / 1000.0;
    if s < 120.0 {
        format!("{s:.1} s ago")
    } else {
        format!("{:.0} min ago", s / 60.0)
    }
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn index(i: Option<u64>) -> String {
    i.map_or_else(|| "–".to_string(), |i| i.to_string())
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f3f3f3}td.n{text-align:right}.leader{font-weight:bold}.empty{color:#777}\
.ok{color:#070}.bad{color:#a00}";

/// The page, its outline at a glance: the cluster line, then one table per section, each
/// rendered by its own function.
pub fn render(data: &PageData) -> String {
    let s = &data.snapshot;
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(REFRESH_S);
                title { "onelog node " (s.node_id) }
                style { (STYLE) }
            }
            body {
                h1 { "onelog — node " (s.node_id) " (" (data.role) ")" }
                (cluster(data))
                h2 { "Nodes" }
                (nodes_table(&data.nodes, s.leader))
                @if s.raft_groups.len() > 1 {
                    h2 { "Raft groups" }
                    (super::raft_groups::table(&s.raft_groups))
                }
                h2 { "Topics" }
                (topics(&s.partitions))
                h2 { "Groups" }
                (groups_table(&data.groups))
                h2 { "Open transactions" }
                (transactions_table(&data.transactions))
                h2 { "Recent leader changes (seen by this node)" }
                (leader_changes_table(&data.leader_changes, data.now_ms))
                p.empty { "Refreshes every " (REFRESH_S) " s. JSON: " a href="/status" { "/status" } ", Prometheus: " a href="/metrics" { "/metrics" } "." }
            }
        }
    };
    page.into_string()
}

/// One line on the cluster as this node sees it: leader, term, whether this node serves
/// writes, its indexes, and a warning while it withholds its vote.
fn cluster(data: &PageData) -> Markup {
    let s = &data.snapshot;
    html! {
        p id="cluster" {
            "Leader: " span.leader id="leader" { (leader_name(s.leader)) }
            " · term " (s.term)
            " · this node " @if data.serving { span.ok { "serves writes" } } @else if s.is_leader { span.bad { "leads, not serving yet" } } @else { "follows" }
            " · log " (index(s.last_log_index)) ", committed " (index(s.commit_index)) ", applied " (index(s.applied_index))
            @if s.votes_withheld { " · " span.bad { "votes withheld: rejoining after losing its log" } }
        }
    }
}

/// The membership, the leader's row marked; a lag only the leader knows is said to be so.
fn nodes_table(nodes: &[NodeRow], leader: i64) -> Markup {
    html! {
        table id="nodes" {
            tr { th { "id" } th { "role" } th { "Kafka" } th { "Raft" } th { "lag (entries)" } }
            @for n in nodes {
                tr {
                    td class=[(n.id as i64 == leader).then_some("leader")] { (n.id) }
                    td { @if n.id as i64 == leader { "leader" } @else if n.voter { "voter" } @else { "learner" } }
                    td { (n.kafka) } td { (n.raft) }
                    td.n { @match n.lag { Some(lag) => (lag), None => span.empty { "seen by the leader" } } }
                }
            }
        }
    }
}

fn groups_table(groups: &[GroupRow]) -> Markup {
    html! {
        @if groups.is_empty() { p.empty { "No groups." } } @else {
            table id="groups" {
                tr { th { "group" } th { "type" } th { "state" } th { "members" } th { "partitions committed" } th { "lag (records)" } th { "in flight (records)" } }
                @for g in groups {
                    tr {
                        td { (g.id) } td { (g.group_type.unwrap_or("–")) } td { (g.state) }
                        td.n { @match g.members { Some(n) => (n), None => "–" } }
                        td.n { (g.partitions) } td.n { (g.lag) }
                        td.n { @match g.in_flight { Some(n) => (n), None => "–" } }
                    }
                }
            }
        }
    }
}

fn transactions_table(transactions: &[TxnRow]) -> Markup {
    html! {
        @if transactions.is_empty() { p.empty { "No open transaction." } } @else {
            table id="transactions" {
                tr { th { "transactional.id" } th { "producer id/epoch" } th { "age" } th { "partitions" } }
                @for t in transactions {
                    tr {
                        td { (t.transactional_id) } td { (t.producer) }
                        td.n { (format!("{:.1} s", t.age_ms as f64 / 1000.0)) }
                        td { (t.partitions.join(", ")) }
                    }
                }
            }
        }
    }
}

/// Most recent first; a term without a leader was an election.
fn leader_changes_table(changes: &[LeaderChange], now_ms: i64) -> Markup {
    html! {
        table id="leader-changes" {
            tr { th { "when" } th { "term" } th { "leader" } }
            @for c in changes {
                tr {
                    td { (ago(now_ms, c.at_ms)) } td.n { (c.term) }
                    td { @match c.leader { Some(l) => (format!("node {l}")), None => span.empty { "election" } } }
                }
            }
        }
    }
}

fn topics(partitions: &[PartitionRow]) -> Markup {
    html! {
        @if partitions.is_empty() { p.empty { "No topics." } } @else {
            table id="topics" {
                tr { th { "topic" } th { "partition" } th { "log start" } th { "LSO" } th { "high watermark" } th { "size" } }
                @for p in partitions {
                    tr {
                        td { (p.topic) } td.n { (p.partition) } td.n { (p.log_start_offset) }
                        td.n { (p.last_stable_offset) } td.n { (p.high_watermark) } td.n { (bytes(p.size_bytes)) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        let row = PartitionRow {
            topic: "<script>alert(1)</script>".to_string(),
            partition: 0,
            log_start_offset: 0,
            high_watermark: 5,
            last_stable_offset: 3,
            log_end_offset: 5,
            size_bytes: 2048,
        };
        let html = topics(&[row]).into_string();
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("2.0 KiB"), "{html}");
    }

    /// A page that reaches every branch: a leader not serving yet, votes withheld, a voter with
    /// lag and a learner without, groups with and without members and type (a share group
    /// with records in flight among them), an open transaction, an election among the leader
    /// changes.
    fn fixed_page() -> PageData {
        let node =
            |id, voter, lag| NodeRow { id, voter, raft: format!("r:{id}"), kafka: format!("k:{id}"), lag };
        let group = |id: &str, group_type, state, members| GroupRow {
            id: id.to_string(),
            group_type,
            state,
            members,
            lag: 12,
            partitions: 2,
            in_flight: None,
        };
        PageData {
            snapshot: super::metrics::tests::fixed_snapshot(),
            role: "leader",
            serving: false,
            nodes: vec![node(1, true, Some(0)), node(2, true, Some(3)), node(3, false, None)],
            groups: vec![
                group("g<1>", Some("classic"), "Stable", Some(2)),
                group("g2", None, "Unknown", None),
                group("wordcount", Some("streams"), "NotReady", Some(3)),
                GroupRow {
                    partitions: 0,
                    lag: 45,
                    in_flight: Some(30),
                    ..group("jobs", Some("share"), "Stable", Some(2))
                },
            ],
            transactions: vec![TxnRow {
                transactional_id: "tx-1".to_string(),
                producer: "5/0".to_string(),
                age_ms: 2500,
                partitions: vec!["orders/0".to_string(), "orders/1".to_string()],
            }],
            leader_changes: vec![
                LeaderChange { at_ms: 1_000_000, term: 7, leader: Some(1) },
                LeaderChange { at_ms: 700_000, term: 6, leader: None },
            ],
            now_ms: 1_010_000,
        }
    }

    /// What an operator reads, pinned byte for byte, so a refactoring of `render` cannot
    /// change it unseen.
    #[test]
    fn page_is_pinned() {
        let html = render(&fixed_page());
        assert_eq!(html, include_str!("testdata/status_page.html"));
    }
}
