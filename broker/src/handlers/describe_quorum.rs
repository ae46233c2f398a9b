//! DescribeQuorum (key 55), v0–v2: the one Raft group, as KRaft's `__cluster_metadata-0`.
//!
//! Read from openraft's metrics on the leader: the leader id and epoch (the Raft term), the
//! high watermark (the index after the last applied entry: on the leader applied follows
//! committed within one apply), and per voter its log end offset (the index after its
//! matched entry; the leader's own last log index + 1), so Kafka's tools compute lag as
//! leader log end − voter log end. Learners are the observers. openraft keeps no per-follower
//! fetch times, so the timestamps are -1 (unknown). A follower cannot see replication
//! progress: it forwards the request to the leader at dispatch (`Route::Leader` on its
//! registry row), as a Kafka broker forwards it to the active controller; a node named Raft
//! leader that may not propose yet cannot forward to itself and describes. Any other
//! topic-partition is UNKNOWN_TOPIC_OR_PARTITION (top level, as `KafkaRaftClient` answers),
//! where it arrives.
//!
//! Access: CLUSTER DESCRIBE, checked by the pipeline (`handlers::HANDLERS`) before the
//! partition is looked at, as Kafka's controller checks it before `KafkaRaftClient` answers.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, RequestKind, ResponseKind,
};

use super::util::{refusal_message, str_bytes, topic_name};
use super::{Forwarded, HandlerResult};
use crate::ctx::{Ctx, SharedCtx};

pub const KEY: ApiKey = ApiKey::DescribeQuorum;
pub const VERSIONS: (i16, i16) = (0, 2);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// The name and partition Kafka's tools ask for.
const METADATA_TOPIC: &str = "__cluster_metadata";
const METADATA_PARTITION: i32 = 0;
/// Kafka's "unknown" for a timestamp.
const UNKNOWN_TIMESTAMP: i64 = -1;
/// The listener name v2 reports for each node's Kafka address.
const LISTENER: &str = "PLAINTEXT";

pub const FORWARDED: Forwarded = Forwarded {
    when: |body| matches!(body, RequestKind::DescribeQuorum(b) if asks_metadata_partition(b)),
    settled: |_, _, _| true,
};

/// Whether the request asks for the one partition onelog describes.
fn asks_metadata_partition(body: &DescribeQuorumRequest) -> bool {
    body.topics.len() == 1
        && body.topics[0].topic_name.0.as_str() == METADATA_TOPIC
        && body.topics[0].partitions.len() == 1
        && body.topics[0].partitions[0].partition_index == METADATA_PARTITION
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeQuorum(body) = req.body else { anyhow::bail!("not a DescribeQuorum body") };
    if !asks_metadata_partition(&body) {
        return Ok(Some(ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default()
                .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                .with_error_message(Some(str_bytes(format!(
                    "onelog's quorum is {METADATA_TOPIC}-{METADATA_PARTITION}"
                )))),
        )));
    }
    // A follower the leader could not answer for at dispatch, or a forwarded request that
    // reached a node no longer leading (never forwarded again).
    if !ctx.leadership.is_raft_leader() {
        return Ok(Some(ResponseKind::DescribeQuorum(not_leader())));
    }
    Ok(Some(ResponseKind::DescribeQuorum(describe(&ctx, req.api_version))))
}

/// NOT_LEADER_OR_FOLLOWER on the partition, no leader known: clients ask again.
fn not_leader() -> DescribeQuorumResponse {
    let partition = PartitionData::default()
        .with_partition_index(METADATA_PARTITION)
        .with_error_code(error_code::NOT_LEADER_OR_FOLLOWER)
        .with_leader_id((-1).into());
    DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition])])
}

fn describe(ctx: &Ctx, version: i16) -> DescribeQuorumResponse {
    let metrics = ctx.leadership.metrics();
    let m = metrics.borrow();
    let log_end = |index: Option<u64>| index.map_or(0, |i| i as i64 + 1);
    let replica = |id: u64| {
        let matched = if id == ctx.node_id {
            m.last_log_index
        } else {
            m.replication.as_ref().and_then(|r| r.get(&id).copied().flatten()).map(|l| l.index)
        };
        ReplicaState::default()
            .with_replica_id((id as i32).into())
            .with_log_end_offset(log_end(matched))
            .with_last_fetch_timestamp(UNKNOWN_TIMESTAMP)
            .with_last_caught_up_timestamp(UNKNOWN_TIMESTAMP)
    };
    let membership = m.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let observers: Vec<u64> = membership.learner_ids().collect();
    let partition = PartitionData::default()
        .with_partition_index(METADATA_PARTITION)
        .with_leader_id((ctx.node_id as i32).into())
        .with_leader_epoch(m.current_term as i32)
        .with_high_watermark(log_end(m.last_applied.map(|l| l.index)))
        .with_current_voters(voters.iter().map(|id| replica(*id)).collect())
        .with_observers(observers.iter().map(|id| replica(*id)).collect());
    let mut response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name(METADATA_TOPIC))
        .with_partitions(vec![partition])]);
    if version >= 2 {
        // v2 (KIP-853): each voter's endpoints; onelog's are its Kafka listeners.
        let nodes = membership
            .nodes()
            .filter_map(|(id, addr)| {
                let (host, port) = addr.kafka.rsplit_once(':')?;
                Some(Node::default().with_node_id((*id as i32).into()).with_listeners(
                    vec![Listener::default()
                    .with_name(str_bytes(LISTENER))
                    .with_host(str_bytes(host))
                    .with_port(port.parse().ok()?)],
                ))
            })
            .collect();
        response = response.with_nodes(nodes);
    }
    response
}

/// The whole request refused with `code` at the top level, with Kafka's message for it
/// (`DescribeQuorumRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DescribeQuorum(_) = body else {
        return ResponseKind::DescribeQuorum(Default::default());
    };
    ResponseKind::DescribeQuorum(
        DescribeQuorumResponse::default().with_error_code(code).with_error_message(refusal_message(code)),
    )
}
