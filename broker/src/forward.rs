//! Forwarding to the leader over the Kafka protocol, for requests any broker must accept but
//! only the leader can put in the log: Metadata's topic auto-creation (Kafka brokers forward
//! it to the controller the same way).

use std::time::Duration;

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_compat::codec::{decode_response, encode_request};
use kafka_compat::frame::{frame_body_len, FRAME_PREFIX_BYTES};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, RequestKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::ctx::Ctx;
use crate::limits;

const CREATE_TOPICS_VERSION: i16 = 5;

/// Asks the leader to create `names` with broker defaults, then waits until this node has
/// applied them, so the caller's Metadata answer can describe them.
pub async fn create_topics_on_leader(ctx: &Ctx, names: &[String]) -> anyhow::Result<()> {
    let leader = ctx.leader_id().context("no leader")?;
    let broker =
        ctx.brokers().into_iter().find(|b| b.node_id as u64 == leader).context("leader address unknown")?;
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
    let frame = encode_request(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, 1, "onelog-forward", &body)?;
    let timeout = Duration::from_millis(limits::FORWARD_TIMEOUT_MS);
    tokio::time::timeout(timeout, round_trip(&format!("{}:{}", broker.host, broker.port), frame))
        .await
        .context("forwarded CreateTopics timed out")??;
    let mut applied = ctx.sm.applied_index.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let known = {
            let state = ctx.sm.applied.read().expect("applied lock");
            names.iter().all(|n| state.state.topics.contains_key(n))
        };
        if known || tokio::time::timeout_at(deadline, applied.changed()).await.is_err() {
            return Ok(());
        }
    }
}

async fn round_trip(addr: &str, frame: Bytes) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(&frame).await?;
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    stream.read_exact(&mut prefix).await?;
    let len = frame_body_len(prefix, limits::FORWARD_RESPONSE_BYTES_MAX)?;
    let mut body = BytesMut::zeroed(len);
    stream.read_exact(&mut body).await?;
    decode_response(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, body.freeze())?;
    Ok(())
}
