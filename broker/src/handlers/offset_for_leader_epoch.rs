//! OffsetForLeaderEpoch (key 23): lets consumers validate their position after a leader
//! change (KIP-320) instead of trusting offsets fetched under an older epoch.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochResponse, RequestKind, ResponseKind};

use super::HandlerResult;
use crate::ctx::SharedCtx;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
pub const VERSIONS: (i16, i16) = (2, 4);
pub const ACCEPTED_MIN_VERSION: i16 = 2;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::OffsetForLeaderEpoch(body) = req.body else {
        anyhow::bail!("not an OffsetForLeaderEpoch body")
    };
    // KafkaApis: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    let described = ctx.authorizer.allowed_each(
        &who,
        rt::TOPIC,
        body.topics.iter().map(|t| t.topic.0.as_str()),
        op::DESCRIBE,
    );
    // Each topic is answered by the leader of the Raft group holding it (issue 32), from that
    // group's leader epoch cache.
    let topics = body
        .topics
        .into_iter()
        .zip(described)
        .map(|(topic, described)| {
            let lane = ctx.lane(ctx.topic_group(topic.topic.0.as_str()));
            let is_leader = lane.is_some_and(|l| l.leadership.is_leader());
            let epoch = lane.map_or(-1, |l| l.leadership.leader_epoch());
            let applied = lane.map_or(&ctx.applied, |l| l.applied);
            let partitions = applied.read(|applied| {
                let answer = |p: &OffsetForLeaderPartition| {
                    let out = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let ps = applied.state.partition(topic.topic.0.as_str(), p.partition);
                    match ps {
                        _ if !described => out.with_error_code(code::TOPIC_AUTHORIZATION_FAILED),
                        None => out.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
                        Some(_) if !is_leader => out.with_error_code(error_code::NOT_LEADER_OR_FOLLOWER),
                        Some(_) if p.current_leader_epoch > epoch => {
                            out.with_error_code(error_code::UNKNOWN_LEADER_EPOCH)
                        }
                        Some(_) if p.current_leader_epoch >= 0 && p.current_leader_epoch < epoch => {
                            out.with_error_code(error_code::FENCED_LEADER_EPOCH)
                        }
                        Some(ps) => {
                            let (e, end) = ps.end_offset_for_epoch(p.leader_epoch);
                            out.with_leader_epoch(e).with_end_offset(end)
                        }
                    }
                };
                topic.partitions.iter().map(answer).collect()
            });
            OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions)
        })
        .collect();
    Ok(Some(ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))))
}
