//! DescribeQuorum (key 55), v0–v2: the one Raft group, as KRaft's `__cluster_metadata-0`.
//!
//! Read from openraft's metrics on the leader: the leader id and epoch (the Raft term), the
//! high watermark (the index after the last applied entry: on the leader applied follows
//! committed within one apply), and per voter its log end offset (the index after its
//! matched entry; the leader's own last log index + 1), so Kafka's tools compute lag as
//! leader log end − voter log end. Learners are the observers. openraft keeps no per-follower
//! fetch times, so the timestamps are -1 (unknown). A follower cannot see replication
//! progress: it forwards the request to the leader, as a Kafka broker forwards it to the
//! active controller. Any other topic-partition is UNKNOWN_TOPIC_OR_PARTITION (top level, as
//! `KafkaRaftClient` answers).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{ApiKey, DescribeQuorumResponse, RequestKind, ResponseKind};

use super::util::{str_bytes, topic_name};
use super::HandlerResult;
use crate::authz::{self, code, op, Subject};
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

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let forwarded = crate::net::forward::is_forwarded();
    let origin = crate::net::forward::Origin::of(&req);
    let who = Subject::of(&req);
    let RequestKind::DescribeQuorum(body) = req.body else { anyhow::bail!("not a DescribeQuorum body") };
    let asks_metadata_partition = body.topics.len() == 1
        && body.topics[0].topic_name.0.as_str() == METADATA_TOPIC
        && body.topics[0].partitions.len() == 1
        && body.topics[0].partitions[0].partition_index == METADATA_PARTITION;
    if !asks_metadata_partition {
        return Ok(Some(ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default()
                .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                .with_error_message(Some(str_bytes(format!(
                    "onelog's quorum is {METADATA_TOPIC}-{METADATA_PARTITION}"
                )))),
        )));
    }
    // Kafka's controller: DESCRIBE on the cluster.
    if !authz::cluster_allowed(&ctx, &who, op::DESCRIBE) {
        return Ok(Some(ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default()
                .with_error_code(code::CLUSTER_AUTHORIZATION_FAILED)
                .with_error_message(Some(str_bytes("Cluster authorization failed."))),
        )));
    }
    if !ctx.leadership.is_raft_leader() {
        return forward(&ctx, &origin, req.api_version, body, forwarded).await;
    }
    Ok(Some(ResponseKind::DescribeQuorum(describe(&ctx, req.api_version))))
}

async fn forward(
    ctx: &Ctx,
    origin: &crate::net::forward::Origin,
    version: i16,
    body: kafka_protocol::messages::DescribeQuorumRequest,
    forwarded: bool,
) -> HandlerResult {
    // A forwarded request that reaches a node no longer leading is not forwarded again.
    let answer = if forwarded {
        Err(anyhow::anyhow!("forwarded to a node that no longer leads"))
    } else {
        crate::net::forward::to_leader(ctx, origin, KEY, version, RequestKind::DescribeQuorum(body)).await
    };
    match answer {
        Ok(response) => Ok(Some(response)),
        Err(e) => {
            tracing::debug!(error = %e, "DescribeQuorum not forwarded to the leader");
            let partition = PartitionData::default()
                .with_partition_index(METADATA_PARTITION)
                .with_error_code(error_code::NOT_LEADER_OR_FOLLOWER)
                .with_leader_id((-1).into());
            Ok(Some(ResponseKind::DescribeQuorum(DescribeQuorumResponse::default().with_topics(
                vec![TopicData::default()
                    .with_topic_name(topic_name(METADATA_TOPIC))
                    .with_partitions(vec![partition])],
            ))))
        }
    }
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
