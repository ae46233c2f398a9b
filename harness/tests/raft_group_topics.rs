//! Topics placed in Raft groups (issue 32), on three nodes running three groups, each led by
//! its preferred leader (group g by node g + 1), with librdkafka clients:
//!
//! 1. placement is decided at creation and shown by DescribeConfigs: `onelog.raft.group` pins a
//!    topic, topics sharing an `onelog.placement.key` land together, a `topic:` rule of
//!    `onelog.placement.rules` places a topic created without configs; a group that does not
//!    exist is refused INVALID_CONFIG naming it, and so is any later change of the placement;
//! 2. Metadata names each partition's leader as the leader of its topic's group;
//! 3. a topic's records are written through its group's log only: on every node its group's
//!    partition files grow (the batches stay in the group's Raft log, the partition index
//!    points into it), the other groups' partition files do not change, and every acknowledged
//!    record is read back exactly once;
//! 4. the leader of group 1 is killed: writes to group 1's topic carry on through the new
//!    leader, and groups 0 and 2 keep theirs;
//! 5. a deleted topic leaves its group (transactions across groups:
//!    `raft_group_cross_txns.rs`);
//! 6. on five nodes, a node that is not a voter of a group names that group's leader in its
//!    Metadata (learnt from the group's voters) from its first answer on, also after the
//!    leader is killed.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use harness::cluster::ClusterOptions;
use harness::kafka::{client_config, read_partitions};
use harness::raft_groups::{digests_agree, group_row, preferred_of_three, settle, RULED_PREFIX};
use harness::Cluster;
use harness::RawClient;
use kafka_compat::error_code::INVALID_CONFIG;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::IncrementalAlterConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};

const GROUPS: u64 = 3;
const PARTITIONS: i32 = 2;
/// Records per write step, of `VALUE_BYTES` each.
const RECORDS: usize = 1_000;
const VALUE_BYTES: usize = 1_024;
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topics_live_in_the_raft_group_they_are_placed_in() {
    let mut cluster = harness::raft_groups::start_three_groups().expect("starting 3 nodes with 3 groups");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    let admin: AdminClient<DefaultClientContext> = client_config(&cluster.bootstrap()).create()?;
    placement_decided_at_creation(&admin, cluster.kafka_addr(1)).await?;
    leaders_are_the_groups(cluster).await?;
    for g in 0..GROUPS {
        writes_go_through_their_group(cluster, g, 0).await?;
    }
    leader_of_group_1_killed(cluster).await?;
    deleted_topic_leaves_its_group(cluster, &admin).await
}

fn placed(g: u64) -> String {
    format!("placed-{g}")
}

fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)))
}

