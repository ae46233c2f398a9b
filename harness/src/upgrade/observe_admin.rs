//! The cluster-wide part of `observe`: consumer groups and their offsets, transactional ids,
//! SCRAM users, ACLs, client quotas and dynamic broker configs, each as one typed request on
//! the leader and its answer as lines (`manifest`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use kafka_compat::error_code;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    DescribeAclsRequest, DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest, GroupId,
    ListGroupsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use onelog_state::acls;

use super::manifest::{ClusterState, GroupState, FIXTURE_PREFIX};
use super::observe::describe_configs;
use crate::txn::describe_transactions;
use crate::RawClient;

/// DescribeConfigs' resource type of a broker (name "" for the cluster-wide default).
const RESOURCE_BROKER: i8 = 4;
/// Config sources of a dynamic broker config, per broker and cluster-wide (Kafka's
/// DescribeConfigsResponse.ConfigSource).
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
/// DescribeAcls filters: ANY resource, pattern, operation and permission.
const ACL_ANY: i8 = 1;

/// How long the coordinators may answer that they are not ready: a leader restarted in its
/// own term names itself serving before its coordinators have taken over.
const COORDINATOR_WAIT: Duration = Duration::from_secs(20);

/// Whether `code` says the coordinator is not ready here yet.
fn not_ready(code: i16) -> bool {
    [
        error_code::NOT_COORDINATOR,
        error_code::COORDINATOR_LOAD_IN_PROGRESS,
        error_code::COORDINATOR_NOT_AVAILABLE,
    ]
    .contains(&code)
}

