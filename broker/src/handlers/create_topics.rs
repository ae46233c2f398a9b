//! CreateTopics (key 19): validated against Kafka's rules, created in one Raft entry. A
//! follower forwards it to the leader at dispatch (`Route::Leader` on its registry row), as
//! Kafka brokers forward it to the controller; `validate_only` is answered where it arrives.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{ApiKey, CreateTopicsResponse, RequestKind, ResponseKind};

use super::describe_configs::topic_entries;
use super::util::{str_bytes, uuid};
use super::{Forwarded, HandlerResult};
use crate::controller::{self, TopicRequest};
use crate::ctx::SharedCtx;
use crate::net::forward;
use crate::security::authz::{self, code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::CreateTopics;
pub const VERSIONS: (i16, i16) = (2, 7);
pub const ACCEPTED_MIN_VERSION: i16 = 2;

/// A follower forwards every creation (a validation it answers itself), and answers once it
/// has applied every topic the leader created.
pub const FORWARDED: Forwarded = Forwarded {
    when: |body| matches!(body, RequestKind::CreateTopics(b) if !b.validate_only),
    settled: |_, response, state| forward::topics_created(response, state),
};

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::CreateTopics(body) = req.body else { anyhow::bail!("not a CreateTopics body") };
    let requests: Vec<TopicRequest> = body
        .topics
        .iter()
        .map(|t| {
            let configs: BTreeMap<String, String> = t
                .configs
                .iter()
                .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                .collect();
            let assignments = t
                .assignments
                .iter()
                .map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect()))
                .collect();
            TopicRequest {
                name: t.name.0.to_string(),
                partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                configs,
                assignments,
            }
        })
        .collect();
    // KafkaApis: CREATE on the cluster, else on each topic (TOPIC_AUTHORIZATION_FAILED).
    let creatable: Vec<bool> = if ctx.authorizer.cluster_allowed(&who, op::CREATE) {
        vec![true; requests.len()]
    } else {
        ctx.authorizer.allowed_each(&who, rt::TOPIC, requests.iter().map(|r| r.name.as_str()), op::CREATE)
    };
    let allowed: Vec<TopicRequest> =
        requests.iter().zip(&creatable).filter(|(_, c)| **c).map(|(r, _)| r.clone()).collect();
    let results = controller::create_topics(&ctx, &allowed, body.validate_only).await;
    let results = authz::merge_refused(&creatable, results, (code::TOPIC_AUTHORIZATION_FAILED, None));
    ctx.applied.read(|applied| {
        let topics = requests
            .iter()
            .zip(results)
            .map(|(r, (code, message))| {
                let mut result = CreatableTopicResult::default()
                    .with_name(kafka_protocol::messages::TopicName(str_bytes(r.name.clone())))
                    .with_error_code(code)
                    .with_error_message(message.map(str_bytes));
                if let (error_code::NONE, Some(t)) = (code, applied.state.topics.get(&r.name)) {
                    let configs = topic_entries(&ctx.config, &applied.state, &t.configs)
                        .into_iter()
                        .map(|e| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(e.name))
                                .with_value(Some(str_bytes(e.value)))
                                .with_config_source(e.source)
                        })
                        .collect();
                    result = result
                        .with_topic_id(uuid(&t.topic_id))
                        .with_num_partitions(t.partitions.len() as i32)
                        .with_replication_factor(t.replication_factor)
                        .with_configs(Some(configs));
                }
                result
            })
            .collect();
        Ok(Some(ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))))
    })
}