/// Creates `name` with `configs`; the error code if refused.
async fn create(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    configs: &[(&str, &str)],
) -> Result<Option<RDKafkaErrorCode>> {
    let mut topic = NewTopic::new(name, PARTITIONS, TopicReplication::Fixed(-1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = admin.create_topics(&[topic], &admin_options()).await?;
    Ok(results.into_iter().next().context("one result")?.err().map(|(_, code)| code))
}

/// The topic's `onelog.raft.group`, as DescribeConfigs shows it.
async fn described_group(admin: &AdminClient<DefaultClientContext>, name: &str) -> Result<String> {
    let described = admin.describe_configs(&[ResourceSpecifier::Topic(name)], &admin_options()).await?;
    let resource =
        described.into_iter().next().context("one resource")?.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let entry =
        resource.get("onelog.raft.group").with_context(|| format!("{name} shows no onelog.raft.group"))?;
    ensure!(entry.is_read_only, "{name}'s onelog.raft.group is not read-only: {entry:?}");
    entry.value.clone().context("a value")
}

/// IncrementalAlterConfigs (as `kafka-configs.sh --alter` sends it) setting the topic's
/// `onelog.raft.group`: its error code and message (librdkafka's AlterConfigs result drops them).
async fn move_topic(
    bootstrap: std::net::SocketAddr,
    topic: &str,
    group: &str,
) -> Result<(i16, Option<String>)> {
    let mut client = RawClient::connect(bootstrap).await?;
    let config = AlterableConfig::default()
        .with_name(StrBytes::from_static_str("onelog.raft.group"))
        .with_config_operation(0)
        .with_value(Some(StrBytes::from_string(group.into())));
    let resource = AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configs(vec![config]);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let response = client.request(1, &request).await?;
    let result = response.responses.first().context("one result")?;
    Ok((result.error_code, result.error_message.as_ref().map(|m| m.to_string())))
}

async fn placement_decided_at_creation(
    admin: &AdminClient<DefaultClientContext>,
    bootstrap: std::net::SocketAddr,
) -> Result<()> {
    for g in 0..GROUPS {
        let group = g.to_string();
        ensure!(
            create(admin, &placed(g), &[("onelog.raft.group", &group)]).await?.is_none(),
            "creating {}",
            placed(g)
        );
        ensure!(described_group(admin, &placed(g)).await? == group, "{} not in group {g}", placed(g));
    }
    for name in ["app-in", "app-out"] {
        ensure!(create(admin, name, &[("onelog.placement.key", "app")]).await?.is_none(), "creating {name}");
    }
    let (input, output) = (described_group(admin, "app-in").await?, described_group(admin, "app-out").await?);
    ensure!(input == output, "one placement key, two groups: {input} and {output}");
    let ruled = format!("{RULED_PREFIX}in");
    ensure!(create(admin, &ruled, &[]).await?.is_none(), "creating {ruled}");
    ensure!(described_group(admin, &ruled).await? == "2", "{ruled} not placed by the topic: rule");
    let refused = create(admin, "nowhere", &[("onelog.raft.group", "3")]).await?;
    ensure!(refused == Some(RDKafkaErrorCode::InvalidConfig), "a topic in group 3 of 3: {refused:?}");
    let refusal = move_topic(bootstrap, "placed-1", "2").await?;
    ensure!(refusal.0 == INVALID_CONFIG, "moving placed-1 to group 2: {refusal:?}");
    ensure!(described_group(admin, "placed-1").await? == "1", "placed-1 moved");
    println!(
        "placement: placed-g in group g, app-in and app-out together in group {input}, {ruled} in group 2 by \
         rule; group 3 and a move refused"
    );
    Ok(())
}

/// Metadata from each node: every partition of placed-g is led by group g's leader.
async fn leaders_are_the_groups(cluster: &mut Cluster) -> Result<()> {
    for id in cluster.ids() {
        let consumer: BaseConsumer = client_config(&cluster.kafka_addr(id).to_string()).create()?;
        let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
        for g in 0..GROUPS {
            let leader = group_row(cluster, id, g)?["leader"].as_i64().context("a leader")?;
            let topic = metadata.topics().iter().find(|t| t.name() == placed(g)).context("placed topic")?;
            let leaders: Vec<i32> = topic.partitions().iter().map(|p| p.leader()).collect();
            ensure!(
                leaders.iter().all(|l| i64::from(*l) == leader),
                "node {id}: {} led by {leaders:?}, group {g} by {leader}",
                placed(g)
            );
        }
    }
    println!("metadata on every node: placed-g's partitions led by group g's leader (node g + 1)");
    Ok(())
}

/// Bytes in the partition files of group `g` on node `id`: under `state/` for group 0,
/// `groups/<g>/state/` for the others, in each checkpoint generation's `partitions/`.
fn partition_bytes(cluster: &Cluster, id: u64, g: u64) -> Result<u64> {
    let root = match g {
        0 => cluster.data_dir(id).join("state"),
        g => cluster.data_dir(id).join("groups").join(g.to_string()).join("state"),
    };
    dir_bytes(&root, false)
}

/// Bytes of the files under `dir` that lie in a `partitions` directory.
fn dir_bytes(dir: &Path, in_partitions: bool) -> Result<u64> {
    if !dir.exists() {
        return Ok(0);
    }
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path(), in_partitions || entry.file_name() == "partitions")?
        } else if in_partitions {
            meta.len()
        } else {
            0
        };
    }
    Ok(total)
}

