//! DescribeProducers (key 61), v0: per partition, the producers with state there — producer
//! id, epoch, last sequence, last append time and the first offset of an open transaction —
//! as `kafka-transactions.sh describe-producers` and `find-hanging` read them.
//!
//! Producer state and the partitions' open transactions are replicated state (DESIGN §2),
//! so every replica answers from its applied state, as every Kafka replica answers from its
//! own log: `find-hanging --broker-id` asks a chosen replica and fails on
//! NOT_LEADER_OR_FOLLOWER. A follower's view may trail the leader's by the entries it has not
//! applied yet, like a Kafka follower's. There is no coordinator epoch: it is -1.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{ApiKey, DescribeProducersResponse, ProducerId, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::coord::txn::views::{self, ActiveProducer};
use crate::ctx::SharedCtx;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DescribeProducers;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeProducers(body) = req.body else {
        anyhow::bail!("not a DescribeProducers body")
    };
    // KafkaApis: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    let readable =
        ctx.authorizer.allowed_each(&who, rt::TOPIC, body.topics.iter().map(|t| t.name.0.as_str()), op::READ);
    // Each topic from the state of the Raft group holding it (issue 32), where this node runs it.
    let topics = body
        .topics
        .into_iter()
        .zip(readable)
        .map(|(topic, readable)| {
            let lane = ctx.lane(ctx.topic_group(&topic.name.0));
            let answer = |state: &onelog_state::BrokerState, index: i32| {
                let out = PartitionResponse::default().with_partition_index(index);
                if !readable {
                    return out.with_error_code(code::TOPIC_AUTHORIZATION_FAILED);
                }
                match views::active_producers(state, &topic.name.0, index) {
                    Some(producers) => out
                        .with_error_code(error_code::NONE)
                        .with_active_producers(producers.into_iter().map(producer_state).collect()),
                    None => out.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
                }
            };
            let partitions = match lane {
                Some(lane) => lane
                    .applied
                    .state(|state| topic.partition_indexes.iter().map(|&i| answer(state, i)).collect()),
                None => topic
                    .partition_indexes
                    .iter()
                    .map(|&i| {
                        PartitionResponse::default()
                            .with_partition_index(i)
                            .with_error_code(error_code::NOT_LEADER_OR_FOLLOWER)
                    })
                    .collect(),
            };
            TopicResponse::default().with_name(topic.name).with_partitions(partitions)
        })
        .collect();
    Ok(Some(ResponseKind::DescribeProducers(DescribeProducersResponse::default().with_topics(topics))))
}

fn producer_state(p: ActiveProducer) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.producer_epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp_ms)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(p.txn_start_offset)
}
