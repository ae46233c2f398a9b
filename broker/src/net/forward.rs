//! Forwarding to the leader, for requests any broker must accept but only the leader can put
//! in the log: Metadata's topic auto-creation (Kafka brokers forward it to the controller the
//! same way) and InitProducerId (Java's idempotent producer has no coordinator to move to on
//! NOT_COORDINATOR), and the controller's requests (CreateTopics, DeleteTopics,
//! CreatePartitions, ACL, config and quota changes): Kafka 4.x brokers forward those to the
//! controller (KIP-590), so clients whose cached controller is a follower, as after a
//! failover, are served instead of refused with NOT_CONTROLLER. DescribeConfigs of
//! cluster-wide resources is asked of the leader too, so a describe through a follower sees a
//! change the leader has just answered.
//!
//! The request travels in an envelope over the Raft transport (`raft::transport::envelope`,
//! Kafka's Envelope of KIP-590), with the original principal, client address and listener, so
//! the leader authorizes the client and not the follower. The Raft connection is mutually
//! authenticated with the cluster secret: a Kafka client cannot pretend a request was
//! forwarded (before, any client could, by setting the client id `onelog-forward`). On the
//! leader the request is marked `forwarded` (`handlers::forwarded`), so it is never forwarded
//! again. Which APIs a follower forwards is declared on the registry (`Route::Leader`) and
//! done once, at dispatch (`pipeline`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use kafka_compat::codec::{decode_response, encode_request, Request};
use kafka_compat::principal::KafkaPrincipal;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, RequestKind, ResponseKind};
use onelog_state::BrokerState;

use crate::ctx::Ctx;
use crate::limits;
use crate::raft::transport::envelope::{self, Envelope};
use crate::security::authz::Subject;

const CREATE_TOPICS_VERSION: i16 = 5;

/// Client id of the request frames in an envelope (the principal travels beside it).
pub const FORWARDED_CLIENT_ID: &str = "onelog-forward";

/// Who sent a request, as the leader must see it: the principal the authorizer checks (test
/// principals of `fault-injection` builds already resolved), the client address and the
/// listener name.
#[derive(Debug, Clone)]
pub struct Origin {
    pub principal: Arc<KafkaPrincipal>,
    pub client_address: Option<IpAddr>,
    pub listener: Option<Arc<str>>,
}

impl Origin {
    pub fn of(req: &Request) -> Origin {
        let subject = Subject::of(req);
        Origin { principal: subject.principal, client_address: subject.host, listener: req.listener.clone() }
    }
}

/// A follower's answer to a request only the leader can serve: the leader's answer to the
/// same request, once this node's applied state shows what the leader says it changed
/// (`settled(response, state)`; at most the forward timeout), so a Metadata or Describe the
/// client sends here next sees the change. `None` when the leader cannot be asked: the caller
/// then answers as a follower (NOT_CONTROLLER, which clients retry).
pub async fn relay(
    ctx: &Ctx,
    origin: &Origin,
    api_key: ApiKey,
    version: i16,
    body: RequestKind,
    settled: impl Fn(&ResponseKind, &BrokerState) -> bool,
) -> Option<ResponseKind> {
    let response = match to_leader(ctx, origin, api_key, version, body).await {
        Ok(response) => response,
        Err(e) => {
            tracing::debug!(error = %format!("{e:#}"), ?api_key, "forwarding to the leader failed");
            return None;
        }
    };
    wait_applied(ctx, |state| settled(&response, state)).await;
    Some(response)
}

/// Waits until this node's applied state is `settled`, at most the forward timeout.
async fn wait_applied(ctx: &Ctx, settled: impl Fn(&BrokerState) -> bool) {
    let mut applied = ctx.applied.applied_index();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(limits::FORWARD_TIMEOUT_MS);
    while !ctx.applied.state(&settled) {
        if tokio::time::timeout_at(deadline, applied.changed()).await.is_err() {
            return;
        }
    }
}

/// Sends one request to the leader in an envelope and returns its response body.
pub async fn to_leader(
    ctx: &Ctx,
    origin: &Origin,
    api_key: ApiKey,
    version: i16,
    body: RequestKind,
) -> anyhow::Result<ResponseKind> {
    let leader = ctx.leader_id().context("no leader")?;
    anyhow::ensure!(leader != ctx.node_id, "this node is the leader");
    let raft_addr = ctx.raft_address(leader).context("the leader's Raft address is unknown")?;
    let frame = encode_request(api_key, version, 1, FORWARDED_CLIENT_ID, &body)?;
    let envelope = Envelope {
        from: ctx.node_id,
        principal_type: origin.principal.principal_type.clone(),
        principal_name: origin.principal.name.clone(),
        client_address: origin.client_address,
        listener: origin.listener.as_deref().map(str::to_string),
        // The frame without its size prefix, as the listener hands frames to the decoder.
        request: frame.slice(kafka_compat::frame::FRAME_PREFIX_BYTES..).to_vec(),
    };
    let ttl = Duration::from_millis(limits::FORWARD_TIMEOUT_MS);
    let response = envelope::send(&ctx.peers, leader, &raft_addr, &envelope, ttl).await?;
    anyhow::ensure!(
        response.len() <= limits::FORWARD_RESPONSE_BYTES_MAX,
        "the leader's answer is {} bytes, over {}",
        response.len(),
        limits::FORWARD_RESPONSE_BYTES_MAX
    );
    Ok(decode_response(api_key, version, Bytes::from(response))?.1)
}

/// Asks the leader to create `names` with broker defaults, then waits until this node has
/// applied them, so the caller's Metadata answer can describe them.
pub async fn create_topics_on_leader(ctx: &Ctx, origin: &Origin, names: &[String]) -> anyhow::Result<()> {
    let topics = names
        .iter()
        .map(|n| {
            CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(n.clone().into()))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })
        .collect();
    create_on_leader(ctx, origin, topics).await.map(drop)
}

/// Asks the leader to create `topics` as a CreateTopics request of `origin` would, then waits
/// until this node has applied those it created; the leader's answer.
pub async fn create_on_leader(
    ctx: &Ctx,
    origin: &Origin,
    topics: Vec<CreatableTopic>,
) -> anyhow::Result<ResponseKind> {
    let body =
        RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(5000));
    let response = to_leader(ctx, origin, ApiKey::CreateTopics, CREATE_TOPICS_VERSION, body).await?;
    wait_applied(ctx, |state| topics_created(&response, state)).await;
    Ok(response)
}

/// Whether every topic a CreateTopics response says was created is in `state`.
pub fn topics_created(response: &ResponseKind, state: &BrokerState) -> bool {
    let ResponseKind::CreateTopics(r) = response else { return true };
    r.topics.iter().filter(|t| t.error_code == 0).all(|t| state.topics.contains_key(t.name.0.as_str()))
}