/// Produces `RECORDS` values numbered from `first` to placed-g; its group's partition files
/// grow on every live node, the other groups' do not change; read back exactly once.
async fn writes_go_through_their_group(cluster: &mut Cluster, g: u64, first: usize) -> Result<()> {
    let ids = cluster.live_ids();
    let before: Vec<Vec<u64>> = ids
        .iter()
        .map(|id| (0..GROUPS).map(|h| partition_bytes(cluster, *id, h)).collect())
        .collect::<Result<_>>()?;
    let started = Instant::now();
    produce(&cluster.live_bootstrap(), &placed(g), first..first + RECORDS).await?;
    let took = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let after: Vec<Vec<u64>> = ids
            .iter()
            .map(|id| (0..GROUPS).map(|h| partition_bytes(cluster, *id, h)).collect())
            .collect::<Result<_>>()?;
        let grown = |n: usize, h: usize| after[n][h].saturating_sub(before[n][h]);
        let here = (0..ids.len()).all(|n| grown(n, g as usize) > 0);
        let elsewhere: Vec<u64> = (0..ids.len())
            .flat_map(|n| (0..GROUPS as usize).filter(move |h| *h != g as usize).map(move |h| (n, h)))
            .map(|(n, h)| grown(n, h))
            .collect();
        ensure!(
            elsewhere.iter().all(|b| *b == 0),
            "{}: other groups' partitions grew {elsewhere:?} bytes",
            placed(g)
        );
        if here {
            println!(
                "{} records to {} in {:.1} s, through group {g}'s log only",
                RECORDS,
                placed(g),
                took.as_secs_f64()
            );
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{}: group {g}'s partitions grew only {:?} bytes",
            placed(g),
            (0..ids.len()).map(|n| grown(n, g as usize)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    read_back(cluster, g, first + RECORDS)?;
    let records = digests_agree(cluster, &ids, g, Duration::from_secs(30)).await?;
    println!("group {g}'s digest is the same on nodes {ids:?} ({records} records in its partitions)");
    metrics_show_the_groups_copy(cluster, &ids, g, first + RECORDS)
}

/// Every node's `/metrics` shows the topic's partitions once each, as its group holds them:
/// `written` records in all, and bytes (not group 0's empty copy). Regression: /metrics read
/// group 0 only, and showed 0 for every topic placed in another group.
fn metrics_show_the_groups_copy(cluster: &Cluster, ids: &[u64], g: u64, written: usize) -> Result<()> {
    let topic = placed(g);
    for id in ids {
        let scrape = harness::scrape::Scrape::of(cluster.admin_addr(*id))?;
        let labels = [("topic", topic.as_str())];
        let series = scrape.matching("onelog_partition_log_end_offset", &labels).count();
        let end = scrape.sum("onelog_partition_log_end_offset", &labels);
        let bytes = scrape.sum("onelog_partition_size_bytes", &labels);
        ensure!(
            series == PARTITIONS as usize && end == written as f64 && bytes > 0.0,
            "node {id}'s /metrics for {topic}: {series} partitions, log end {end} (written {written}), {bytes} bytes"
        );
    }
    Ok(())
}

/// Idempotent, acks=all; each value `VALUE_BYTES` long and keyed by its number.
async fn produce(bootstrap: &str, topic: &str, numbers: std::ops::Range<usize>) -> Result<()> {
    let producer: FutureProducer = client_config(bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()?;
    let mut pending = Vec::new();
    for n in numbers {
        let key = n.to_string();
        let value = format!("{key:0>width$}", width = VALUE_BYTES);
        let record = FutureRecord::to(topic).key(&key).payload(&value);
        pending.push(producer.send_result(record).map_err(|(e, _)| e)?);
    }
    for delivery in pending {
        delivery.await?.map_err(|(e, _)| e).with_context(|| format!("producing to {topic}"))?;
    }
    Ok(())
}

/// Every number below `count` in placed-g exactly once.
fn read_back(cluster: &mut Cluster, g: u64, count: usize) -> Result<()> {
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| (placed(g), p)).collect();
    let records = read_partitions(&cluster.live_bootstrap(), &partitions, READ_TIMEOUT)?;
    let mut keys: Vec<usize> = records
        .values()
        .flatten()
        .map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).parse::<usize>())
        .collect::<std::result::Result<_, _>>()?;
    keys.sort_unstable();
    ensure!(
        keys == (0..count).collect::<Vec<_>>(),
        "{}: read {} records, wanted 0..{count} once each",
        placed(g),
        keys.len()
    );
    Ok(())
}

async fn leader_of_group_1_killed(cluster: &mut Cluster) -> Result<()> {
    let kept: Vec<(u64, serde_json::Value)> =
        [0, 2].iter().map(|g| Ok((*g, group_row(cluster, 1, *g)?["term"].clone()))).collect::<Result<_>>()?;
    cluster.kill9(preferred_of_three(1))?;
    let started = Instant::now();
    writes_go_through_their_group(cluster, 1, RECORDS).await?;
    let leader = group_row(cluster, 1, 1)?["leader"].clone();
    for (g, term) in kept {
        ensure!(
            group_row(cluster, 1, g)?["term"] == term,
            "group {g} changed term when group 1's leader died"
        );
    }
    println!(
        "group 1's leader killed: its topic written through node {leader} {:.1} s later",
        started.elapsed().as_secs_f64()
    );
    cluster.start_node(preferred_of_three(1))?;
    settle(cluster, &[1, 2, 3], GROUPS, SETTLE_TIMEOUT).await?;
    Ok(())
}

