//! The Raft groups this node runs, as `/status` and `/metrics` show them (docs/SCALING.md §2):
//! per group its leader, term, role, voters, preferred leader and indexes. A one-group node
//! shows group 0 alone; its figures are the node-wide ones beside them.

use maud::{html, Markup};
use prometheus_client::encoding::DescriptorEncoder;
use serde_json::{json, Value};

use super::metrics::{gauge, Series, Snapshot};
use super::status::role;
use crate::raft::groups::NodeGroups;

/// One group's reading.
#[derive(Debug, Clone, Default)]
pub struct GroupRow {
    pub group: u32,
    pub term: u64,
    /// The leader this node knows, or -1.
    pub leader: i64,
    pub is_leader: bool,
    pub role: &'static str,
    pub voters: Vec<u64>,
    pub preferred_leader: Option<u64>,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
    /// Whether this node leads the group and applied an entry of its term (takes writes).
    pub serving: bool,
    /// The group's own cluster id and finalized levels (group 0's, once its leader followed).
    pub cluster_id: Option<String>,
    pub finalized: Vec<(String, i16)>,
    /// Producer ids of other groups this group keeps a fence or an open instance of
    /// (`CrossGroup::remote`; forgotten once their coordinator no longer knows them).
    pub remote_producers: usize,
}

/// Every group's reading on this node (`me`), group 0 first.
pub fn rows(groups: &NodeGroups, me: u64) -> Vec<GroupRow> {
    let read = |h: &crate::raft::groups::GroupHandle| {
        let (cluster_id, finalized, remote_producers) =
            h.applied.state(|s| (s.cluster_id.clone(), s.features.finalized(), s.xgroup.remote.len()));
        let metrics = h.raft.metrics();
        let m = metrics.borrow();
        GroupRow {
            group: h.group,
            term: m.current_term,
            leader: m.current_leader.map_or(-1, |l| l as i64),
            is_leader: m.current_leader == Some(me),
            role: role(m.state),
            voters: m.membership_config.membership().voter_ids().collect(),
            preferred_leader: h.preferred_leader(),
            last_log_index: m.last_log_index,
            applied_index: m.last_applied.map(|l| l.index),
            serving: crate::raft::leads_with_own_term_applied(&m),
            cluster_id,
            finalized,
            remote_producers,
        }
    };
    groups.handles.iter().map(read).collect()
}

/// `/status`'s `"raft_groups"`: `{"count", "groups": [{"group", "leader", "term", "role",
/// "serving", "voters", "preferred_leader", "last_log_index", "last_applied", "cluster_id",
/// "finalized": {name: level}, "remote_producers"}]}`.
pub fn status_json(groups: &NodeGroups, me: u64) -> Value {
    let rows: Vec<Value> = rows(groups, me)
        .into_iter()
        .map(|r| {
            json!({
                "group": r.group,
                "leader": (r.leader >= 0).then_some(r.leader),
                "term": r.term,
                "role": r.role,
                "serving": r.serving,
                "voters": r.voters,
                "preferred_leader": r.preferred_leader,
                "last_log_index": r.last_log_index,
                "last_applied": r.applied_index,
                "cluster_id": r.cluster_id,
                "finalized": r.finalized.into_iter().map(|(n, l)| (n, json!(l))).collect::<serde_json::Map<_, _>>(),
                "remote_producers": r.remote_producers,
            })
        })
        .collect();
    json!({ "count": groups.count, "groups": rows })
}

impl Snapshot {
    /// `onelog_raft_group_*{group="g"}`: each group's term, leader, whether this node leads it,
    /// its preferred leader and applied index.
    pub(super) fn encode_raft_groups(&self, e: &mut DescriptorEncoder) -> std::fmt::Result {
        let series = |value: fn(&GroupRow) -> i64| -> Series {
            self.raft_groups.iter().map(|r| (vec![("group", r.group.to_string())], value(r))).collect()
        };
        gauge(
            e,
            "raft_group_term",
            "The Raft term of each group this node runs",
            None,
            series(|r| r.term as i64),
        )?;
        gauge(e, "raft_group_leader", "Each group's leader (node id), or -1", None, series(|r| r.leader))?;
        gauge(
            e,
            "raft_group_is_leader",
            "1 if this node leads the group",
            None,
            series(|r| r.is_leader as i64),
        )?;
        gauge(
            e,
            "raft_group_preferred_leader",
            "Each group's preferred leader (its first placed voter), or -1",
            None,
            series(|r| r.preferred_leader.map_or(-1, |l| l as i64)),
        )?;
        gauge(
            e,
            "raft_group_applied_index",
            "Index of the last entry of each group applied on this node, or -1",
            None,
            series(|r| r.applied_index.map_or(-1, |i| i as i64)),
        )
    }
}

/// The status page's table of the groups this node runs (shown with more than one): a group
/// led by another node than its preferred leader is marked, as the rebalance duty will move it.
pub(super) fn table(rows: &[GroupRow]) -> Markup {
    let ids = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    html! {
        table id="raft-groups" {
            tr { th { "group" } th { "leader" } th { "preferred leader" } th { "term" } th { "this node" } th { "voters" } th { "applied" } }
            @for r in rows {
                tr {
                    td.n { (r.group) }
                    td class=[(r.leader >= 0 && Some(r.leader as u64) != r.preferred_leader).then_some("bad")] {
                        @if r.leader >= 0 { (r.leader) } @else { span.empty { "none" } }
                    }
                    td { @match r.preferred_leader { Some(p) => (p), None => "-" } }
                    td.n { (r.term) }
                    td { (r.role) }
                    td { (ids(&r.voters)) }
                    td.n { @match r.applied_index { Some(i) => (i), None => "-" } }
                }
            }
        }
    }
}
