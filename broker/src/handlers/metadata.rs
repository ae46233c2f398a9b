//! Metadata (key 3): brokers, controller, topics with ids, partitions and their leader.
//!
//! Every partition's leader is the Raft leader and its leader epoch the Raft term; replicas
//! are the voters (or those an explicit CreatePartitions assignment named), ISR those of them
//! whose replication is current. Unknown topics are created here when `auto.create.topics.enable`
//! is on and the client allows it (v4+), as Kafka does. `__consumer_offsets` is listed as
//! internal (`internal_topic`). With an authorizer, DESCRIBE on each topic as Kafka checks it
//! (`restrict`), and CREATE on the cluster or topic for auto-creation. Authorized operations
//! (v8+, when asked): the topic's, and in v8–v10 the cluster's (see `authorized`).

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_compat::topic_name::topic_name_problem;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, MetadataResponse, RequestKind, ResponseKind};

use super::partition_leaders::{PartitionLeader, PartitionLeaders};
use super::util::{str_bytes, topic_name, uuid, uuid_bytes};
use super::{authorized, HandlerResult};
use crate::controller::{self, TopicRequest};
use crate::ctx::SharedCtx;
use crate::internal_topic;
use crate::net::forward;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::Metadata;
pub const VERSIONS: (i16, i16) = (0, 12);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let origin = forward::Origin::of(&req);
    let RequestKind::Metadata(body) = req.body else { anyhow::bail!("not a Metadata body") };
    let version = req.api_version;
    // v0: an empty list means all topics; v1+: null means all topics.
    let requested: Option<Vec<(Option<String>, [u8; 16])>> = match body.topics {
        Some(t) if version == 0 && t.is_empty() => None,
        Some(t) => {
            Some(t.into_iter().map(|t| (t.name.map(|n| n.0.to_string()), uuid_bytes(&t.topic_id))).collect())
        }
        None => None,
    };
    let auto_create =
        (version < 4 || body.allow_auto_topic_creation) && ctx.config.settings.auto_create_topics;
    // Kafka: auto-creation needs CREATE on the cluster or on the topic (and DESCRIBE on it).
    let creatable = |name: &str| {
        ctx.authorizer.allowed(&who, rt::TOPIC, name, op::DESCRIBE)
            && (ctx.authorizer.cluster_allowed(&who, op::CREATE)
                || ctx.authorizer.allowed(&who, rt::TOPIC, name, op::CREATE))
    };
    if let (true, Some(requested)) = (auto_create, &requested) {
        let allowed: Vec<_> =
            requested.iter().filter(|(name, _)| name.as_deref().is_some_and(creatable)).cloned().collect();
        create_missing(&ctx, &origin, &allowed).await;
    }
    let all_topics = requested.is_none();
    let mut topics = topics(&ctx, requested);
    restrict(&ctx, &who, &mut topics, all_topics, auto_create.then_some(&creatable));
    if body.include_topic_authorized_operations {
        for t in &mut topics {
            if t.error_code == error_code::NONE {
                let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                t.topic_authorized_operations = authorized::topic(&ctx, &who, true, &name);
            }
        }
    }
    let mut response = MetadataResponse::default()
        .with_brokers(brokers(&ctx, req.listener.as_deref()))
        .with_cluster_id(Some(str_bytes(ctx.leadership.cluster_id())))
        .with_controller_id(ctx.leader_id().map_or(-1, |l| l as i32).into())
        .with_topics(topics);
    // KIP-430: cluster operations exist in v8-v10 only (v11 moved them to DescribeCluster).
    if (8..=10).contains(&version) {
        response = response.with_cluster_authorized_operations(authorized::cluster(
            &ctx,
            &who,
            body.include_cluster_authorized_operations,
        ));
    }
    Ok(Some(ResponseKind::Metadata(response)))
}

/// Kafka's DESCRIBE check on each topic: a request for all topics leaves out those the
/// principal may not describe; a named one gets TOPIC_AUTHORIZATION_FAILED (and nothing that
/// says whether it exists), as does a missing one it could describe but not create.
fn restrict(
    ctx: &SharedCtx,
    who: &Subject,
    topics: &mut Vec<MetadataResponseTopic>,
    all_topics: bool,
    creatable: Option<&dyn Fn(&str) -> bool>,
) {
    if !ctx.authorizer.enabled() {
        return;
    }
    let names: Vec<String> =
        topics.iter().map(|t| t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()).collect();
    let allowed = ctx.authorizer.allowed_each(who, rt::TOPIC, names.iter().map(String::as_str), op::DESCRIBE);
    if all_topics {
        let mut keep = allowed.into_iter();
        topics.retain(|_| keep.next().unwrap_or(false));
        return;
    }
    for ((topic, allowed), name) in topics.iter_mut().zip(allowed).zip(&names) {
        let missing = topic.error_code == error_code::UNKNOWN_TOPIC_OR_PARTITION;
        let uncreatable = missing && creatable.is_some_and(|may_create| !may_create(name));
        if !allowed || uncreatable {
            let name = topic.name.take();
            *topic = MetadataResponseTopic::default()
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                .with_name(name)
                .with_topic_authorized_operations(authorized::OMITTED);
        }
    }
}