async fn deleted_topic_leaves_its_group(
    cluster: &mut Cluster,
    admin: &AdminClient<DefaultClientContext>,
) -> Result<()> {
    let held = partition_bytes(cluster, 3, 2)?;
    let results = admin.delete_topics(&[&placed(2)], &admin_options()).await?;
    ensure!(results.iter().all(|r| r.is_ok()), "deleting {}: {results:?}", placed(2));
    let deadline = Instant::now() + Duration::from_secs(30);
    while partition_bytes(cluster, 3, 2)? >= held {
        ensure!(Instant::now() < deadline, "group 2 still holds {} bytes of the deleted topic", held);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("{} deleted: group 2's copy dropped ({held} bytes before)", placed(2));
    Ok(())
}

/// Five nodes, three groups of three voters each (group g on nodes g+1 … g+3): node 1 runs
/// group 0 only, yet its Metadata names group 2's leader, learnt from group 2's voters, and a
/// client that knows only node 1 writes to a topic of group 2, before and after that leader
/// is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_outside_a_group_names_its_leader() {
    let options = ClusterOptions::new(5)
        .config("onelog.raft.groups", GROUPS)
        .config("leader.imbalance.check.interval.seconds", 1);
    let mut cluster = Cluster::start_with(options).expect("starting 5 nodes with 3 groups");
    let result = outside_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn outside_scenario(cluster: &mut Cluster) -> Result<()> {
    let node1 = cluster.kafka_addr(1).to_string();
    let row = group_row(cluster, 1, 2);
    ensure!(row.is_err(), "node 1 runs group 2: {row:?}");
    let admin: AdminClient<DefaultClientContext> = client_config(&node1).create()?;
    ensure!(create(&admin, "far", &[("onelog.raft.group", "2")]).await?.is_none(), "creating far");
    // Regression (chaos --nodes 5 --seed 35): node 1 opened its Kafka listener before it had
    // heard who leads group 2 and named leader -1, which librdkafka's offset queries keep for
    // metadata.max.age.ms: the very first Metadata must name a leader.
    let consumer: BaseConsumer = client_config(&node1).create()?;
    let first = consumer.fetch_metadata(Some("far"), Duration::from_secs(10))?;
    let named: Vec<i32> = first.topics().iter().flat_map(|t| t.partitions()).map(|p| p.leader()).collect();
    ensure!(
        named.len() == PARTITIONS as usize && named.iter().all(|l| *l > 0),
        "node 1's first Metadata for far names leaders {named:?}"
    );
    let leader = named_leader(cluster, &node1, None).await?;
    println!("node 1 (outside group 2) names node {leader} as far's leader");
    produce(&node1, "far", 0..RECORDS).await?;
    cluster.kill9(leader)?;
    let started = Instant::now();
    let next = named_leader(cluster, &node1, Some(leader)).await?;
    println!(
        "group 2's leader node {leader} killed: node 1 names node {next} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    produce(&node1, "far", RECORDS..2 * RECORDS).await?;
    let partitions: Vec<(String, i32)> = (0..PARTITIONS).map(|p| ("far".to_string(), p)).collect();
    let records = read_partitions(&node1, &partitions, READ_TIMEOUT)?;
    let read: usize = records.values().map(Vec::len).sum();
    ensure!(read == 2 * RECORDS, "read {read} records of far, wanted {}", 2 * RECORDS);
    println!("{read} records written to far through node 1 and read back");
    Ok(())
}

/// Waits until node 1's Metadata names, for every partition of `far`, the leader group 2's
/// voters report (other than `not`); returns it.
async fn named_leader(cluster: &mut Cluster, node1: &str, not: Option<u64>) -> Result<u64> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let voter = *[3u64, 4, 5].iter().find(|v| Some(**v) != not).context("a live voter")?;
        let leader = group_row(cluster, voter, 2)?["leader"].as_u64().filter(|l| Some(*l) != not);
        let consumer: BaseConsumer = client_config(node1).create()?;
        let metadata = consumer.fetch_metadata(Some("far"), Duration::from_secs(10))?;
        let named: Vec<i32> =
            metadata.topics().iter().flat_map(|t| t.partitions()).map(|p| p.leader()).collect();
        if let Some(leader) =
            leader.filter(|l| !named.is_empty() && named.iter().all(|n| i64::from(*n) == *l as i64))
        {
            return Ok(leader);
        }
        ensure!(Instant::now() < deadline, "node 1 names {named:?} for far, group 2's voters {leader:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
