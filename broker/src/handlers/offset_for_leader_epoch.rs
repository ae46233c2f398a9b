//! OffsetForLeaderEpoch (key 23): lets consumers validate their position after a leader
//! change (KIP-320) instead of trusting offsets fetched under an older epoch.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
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
    let is_leader = ctx.is_leader();
    let epoch = ctx.leadership.leader_epoch();
    ctx.applied.read(|applied| {
        let topics = body
            .topics
            .into_iter()
            .zip(described)
            .map(|(topic, described)| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
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
                    })
                    .collect();
                OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions)
            })
            .collect();
        Ok(Some(ResponseKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochResponse::default().with_topics(topics),
        )))
    })
}
