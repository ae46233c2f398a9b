//! ListGroups (key 16), v0–v5: the groups with members or committed offsets.
//!
//! Kafka's admin client asks every broker and merges the answers, each broker listing the
//! groups it coordinates. The leader of a Raft group coordinates every group id placed in it
//! (see find_coordinator), so a node lists the groups of each Raft group it leads and answers
//! an empty list if it leads none, which keeps the merge free of duplicates.
//! With no leader known the answer is COORDINATOR_NOT_AVAILABLE, which the admin client
//! retries, rather than an empty list that would look complete. The leader lists from its
//! applied state even while its lease is being renewed: listing is not a write.
//! Classic groups with members are listed with the coordinator's state (see `coord::group`); a
//! classic group known only from committed offsets is in state `Empty` with protocol type
//! `consumer`. KIP-848 consumer groups are listed with their derived state (Empty, Assigning,
//! Reconciling, Stable) and protocol type `consumer`; KIP-1071 Streams groups with theirs
//! (Empty, NotReady, Assigning, Reconciling, Stable) and protocol type `streams` (Kafka's
//! `StreamsGroup.asListedGroup`); KIP-932 share groups with theirs (Empty, Stable) and
//! protocol type `share` (`ShareGroup.PROTOCOL_TYPE`). v4 (KIP-518) filters by state and v5
//! (KIP-848) by type (`classic`, `consumer`, `streams`, `share`), both case-insensitively as
//! Kafka does (`GroupMetadataManager.listGroups`); a state is
//! matched by Kafka's lower-case name, which for NotReady is `not_ready`
//! (`StreamsGroupState.toLowerCaseString`). An unknown word matches nothing. A classic group
//! whose protocol type is "consumer" is not of type `consumer`: the Java admin client asks for
//! both types and tells them apart itself.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsResponse, RequestKind, ResponseKind};

pub use super::group_kind::{TYPE_CLASSIC, TYPE_SHARE};
use super::group_kind::{TYPE_CONSUMER, TYPE_STREAMS};
use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::{Ctx, Lane, SharedCtx};
use crate::security::authz::{op, rt, Subject};
use onelog_state::share_group::PROTOCOL_TYPE as SHARE_PROTOCOL_TYPE;
use onelog_state::BrokerState;

pub const KEY: ApiKey = ApiKey::ListGroups;
pub const VERSIONS: (i16, i16) = (0, 5);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const STATE_EMPTY: &str = "Empty";
/// The protocol type of a consumer group, and of a classic group known only from offsets.
const PROTOCOL_TYPE: &str = "consumer";
/// The protocol type of a Streams group (`StreamsGroup.PROTOCOL_TYPE`).
const STREAMS_PROTOCOL_TYPE: &str = "streams";

/// One group as ListGroups, the status page and `/metrics` show it.
pub struct Listed {
    pub group_id: String,
    pub state: &'static str,
    pub protocol_type: String,
    /// `classic`, `consumer`, `streams` or `share` (see `group_kind`).
    pub group_type: &'static str,
}

impl Listed {
    /// A KIP-1071 Streams group: counted apart from the consumer groups in `/metrics`.
    pub fn is_streams(&self) -> bool {
        self.group_type == TYPE_STREAMS
    }

    /// A KIP-932 share group: counted apart from the consumer groups in `/metrics`.
    pub fn is_share(&self) -> bool {
        self.group_type == TYPE_SHARE
    }
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ListGroups(body) = req.body else { anyhow::bail!("not a ListGroups body") };
    // KafkaApis: every group with DESCRIBE on the cluster, else those the principal may describe.
    let all_groups = ctx.authorizer.cluster_allowed(&who, op::DESCRIBE);
    let describable = |id: &str| all_groups || ctx.authorizer.allowed(&who, rt::GROUP, id, op::DESCRIBE);
    let leader = ctx.leader_id();
    if leader.is_none() {
        let response = ListGroupsResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
        return Ok(Some(ResponseKind::ListGroups(response)));
    }
    let wanted = |state: &str| {
        body.states_filter.is_empty()
            || body.states_filter.iter().any(|s| s.trim().eq_ignore_ascii_case(&filter_name(state)))
    };
    let type_wanted = |group_type: &str| {
        body.types_filter.is_empty()
            || body.types_filter.iter().any(|t| t.trim().eq_ignore_ascii_case(group_type))
    };
    let groups = listed(&ctx)
        .into_iter()
        .filter(|g| wanted(g.state) && type_wanted(g.group_type) && describable(&g.group_id))
        .map(|g| row(g, req.api_version))
        .collect();
    Ok(Some(ResponseKind::ListGroups(
        ListGroupsResponse::default().with_error_code(error_code::NONE).with_groups(groups),
    )))
}

fn row(g: Listed, v: i16) -> ListedGroup {
    let group = ListedGroup::default()
        .with_group_id(GroupId(str_bytes(g.group_id)))
        .with_protocol_type(str_bytes(g.protocol_type));
    let group = if v >= 4 { group.with_group_state(str_bytes(g.state)) } else { group };
    if v >= 5 {
        group.with_group_type(str_bytes(g.group_type))
    } else {
        group
    }
}

/// A listed group: (state, protocol type, group type).
type Row = (&'static str, String, &'static str);

