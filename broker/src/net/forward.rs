//! Forwarding to the leader over the Kafka protocol, for requests any broker must accept but
//! only the leader can put in the log: Metadata's topic auto-creation (Kafka brokers forward
//! it to the controller the same way) and InitProducerId (Java's idempotent producer has no
//! coordinator to move to on NOT_COORDINATOR), and the controller's requests (CreateTopics,
//! DeleteTopics, CreatePartitions, config and quota changes): Kafka 4.x brokers forward those
//! to the controller (KIP-590), so clients whose cached controller is a follower, as after a
//! failover, are served instead of refused with NOT_CONTROLLER. DescribeConfigs of cluster-wide
//! resources is asked of the leader too, so a describe through a follower sees a change the
//! leader has just answered.

use std::time::Duration;

use anyhow::Context;
use bytes::BytesMut;
use kafka_compat::codec::{decode_response, encode_request};
use kafka_compat::frame::{frame_body_len, FRAME_PREFIX_BYTES};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, RequestHeader, RequestKind, ResponseKind};
use onelog_state::BrokerState;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ctx::Ctx;
use crate::limits;

const CREATE_TOPICS_VERSION: i16 = 5;

/// Client id of forwarded requests: the leader never forwards one again.
pub const FORWARDED_CLIENT_ID: &str = "onelog-forward";

/// Whether a follower forwarded this request here: the leader never forwards it again.
pub fn is_forwarded(header: &RequestHeader) -> bool {
    header.client_id.as_ref().is_some_and(|c| c.as_str() == FORWARDED_CLIENT_ID)
}

/// A follower's answer to a request only the leader can serve: the leader's answer to the
/// same request, once this node's applied state shows what the leader says it changed
/// (`settled(response, state)`; at most the forward timeout), so a Metadata or Describe the
/// client sends here next sees the change. `None` when the leader cannot be asked: the caller
/// then answers as a follower (NOT_CONTROLLER, which clients retry).
pub async fn relay(
    ctx: &Ctx,
    api_key: ApiKey,
    version: i16,
    body: RequestKind,
    settled: impl Fn(&ResponseKind, &BrokerState) -> bool,
) -> Option<ResponseKind> {
    let response = match to_leader(ctx, api_key, version, body).await {
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

/// Sends one request to the leader's Kafka listener and returns its response body.
pub async fn to_leader(
    ctx: &Ctx,
    api_key: ApiKey,
    version: i16,
    body: RequestKind,
) -> anyhow::Result<ResponseKind> {
    let leader = ctx.leader_id().context("no leader")?;
    let broker = ctx
        .leadership
        .brokers()
        .into_iter()
        .find(|b| b.node_id as u64 == leader)
        .context("leader address unknown")?;
    let frame = encode_request(api_key, version, 1, FORWARDED_CLIENT_ID, &body)?;
    let exchange = async {
        let mut stream = TcpStream::connect((broker.host.as_str(), broker.port as u16)).await?;
        stream.write_all(&frame).await?;
        let mut prefix = [0u8; FRAME_PREFIX_BYTES];
        stream.read_exact(&mut prefix).await?;
        let len = frame_body_len(prefix, limits::FORWARD_RESPONSE_BYTES_MAX)?;
        let mut response = BytesMut::zeroed(len);
        stream.read_exact(&mut response).await?;
        anyhow::Ok(decode_response(api_key, version, response.freeze())?.1)
    };
    tokio::time::timeout(Duration::from_millis(limits::FORWARD_TIMEOUT_MS), exchange)
        .await
        .with_context(|| format!("forwarded {api_key:?} timed out"))?
}

/// Asks the leader to create `names` with broker defaults, then waits until this node has
/// applied them, so the caller's Metadata answer can describe them.
pub async fn create_topics_on_leader(ctx: &Ctx, names: &[String]) -> anyhow::Result<()> {
    let topics = names
        .iter()
        .map(|n| {
            CreatableTopic::default()
                .with_name(kafka_protocol::messages::TopicName(n.clone().into()))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })
        .collect();
    let body =
        RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(5000));
    let response = to_leader(ctx, ApiKey::CreateTopics, CREATE_TOPICS_VERSION, body).await?;
    wait_applied(ctx, |state| topics_created(&response, state)).await;
    Ok(())
}

/// Whether every topic a CreateTopics response says was created is in `state`.
pub fn topics_created(response: &ResponseKind, state: &BrokerState) -> bool {
    let ResponseKind::CreateTopics(r) = response else { return true };
    r.topics.iter().filter(|t| t.error_code == 0).all(|t| state.topics.contains_key(t.name.0.as_str()))
}
