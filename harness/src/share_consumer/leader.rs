//! Where a share group is served, as a Kafka share consumer finds it: its records at the
//! leader of the topic's partitions (one Raft group's leader leads a topic's every partition),
//! from any node's Metadata; its membership at the group's coordinator, from FindCoordinator,
//! which with several Raft groups may be another node. A follower may still name the old
//! leader after an election; the caller then meets NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR
//! and asks again.
//!
//! Also the two admin calls a share-group run needs beside the consumer: the group's configs
//! (IncrementalAlterConfigs on resource type GROUP) and its lag (DescribeShareGroupOffsets).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, FindCoordinatorRequest, GroupId, IncrementalAlterConfigsRequest,
    MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::raw_client::RawClient;

/// Bounds one connection attempt, and one metadata or admin request: a node behind a
/// black-holed link never answers.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);
/// ConfigResource type GROUP (KIP-848's group configs; share groups' `share.*` live there).
const RESOURCE_GROUP: i8 = 32;
const OP_SET: i8 = 0;

/// The leader a node named, with the topic's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    pub node_id: i32,
    pub addr: SocketAddr,
    pub topic_id: Uuid,
    pub partitions: i32,
}

/// Spreads the first node asked across calls, so a dead node is not always tried first.
static NEXT_NODE: AtomicUsize = AtomicUsize::new(0);

/// Asks the bootstrap nodes in turn until one names a leader of `topic`.
pub async fn find_leader(bootstrap: &[SocketAddr], topic: &str) -> Result<Leader> {
    in_turn(bootstrap, "metadata", |addr| ask(addr, topic)).await
}

/// Asks the bootstrap nodes in turn, the first one spread across calls, until one answers.
async fn in_turn<T, F, Fut>(bootstrap: &[SocketAddr], what: &str, ask: F) -> Result<T>
where
    F: Fn(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    anyhow::ensure!(!bootstrap.is_empty(), "no bootstrap address");
    let first = NEXT_NODE.fetch_add(1, Ordering::Relaxed);
    let mut last_error = anyhow!("no node answered");
    for i in 0..bootstrap.len() {
        let addr = bootstrap[(first + i) % bootstrap.len()];
        match ask(addr).await {
            Ok(found) => return Ok(found),
            Err(e) => last_error = e.context(format!("{what} from {addr}")),
        }
    }
    Err(last_error)
}

/// A negotiated connection to the leader `find_leader` names, and that leader.
pub async fn connect_leader(bootstrap: &[SocketAddr], topic: &str) -> Result<(RawClient, Leader)> {
    let leader = find_leader(bootstrap, topic).await?;
    Ok((connect(leader.addr).await?, leader))
}

/// A negotiated connection to the coordinator of share group `group`, and the leader of
/// `topic` (for its id).
pub async fn connect_coordinator(
    bootstrap: &[SocketAddr],
    topic: &str,
    group: &str,
) -> Result<(RawClient, Leader)> {
    let leader = find_leader(bootstrap, topic).await?;
    let coordinator = find_coordinator(bootstrap, group).await?;
    Ok((connect(coordinator).await?, leader))
}

/// Asks the bootstrap nodes in turn for the coordinator of `group` (FindCoordinator v4, key
/// type GROUP, as KIP-932's consumer asks).
pub async fn find_coordinator(bootstrap: &[SocketAddr], group: &str) -> Result<SocketAddr> {
    in_turn(bootstrap, "FindCoordinator", |addr| ask_coordinator(addr, group)).await
}

async fn ask_coordinator(addr: SocketAddr, group: &str) -> Result<SocketAddr> {
    let mut client = connect(addr).await?;
    let request = FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(vec![text(group)]);
    let answer = timed(client.request(4, &request)).await?;
    let c = answer.coordinators.first().context("no coordinator in the answer")?;
    anyhow::ensure!(c.error_code == 0, "group {group}: error {}", c.error_code);
    format!("{}:{}", c.host, c.port).parse().context("the coordinator's address")
}

/// A negotiated connection to `addr`, within [`DISCOVERY_TIMEOUT`].
pub async fn connect(addr: SocketAddr) -> Result<RawClient> {
    tokio::time::timeout(DISCOVERY_TIMEOUT, RawClient::connect_negotiated(addr))
        .await
        .map_err(|_| anyhow!("connecting to {addr}: no answer in {DISCOVERY_TIMEOUT:?}"))?
}

async fn ask(addr: SocketAddr, topic: &str) -> Result<Leader> {
    let mut client = connect(addr).await?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(TopicName(text(topic))))]));
    let version = client.version::<MetadataRequest>(12)?;
    let answer = timed(client.request(version, &request)).await?;
    let t = answer.topics.first().context("no topic in the metadata")?;
    anyhow::ensure!(t.error_code == 0, "topic {topic}: error {}", t.error_code);
    let leader_id =
        t.partitions.iter().find(|p| p.partition_index == 0).context("no partition 0")?.leader_id.0;
    let broker = answer.brokers.iter().find(|b| b.node_id.0 == leader_id).context("no leader known")?;
    let addr = format!("{}:{}", broker.host, broker.port).parse().context("the leader's address")?;
    Ok(Leader { node_id: leader_id, addr, topic_id: t.topic_id, partitions: t.partitions.len() as i32 })
}

/// Sets `configs` on share group `group` (IncrementalAlterConfigs, resource type GROUP),
/// through the leader.
pub async fn set_group_configs(
    bootstrap: &[SocketAddr],
    topic: &str,
    group: &str,
    configs: &[(&str, &str)],
) -> Result<()> {
    let (mut client, _) = connect_leader(bootstrap, topic).await?;
    let configs = configs
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(text(name))
                .with_config_operation(OP_SET)
                .with_value(Some(text(value)))
        })
        .collect();
    let resource = AlterConfigsResource::default()
        .with_resource_type(RESOURCE_GROUP)
        .with_resource_name(text(group))
        .with_configs(configs);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let answer = timed(client.request(1, &request)).await?;
    for r in &answer.responses {
        if r.error_code != 0 {
            bail!("IncrementalAlterConfigs of group {group}: error {} {:?}", r.error_code, r.error_message);
        }
    }
    Ok(())
}

/// Each partition's share-partition start offset and lag (DescribeShareGroupOffsets v1,
/// KIP-1226), asked of the group's coordinator: records neither acknowledged nor archived.
/// Partition → (start offset, lag).
pub async fn share_lag(
    bootstrap: &[SocketAddr],
    topic: &str,
    group: &str,
) -> Result<BTreeMap<i32, (i64, i64)>> {
    let (mut client, leader) = connect_coordinator(bootstrap, topic, group).await?;
    let partitions = (0..leader.partitions).collect();
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default().with_group_id(GroupId(text(group))).with_topics(
            Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(topic)))
                .with_partitions(partitions)]),
        ),
    ]);
    let answer = timed(client.request(1, &request)).await?;
    let g = answer.groups.first().context("no group in the answer")?;
    anyhow::ensure!(g.error_code == 0, "DescribeShareGroupOffsets: error {}", g.error_code);
    let mut out = BTreeMap::new();
    for p in g.topics.iter().flat_map(|t| &t.partitions) {
        anyhow::ensure!(p.error_code == 0, "partition {}: error {}", p.partition_index, p.error_code);
        out.insert(p.partition_index, (p.start_offset, p.lag));
    }
    Ok(out)
}

async fn timed<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(DISCOVERY_TIMEOUT, f)
        .await
        .map_err(|_| anyhow!("no answer in {DISCOVERY_TIMEOUT:?}"))?
}

pub(super) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}