async fn create_missing(ctx: &SharedCtx, origin: &forward::Origin, requested: &[(Option<String>, [u8; 16])]) {
    let missing: Vec<TopicRequest> = {
        ctx.applied.read(|applied| {
            requested
                .iter()
                .filter_map(|(name, _)| name.clone())
                .filter(|n| !applied.state.topics.contains_key(n) && topic_name_problem(n).is_none())
                .filter(|n| !internal_topic::is_internal(n))
                .map(|name| TopicRequest {
                    name,
                    partitions: -1,
                    replication_factor: -1,
                    configs: BTreeMap::new(),
                    assignments: Vec::new(),
                })
                .collect()
        })
    };
    if missing.is_empty() {
        return;
    }
    let names: Vec<String> = missing.iter().map(|t| t.name.clone()).collect();
    if ctx.may_propose() {
        let results = controller::create_topics(ctx, &missing, false).await;
        tracing::info!(topics = ?names, ?results, "auto-created topics");
    } else if let Err(e) = crate::net::forward::create_topics_on_leader(ctx, origin, &names).await {
        tracing::warn!(topics = ?names, error = %format!("{e:#}"), "could not forward topic auto-creation to the leader");
    }
}

/// The brokers' addresses on the listener the request came in on.
fn brokers(ctx: &SharedCtx, listener: Option<&str>) -> Vec<MetadataResponseBroker> {
    ctx.leadership
        .brokers_on(listener)
        .into_iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(b.node_id.into())
                .with_host(str_bytes(b.host))
                .with_port(b.port)
        })
        .collect()
}

fn topics(ctx: &SharedCtx, requested: Option<Vec<(Option<String>, [u8; 16])>>) -> Vec<MetadataResponseTopic> {
    let operations = authorized::OMITTED;
    let leaders = PartitionLeaders::of(ctx);
    ctx.applied.read(|applied| {
        let state = &applied.state;
        let partition = |p: i32, replicas: &[i32], by: &PartitionLeader| {
            let isr = by.in_sync.iter().filter(|v| replicas.contains(v));
            MetadataResponsePartition::default()
                .with_error_code(by.error_code())
                .with_partition_index(p)
                .with_leader_id(by.leader.into())
                .with_leader_epoch(by.epoch)
                .with_replica_nodes(replicas.iter().map(|v| (*v).into()).collect())
                .with_isr_nodes(isr.map(|v| (*v).into()).collect())
        };
        let describe = |name: &str, t: &onelog_state::Topic| {
            let by = leaders.of_topic(&t.configs);
            let partitions = (0..t.partitions.len() as i32)
                .zip(&t.partitions)
                .map(|(p, ps)| {
                    partition(p, if ps.replicas.is_empty() { &by.voters } else { &ps.replicas }, by)
                })
                .collect();
            MetadataResponseTopic::default()
                .with_name(Some(topic_name(name)))
                .with_topic_id(uuid(&t.topic_id))
                .with_partitions(partitions)
                .with_topic_authorized_operations(operations)
        };
        let group0 = leaders.group(0);
        let internal = || {
            MetadataResponseTopic::default()
                .with_name(Some(topic_name(internal_topic::NAME)))
                .with_topic_id(uuid(&internal_topic::TOPIC_ID))
                .with_is_internal(true)
                .with_partitions(
                    (0..internal_topic::PARTITIONS).map(|p| partition(p, &group0.voters, group0)).collect(),
                )
                .with_topic_authorized_operations(operations)
        };
        let shadowed = state.topics.contains_key(internal_topic::NAME);
        match requested {
            None => {
                let mut all: Vec<_> = state.topics.iter().map(|(n, t)| describe(n, t)).collect();
                if !shadowed {
                    all.push(internal());
                }
                all
            }
            Some(list) => list
                .into_iter()
                .map(|(name, id)| {
                    let found = match &name {
                        Some(n) => state.topics.get_key_value(n.as_str()),
                        None => state.topic_by_id(&id),
                    };
                    let is_internal = match &name {
                        Some(n) => internal_topic::is_internal(n),
                        None => internal_topic::is_internal_id(&id),
                    };
                    match found {
                        Some((n, t)) => describe(n, t),
                        None if is_internal => internal(),
                        None => unknown(name, id),
                    }
                })
                .collect(),
        }
    })
}

fn unknown(name: Option<String>, id: [u8; 16]) -> MetadataResponseTopic {
    let code = match &name {
        Some(n) if topic_name_problem(n).is_some() => error_code::INVALID_TOPIC_EXCEPTION,
        Some(_) => error_code::UNKNOWN_TOPIC_OR_PARTITION,
        None => error_code::UNKNOWN_TOPIC_ID,
    };
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(topic_name))
        .with_topic_id(uuid(&id))
}
