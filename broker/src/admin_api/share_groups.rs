//! What `/metrics` and the status page show of each KIP-932 share group, read from the applied
//! state (`BrokerState::share_groups` and `share_states`) and never written: its state and
//! members, the records its share partitions hold in flight and acquired, its lag, and the
//! running totals of deliveries and acknowledgements (`share_partition::Totals`).
//!
//! Lag is Kafka's DescribeShareGroupOffsets lag (KIP-932, KIP-1226;
//! `GroupCoordinatorService.computeShareGroupLagAndBuildResponse`), as that handler computes
//! it (`describe_share_group_offsets::lag`): per share partition, the high watermark less the
//! share-partition start offset (SPSO) less the records above the SPSO already acknowledged or
//! archived (Kafka's `deliveryCompleteCount`), summed over the group's share partitions. A
//! partition the group never fetched from has no share state and adds nothing, as
//! DescribeShareGroupOffsets reports no lag for it.

use std::collections::BTreeMap;

use onelog_state::consumer_group::TopicId;
use onelog_state::share_partition::SharePartition;
use onelog_state::BrokerState;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

use super::metrics::{gauge, Series};
use crate::ctx::Ctx;
use crate::handlers::describe_share_group_offsets::lag;

/// One share group's figures, as one read of the applied state saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroupRow {
    pub group_id: String,
    /// `Empty` or `Stable` (Kafka's `ShareGroupState`).
    pub state: &'static str,
    pub members: usize,
    /// Records in the in-flight windows, SPSO up to the next offset to acquire (Kafka's
    /// `numInFlightRecords`), summed over the group's share partitions.
    pub in_flight: i64,
    /// Of those, records some member holds acquired now.
    pub acquired: i64,
    /// Records between each SPSO and high watermark not yet acknowledged or archived.
    pub lag: i64,
    /// Running totals: deliveries after the first, Accept acknowledgements, and records
    /// archived (rejected, or past the delivery count limit).
    pub redelivered: u64,
    pub accepted: u64,
    pub archived: u64,
}

/// Every share group, in group id order, read from one state holding both its members and its
/// share partitions (a single Raft group).
#[cfg(test)]
pub fn rows(state: &BrokerState) -> Vec<ShareGroupRow> {
    let mut rows = members(state, |_| true);
    add_partitions(&mut rows, state);
    rows.into_values().collect()
}

/// Every share group of the Raft groups this node runs, in group id order: its members from
/// the Raft group its id is placed in, its share partitions' figures from every Raft group
/// holding one (a share partition lives with its topic, docs/SCALING.md §2).
pub fn across(ctx: &Ctx) -> Vec<ShareGroupRow> {
    let mut rows = BTreeMap::new();
    for lane in ctx.lanes() {
        // Read apart from the placement, which reads group 0's state.
        let found = lane.applied.state(|s| members(s, |_| true));
        rows.extend(found.into_iter().filter(|(id, _)| ctx.group_id_group(id) == lane.group));
    }
    for lane in ctx.lanes() {
        lane.applied.state(|s| add_partitions(&mut rows, s));
    }
    rows.into_values().collect()
}

/// The share groups of `state` whose ids pass `placed`, with their members.
fn members(state: &BrokerState, placed: impl Fn(&str) -> bool) -> BTreeMap<String, ShareGroupRow> {
    let groups = state.share_groups.groups.iter().filter(|(id, _)| placed(id));
    groups
        .map(|(id, group)| {
            let row = ShareGroupRow {
                group_id: id.clone(),
                state: group.state().as_str(),
                members: group.members.len(),
                ..ShareGroupRow::default()
            };
            (id.clone(), row)
        })
        .collect()
}

/// Adds the figures of each share partition `state` holds to its group's row, if listed.
fn add_partitions(rows: &mut BTreeMap<String, ShareGroupRow>, state: &BrokerState) {
    let high_watermarks = high_watermarks(state);
    for (id, partitions) in &state.share_states.groups {
        let Some(row) = rows.get_mut(id) else { continue };
        for (topic_id, by_partition) in partitions {
            for (partition, share) in by_partition {
                let hw = high_watermarks.get(topic_id).and_then(|hws| hws.get(*partition as usize));
                row.add(share, hw.copied());
            }
        }
    }
}

impl ShareGroupRow {
    /// Adds one share partition, whose high watermark is `hw` (None: its topic is gone).
    fn add(&mut self, share: &SharePartition, hw: Option<i64>) {
        self.in_flight += share.in_flight_count();
        self.acquired += share.acquired_count();
        self.lag += hw.map_or(0, |hw| lag(share, hw));
        let totals = &share.totals;
        self.redelivered += totals.redelivered;
        self.accepted += totals.accepted;
        self.archived += totals.rejected + totals.archived_by_limit;
    }
}