/// Every `fx-` group ListGroups lists, with its committed offsets (OffsetFetch, all topics).
pub(super) async fn groups(client: &mut RawClient, state: &mut ClusterState) -> Result<()> {
    let version = client.version::<ListGroupsRequest>(4)?;
    let deadline = Instant::now() + COORDINATOR_WAIT;
    let listed = loop {
        let listed = client.request(version, &ListGroupsRequest::default()).await?;
        if !not_ready(listed.error_code) || Instant::now() > deadline {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ensure!(listed.error_code == 0, "ListGroups: {}", error_code::name(listed.error_code));
    for g in listed.groups.iter().filter(|g| g.group_id.0.starts_with(FIXTURE_PREFIX)) {
        let name = g.group_id.0.to_string();
        let group = GroupState {
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            offsets: offsets(client, &name).await?,
        };
        state.groups.insert(name, group);
    }
    Ok(())
}

/// OffsetFetch v7 of every topic of `group`: "topic/partition" → "offset[ metadata …]".
async fn offsets(client: &mut RawClient, group: &str) -> Result<BTreeMap<String, String>> {
    let version = client.version::<OffsetFetchRequest>(7)?;
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(None);
    let deadline = Instant::now() + COORDINATOR_WAIT;
    let response = loop {
        let response = client.request(version, &request).await?;
        if !not_ready(response.error_code) || Instant::now() > deadline {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ensure!(response.error_code == 0, "OffsetFetch {group}: {}", error_code::name(response.error_code));
    let mut out = BTreeMap::new();
    for t in &response.topics {
        for p in &t.partitions {
            ensure!(
                p.error_code == 0,
                "OffsetFetch {group} {}/{}: {}",
                t.name.0,
                p.partition_index,
                p.error_code
            );
            let metadata = p.metadata.as_ref().filter(|m| !m.is_empty());
            let value = match metadata {
                Some(m) => format!("{} metadata {m}", p.committed_offset),
                None => p.committed_offset.to_string(),
            };
            out.insert(format!("{}/{}", t.name.0, p.partition_index), value);
        }
    }
    Ok(out)
}

/// DescribeTransactions of `ids`: "STATE pid P epoch E timeout_ms T topics [..]" or the error.
pub(super) async fn transactions(
    client: &mut RawClient,
    ids: &[String],
    state: &mut ClusterState,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let deadline = Instant::now() + COORDINATOR_WAIT;
    let described = loop {
        let described = describe_transactions(client, &refs).await?;
        if !described.iter().any(|t| not_ready(t.error_code)) || Instant::now() > deadline {
            break described;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for t in described {
        let id = t.transactional_id.0.to_string();
        let line = if t.error_code != 0 {
            error_code::name(t.error_code)
        } else {
            let topics: Vec<String> = t
                .topics
                .iter()
                .flat_map(|d| d.partitions.iter().map(move |p| format!("{}/{p}", d.topic.0)))
                .collect();
            format!(
                "{} pid {} epoch {} timeout_ms {} topics [{}]",
                t.transaction_state,
                t.producer_id.0,
                t.producer_epoch,
                t.transaction_timeout_ms,
                topics.join(" ")
            )
        };
        state.transactions.insert(id, line);
    }
    Ok(())
}

/// SCRAM users, ACL bindings and client quotas.
pub(super) async fn security(client: &mut RawClient, state: &mut ClusterState) -> Result<()> {
    let version = client.version::<DescribeUserScramCredentialsRequest>(0)?;
    let users =
        client.request(version, &DescribeUserScramCredentialsRequest::default().with_users(None)).await?;
    ensure!(users.error_code == 0, "DescribeUserScramCredentials: {}", error_code::name(users.error_code));
    for r in &users.results {
        ensure!(
            r.error_code == 0,
            "DescribeUserScramCredentials {}: {}",
            r.user,
            error_code::name(r.error_code)
        );
        let mut lines: Vec<String> = r
            .credential_infos
            .iter()
            .map(|c| format!("{} iterations {}", mechanism(c.mechanism), c.iterations))
            .collect();
        lines.sort();
        state.scram_users.insert(r.user.to_string(), lines);
    }
    state.acls = acls(client).await?;
    state.quotas = quotas(client).await?;
    Ok(())
}

fn mechanism(code: i8) -> String {
    match code {
        1 => "SCRAM-SHA-256".to_string(),
        2 => "SCRAM-SHA-512".to_string(),
        other => format!("mechanism-{other}"),
    }
}

/// Every ACL binding: "RESOURCE name PATTERN principal host OPERATION PERMISSION", sorted.
async fn acls(client: &mut RawClient) -> Result<Vec<String>> {
    let version = client.version::<DescribeAclsRequest>(3)?;
    // kafka-protocol's defaults for the name filters are Some(""), which match nothing.
    let request = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ACL_ANY)
        .with_pattern_type_filter(ACL_ANY)
        .with_operation(ACL_ANY)
        .with_permission_type(ACL_ANY);
    let response = client.request(version, &request).await?;
    ensure!(response.error_code == 0, "DescribeAcls: {}", error_code::name(response.error_code));
    let mut out = Vec::new();
    for r in &response.resources {
        for a in &r.acls {
            out.push(format!(
                "{} {} {} {} {} {} {}",
                acls::resource_type_name(r.resource_type),
                r.resource_name,
                acls::pattern_type_name(r.pattern_type),
                a.principal,
                a.host,
                acls::operation_name(a.operation),
                acls::permission_name(a.permission_type),
            ));
        }
    }
    out.sort();
    Ok(out)
}

/// Every client quota: "type=name,type=name key=value", sorted (a default entity is
/// "type=<default>").
async fn quotas(client: &mut RawClient) -> Result<Vec<String>> {
    let version = client.version::<DescribeClientQuotasRequest>(1)?;
    let request = DescribeClientQuotasRequest::default().with_components(Vec::new()).with_strict(false);
    let response = client.request(version, &request).await?;
    ensure!(response.error_code == 0, "DescribeClientQuotas: {}", error_code::name(response.error_code));
    let mut out = Vec::new();
    for entry in response.entries.unwrap_or_default() {
        let mut entity: Vec<String> = entry
            .entity
            .iter()
            .map(|e| format!("{}={}", e.entity_type, e.entity_name.as_deref().unwrap_or("<default>")))
            .collect();
        entity.sort();
        for v in &entry.values {
            out.push(format!("{} {}={}", entity.join(","), v.key, v.value));
        }
    }
    out.sort();
    Ok(out)
}

/// Dynamic broker configs of the cluster default ("", asked of the lowest node) and of each
/// broker (asked of that broker, as Kafka requires): "key=value (source)".
pub(super) async fn broker_configs(
    nodes: &BTreeMap<u64, SocketAddr>,
    state: &mut ClusterState,
) -> Result<()> {
    let first = nodes.values().next().context("no node")?;
    let mut resources = vec![(String::new(), *first)];
    resources.extend(nodes.iter().map(|(id, addr)| (id.to_string(), *addr)));
    for (name, addr) in resources {
        let mut client = RawClient::connect_negotiated(addr).await?;
        let client = &mut client;
        let resource = DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_BROKER)
            .with_resource_name(StrBytes::from_string(name.clone()));
        let configs = describe_configs(client, resource).await.with_context(|| format!("broker {name:?}"))?;
        let lines = configs
            .into_iter()
            .filter(|(_, _, source)| matches!(*source, SOURCE_DYNAMIC_BROKER | SOURCE_DYNAMIC_DEFAULT_BROKER))
            .map(|(k, v, source)| {
                let source = if source == SOURCE_DYNAMIC_BROKER { "broker" } else { "cluster default" };
                format!("{k}={v} ({source})")
            })
            .collect();
        state.broker_configs.insert(name, lines);
    }
    Ok(())
}