/// The consumer, Streams and share groups, whose state the log holds.
fn in_log(s: &BrokerState) -> Vec<(String, Row)> {
    let consumer = s
        .consumer_groups
        .groups
        .iter()
        .map(|(id, g)| (id.clone(), (g.state().as_str(), PROTOCOL_TYPE.to_string(), TYPE_CONSUMER)));
    let streams =
        s.streams_groups.groups.iter().map(|(id, g)| {
            (id.clone(), (g.state().as_str(), STREAMS_PROTOCOL_TYPE.to_string(), TYPE_STREAMS))
        });
    let share = s
        .share_groups
        .groups
        .iter()
        .map(|(id, g)| (id.clone(), (g.state().as_str(), SHARE_PROTOCOL_TYPE.to_string(), TYPE_SHARE)));
    consumer.chain(streams).chain(share).collect()
}

/// The name a states filter matches a state by: Kafka's lower-case name, one word except
/// for the Streams group state NotReady (`not_ready`).
fn filter_name(state: &str) -> String {
    if state == "NotReady" {
        "not_ready".to_string()
    } else {
        state.to_ascii_lowercase()
    }
}

/// The groups this node coordinates: those of every Raft group it leads (its Raft leader,
/// even while its lease is being renewed) placed in it, in group id order within each. A Raft
/// group holding a share partition of a share group placed elsewhere (an offsets reset made
/// there, `coord::share::remote`) may know that group's id, empty: it is listed where it lives.
pub fn listed(ctx: &Ctx) -> Vec<Listed> {
    let led = ctx.lanes().filter(|lane| lane.leadership.leader_id() == Some(ctx.node_id));
    let groups: Vec<(u32, Listed)> =
        led.flat_map(|lane| listed_in(lane).into_iter().map(move |g| (lane.group, g))).collect();
    groups
        .into_iter()
        .filter(|(group, g)| ctx.group_id_group(&g.group_id) == *group)
        .map(|(_, g)| g)
        .collect()
}

/// Every group of `lane` in group id order: the classic coordinator's, the consumer, Streams
/// and share groups, then the classic groups known only from committed offsets. An id is
/// listed once, as `group_kind` decides.
fn listed_in(lane: Lane) -> Vec<Listed> {
    let classic = |(state, protocol_type): (&'static str, String)| (state, protocol_type, TYPE_CLASSIC);
    let coordinator = &lane.coordinators.classic;
    let mut groups: BTreeMap<String, Row> = coordinator
        .list()
        .into_iter()
        // A group whose members all left keeps listing as the consumer group it was.
        .map(|(id, state, protocol_type)| {
            let protocol_type =
                if protocol_type.is_empty() { PROTOCOL_TYPE.to_string() } else { protocol_type };
            (id, classic((state.name(), protocol_type)))
        })
        .collect();
    // Read under the applied lock, merged outside it: the coordinator has its own lock.
    let (from_log, with_offsets) =
        lane.applied.state(|s| (in_log(s), s.groups.groups.keys().cloned().collect::<Vec<_>>()));
    for (id, row) in from_log {
        if !coordinator.holds(&id) {
            groups.insert(id, row);
        }
    }
    for id in with_offsets {
        groups.entry(id).or_insert_with(|| classic((STATE_EMPTY, PROTOCOL_TYPE.to_string())));
    }
    groups
        .into_iter()
        .map(|(group_id, (state, protocol_type, group_type))| Listed {
            group_id,
            state,
            protocol_type,
            group_type,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use onelog_state::share_group::{ShareGroup, ShareMember};
    use onelog_state::streams_group::{Member, StreamsGroup};
    use onelog_state::BrokerState;

    use super::{filter_name, in_log, TYPE_SHARE, TYPE_STREAMS};

    #[test]
    fn streams_groups_list_with_protocol_and_group_type_streams() {
        let mut state = BrokerState::default();
        let groups = &mut state.streams_groups.groups;
        groups.insert("empty".into(), StreamsGroup::new());
        let mut joined = StreamsGroup::new();
        // A member and no validated topology: Kafka's NotReady.
        joined.members.insert("m".into(), Member::new());
        groups.insert("joined".into(), joined);
        let listed = in_log(&state);
        let row = |state: &'static str| (state, "streams".to_string(), TYPE_STREAMS);
        assert_eq!(listed, vec![("empty".into(), row("Empty")), ("joined".into(), row("NotReady"))]);
    }

    /// Kafka's `ShareGroup`: protocol type and group type `share`, Empty without members and
    /// Stable with any.
    #[test]
    fn share_groups_list_with_protocol_and_group_type_share() {
        let mut state = BrokerState::default();
        let groups = &mut state.share_groups.groups;
        groups.insert("empty".into(), ShareGroup::new());
        let mut joined = ShareGroup::new();
        joined.members.insert("m".into(), ShareMember::new());
        groups.insert("joined".into(), joined);
        let row = |state: &'static str| (state, "share".to_string(), TYPE_SHARE);
        assert_eq!(in_log(&state), vec![("empty".into(), row("Empty")), ("joined".into(), row("Stable"))]);
    }

    #[test]
    fn states_filter_matches_kafkas_lower_case_names() {
        // `StreamsGroupState.toLowerCaseString`: NotReady is the one state with an underscore.
        assert_eq!(filter_name("NotReady"), "not_ready");
        assert_eq!(filter_name("Stable"), "stable");
        assert_eq!(filter_name("PreparingRebalance"), "preparingrebalance");
    }
}