/// The per-group series of `/metrics`, labelled `group`: gauges of members, records in
/// flight and acquired, and lag; counters of records redelivered, accepted and archived.
/// Nothing on a node that does not serve (it reads no rows).
pub fn encode(e: &mut DescriptorEncoder, rows: &[ShareGroupRow]) -> std::fmt::Result {
    let series = |f: fn(&ShareGroupRow) -> i64| -> Series {
        rows.iter().map(|r| (vec![("group", r.group_id.clone())], f(r))).collect()
    };
    let help = "Leader only: members of each share group";
    gauge(e, "share_group_members", help, None, series(|r| r.members as i64))?;
    let help = "Leader only: records in each share group's in-flight windows (start offset to next offset to acquire)";
    gauge(e, "share_group_records_in_flight", help, None, series(|r| r.in_flight))?;
    let help = "Leader only: records each share group's members hold acquired";
    gauge(e, "share_group_records_acquired", help, None, series(|r| r.acquired))?;
    let help = "Leader only: records from each share group's start offsets to the high watermarks not yet acknowledged or archived";
    gauge(e, "share_group_lag_records", help, None, series(|r| r.lag))?;
    let help = "Leader only: records each share group delivered again";
    counter(e, "share_group_records_redelivered", help, rows, |r| r.redelivered)?;
    let help = "Leader only: records each share group's members accepted";
    counter(e, "share_group_records_accepted", help, rows, |r| r.accepted)?;
    let help = "Leader only: records each share group archived (rejected, or at the delivery count limit)";
    counter(e, "share_group_records_archived", help, rows, |r| r.archived)
}

/// A counter family (Prometheus appends `_total`), one series per group; nothing without rows.
fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[ShareGroupRow],
    value: fn(&ShareGroupRow) -> u64,
) -> std::fmt::Result {
    if rows.is_empty() {
        return Ok(());
    }
    let mut family = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for r in rows {
        let labels = [("group", r.group_id.as_str())];
        ConstCounter::new(value(r)).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Each topic's partitions' high watermarks, by topic id (share states are keyed by id).
fn high_watermarks(state: &BrokerState) -> BTreeMap<TopicId, Vec<i64>> {
    state
        .topics
        .values()
        .map(|t| (t.topic_id, t.partitions.iter().map(|p| p.high_watermark()).collect()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use onelog_state::share_group::{ShareGroup, ShareMember};
    use onelog_state::share_partition::{InFlight, RecordState, SharePartition, Totals};
    use onelog_state::{BrokerState, PartitionState, Topic};

    use super::{rows, ShareGroupRow};

    fn range(last_offset: i64, state: RecordState) -> InFlight {
        InFlight {
            last_offset,
            state,
            delivery_count: 1,
            member_id: if state == RecordState::Acquired { "m".into() } else { String::new() },
            deadline_ms: if state == RecordState::Acquired { 30_000 } else { 0 },
            batch_first_offset: 10,
            batch_last_offset: 19,
        }
    }

    /// SPSO 10, next offset 20: 10-11 acquired, 12-14 acknowledged, 15 available, 16-17
    /// archived, 18-19 acquired. Below a high watermark of 25 it lags 15 - 5 done with = 10.
    fn window() -> SharePartition {
        let records = BTreeMap::from([
            (10, range(11, RecordState::Acquired)),
            (12, range(14, RecordState::Acknowledged)),
            (15, range(15, RecordState::Available)),
            (16, range(17, RecordState::Archived)),
            (18, range(19, RecordState::Acquired)),
        ]);
        let totals = Totals {
            acquired: 9,
            redelivered: 2,
            accepted: 3,
            released: 1,
            rejected: 1,
            archived_by_limit: 1,
        };
        SharePartition { start_offset: 10, next_offset: 20, records, totals }
    }

    #[test]
    fn a_group_sums_its_share_partitions() {
        let mut state = BrokerState::default();
        let mut group = ShareGroup::new();
        group.members.insert("m".into(), ShareMember::new());
        state.share_groups.groups.insert("g".into(), group);
        state.share_groups.groups.insert("idle".into(), ShareGroup::new());
        let partition = |log_end_offset| PartitionState { log_end_offset, ..PartitionState::new() };
        let topic = Topic {
            topic_id: [1; 16],
            replication_factor: 1,
            configs: BTreeMap::new(),
            partitions: vec![partition(25), partition(24)],
        };
        state.topics.insert("t".into(), topic);
        // Topic [2; 16] is gone: its window still counts, its lag cannot be known. Partition 1
        // was read up to 20 and has nothing in flight: it lags 24 - 20.
        let partitions = BTreeMap::from([
            ([1; 16], BTreeMap::from([(0, window()), (1, SharePartition::new(20))])),
            ([2; 16], BTreeMap::from([(3, window())])),
        ]);
        state.share_states.groups.insert("g".into(), partitions);
        let g = ShareGroupRow {
            group_id: "g".into(),
            state: "Stable",
            members: 1,
            in_flight: 20,
            acquired: 8,
            lag: 14,
            redelivered: 4,
            accepted: 6,
            archived: 4,
        };
        let idle = ShareGroupRow { group_id: "idle".into(), state: "Empty", ..ShareGroupRow::default() };
        assert_eq!(rows(&state), vec![g, idle]);
    }
}
