//! Kafka 4.1's own admin tools against a three-node cluster, one scenario per read-only admin
//! API onelog added (issue 12): each asserts the values the tool prints against the cluster's
//! real state (the Raft leader and term from the admin API, bytes produced).
//!
//! - `kafka-log-dirs.sh --describe` (DescribeLogDirs): every node reports its data dir and the
//!   partition's size, 0 before a produce and the same positive size on every replica after.
//! - `kafka-metadata-quorum.sh describe --status / --replication` (DescribeQuorum): the leader
//!   id and epoch are the Raft leader and term; lag reaches 0 on every voter.
//! - `kafka-topics.sh --describe` (DescribeTopicPartitions, paged one partition per response).
//! - `kafka-consumer-groups.sh --list --type` (ListGroups v5) and `--describe` (which asks
//!   ConsumerGroupDescribe first and must fall back to DescribeGroups for a classic group).
//! - `kafka-leader-election.sh` (ElectLeaders) and `kafka-acls.sh --list` (DescribeAcls).

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::atomic::{send_atomic, Slice};
use harness::java::{consumer_groups, tool};
use harness::raw_ops::{create_topics_ok, topic_name};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

const SEGMENT_BYTES: u32 = 1024 * 1024;
const LOG_DIRS: &str = "org.apache.kafka.tools.LogDirsCommand";
const METADATA_QUORUM: &str = "org.apache.kafka.tools.MetadataQuorumCommand";
const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";
const LEADER_ELECTION: &str = "org.apache.kafka.tools.LeaderElectionCommand";
const ACLS: &str = "org.apache.kafka.tools.AclCommand";
/// How long replicas may take to apply what the leader acknowledged.
const CATCH_UP: Duration = Duration::from_secs(15);

fn cluster() -> Cluster {
    Cluster::start_with(ClusterOptions::new(3).config("log.segment.bytes", SEGMENT_BYTES))
        .expect("starting three onelog nodes")
}

async fn leader_client(cluster: &mut Cluster) -> Result<RawClient> {
    let leader = cluster.leader()?;
    RawClient::connect_negotiated(cluster.kafka_addr(leader)).await
}

/// Retries `check` until it passes or `CATCH_UP` is over.
fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<T>) -> Result<T> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() > deadline => {
                return Err(e.context(format!("{what} after {CATCH_UP:?}")))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// (broker, log dir, size of `partition`) from `kafka-log-dirs.sh --describe`'s JSON line.
fn log_dirs(bootstrap: &str, topic: &str, partition: &str) -> Result<Vec<(u64, String, i64)>> {
    let out = tool(LOG_DIRS, bootstrap, &["--describe", "--topic-list", topic])?;
    let json = out.stdout.lines().find(|l| l.starts_with('{')).context("no JSON line")?;
    let value: Value = serde_json::from_str(json)?;
    let mut rows = Vec::new();
    for broker in value["brokers"].as_array().context("brokers")? {
        let id = broker["broker"].as_u64().context("broker id")?;
        let dirs = broker["logDirs"].as_array().context("logDirs")?;
        ensure!(dirs.len() == 1, "broker {id}: {} log dirs, want one", dirs.len());
        let dir = &dirs[0];
        ensure!(dir["error"].is_null(), "broker {id}: error {}", dir["error"]);
        let p = dir["partitions"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["partition"] == partition))
            .with_context(|| format!("broker {id}: {partition} missing"))?;
        ensure!(p["offsetLag"] == 0 && p["isFuture"] == false, "broker {id}: {p}");
        rows.push((
            id,
            dir["logDir"].as_str().unwrap_or_default().to_string(),
            p["size"].as_i64().context("size")?,
        ));
    }
    rows.sort();
    Ok(rows)
}

#[tokio::test(flavor = "multi_thread")]
async fn log_dirs_report_partition_sizes_that_grow_with_produce() {
    let mut cluster = cluster();
    let result = log_dirs_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn log_dirs_scenario(cluster: &mut Cluster) -> Result<()> {
    let mut client = leader_client(cluster).await?;
    create_topics_ok(&mut client, &[("sized", 2)]).await?;
    let bootstrap = cluster.bootstrap();
    let before = log_dirs(&bootstrap, "sized", "sized-0")?;
    ensure!(before.len() == 3, "{before:?}");
    for (id, dir, size) in &before {
        ensure!(*size == 0, "broker {id}: {size} bytes before any produce");
        let expected = std::fs::canonicalize(cluster.data_dir(*id))?;
        ensure!(
            std::path::Path::new(dir) == expected,
            "broker {id}: log dir {dir}, data dir {}",
            expected.display()
        );
    }
    for _ in 0..5 {
        send_atomic(&mut client, &[Slice { topic: "sized", key: b"key", value: &[7u8; 1000] }]).await?;
    }
    let after = eventually("every replica reports the produced bytes", || {
        let rows = log_dirs(&bootstrap, "sized", "sized-0")?;
        let sizes: Vec<i64> = rows.iter().map(|r| r.2).collect();
        ensure!(sizes.iter().all(|s| *s == sizes[0] && *s >= 5_000), "sizes {sizes:?}");
        Ok(sizes)
    })?;
    println!("kafka-log-dirs: sized-0 grew from 0 to {} bytes on each of 3 replicas", after[0]);
    let untouched = log_dirs(&bootstrap, "sized", "sized-1")?;
    ensure!(untouched.iter().all(|r| r.2 == 0), "sized-1 was never written: {untouched:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_quorum_reports_the_raft_leader_epoch_and_lag() {
    let mut cluster = cluster();
    let result = quorum_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

/// `Name:   value` lines of `describe --status`.
fn status_field(text: &str, name: &str) -> Result<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
        .with_context(|| format!("{name} missing from\n{text}"))
}

async fn quorum_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let term = cluster.status(leader)?.term;
    let mut client = leader_client(cluster).await?;
    create_topics_ok(&mut client, &[("quorum", 1)]).await?;
    send_atomic(&mut client, &[Slice { topic: "quorum", key: b"k", value: b"v" }]).await?;
    // Through a follower too: it forwards to the leader.
    let follower = cluster.followers()?[0];
    let bootstrap = cluster.kafka_addr(follower).to_string();
    let status = eventually("max follower lag 0", || {
        let out = tool(METADATA_QUORUM, &bootstrap, &["describe", "--status"])?.stdout;
        ensure!(status_field(&out, "MaxFollowerLag")? == "0", "lag in\n{out}");
        Ok(out)
    })?;
    ensure!(status_field(&status, "LeaderId")? == leader.to_string(), "leader {leader}:\n{status}");
    ensure!(status_field(&status, "LeaderEpoch")? == term.to_string(), "term {term}:\n{status}");
    let high_watermark: i64 = status_field(&status, "HighWatermark")?.parse()?;
    ensure!(high_watermark >= 3, "high watermark {high_watermark} after a create and a produce");
    let voters = status_field(&status, "CurrentVoters")?;
    for id in cluster.ids() {
        ensure!(voters.contains(&format!("\"id\": {id}")), "voter {id} missing: {voters}");
    }
    ensure!(status_field(&status, "CurrentObservers")? == "[]", "{status}");
    let out = tool(METADATA_QUORUM, &bootstrap, &["describe", "--replication"])?.stdout;
    let rows: Vec<Vec<&str>> = out.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    ensure!(rows.len() == 3, "three voters in\n{out}");
    let leader_row = rows.iter().find(|r| r[0] == leader.to_string()).context("leader row")?;
    ensure!(leader_row[6] == "Leader" && leader_row[3] == "0", "{out}");
    let leader_end: i64 = leader_row[2].parse()?;
    ensure!(leader_end >= high_watermark, "leader log end {leader_end} < high watermark {high_watermark}");
    println!(
        "kafka-metadata-quorum: leader {leader}, epoch {term}, high watermark {high_watermark}, lag 0\n{out}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn topics_describe_pages_through_describe_topic_partitions() {
    let mut cluster = cluster();
    let result = topics_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn topics_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = leader_client(cluster).await?;
    create_topics_ok(&mut client, &[("paged", 3)]).await?;
    // One partition per response: the tool follows the cursor through all three.
    let out = tool(
        TOPICS,
        &cluster.bootstrap(),
        &["--describe", "--topic", "paged", "--partition-size-limit-per-response", "1"],
    )?
    .stdout;
    let partitions: Vec<&str> = out.lines().filter(|l| l.contains("Partition: ")).collect();
    ensure!(partitions.len() == 3, "three partitions in\n{out}");
    for (i, line) in partitions.iter().enumerate() {
        ensure!(line.contains(&format!("Partition: {i}\t")), "partition {i}: {line}");
        ensure!(line.contains(&format!("Leader: {leader}\t")), "leader {leader}: {line}");
        ensure!(line.contains("Replicas: 1,2,3") && line.contains("Elr: \t"), "{line}");
    }
    println!("kafka-topics --describe (1 partition per response):\n{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn consumer_groups_list_by_type_and_describe_classic_groups() {
    let mut cluster = cluster();
    let result = groups_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn groups_scenario(cluster: &mut Cluster) -> Result<()> {
    let mut client = leader_client(cluster).await?;
    create_topics_ok(&mut client, &[("grouped", 1)]).await?;
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("typed-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("grouped"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    let response = client.request(8, &commit).await?;
    ensure!(response.topics[0].partitions[0].error_code == 0, "commit: {response:?}");
    let bootstrap = cluster.bootstrap();
    let listed = consumer_groups(&bootstrap, &["--list", "--type"])?.stdout;
    let rows = harness::java::table(&listed, "GROUP");
    let row = rows
        .iter()
        .find(|r| r["GROUP"] == "typed-group")
        .with_context(|| format!("not listed:\n{listed}"))?;
    ensure!(row["TYPE"] == "Classic", "type {:?}", row["TYPE"]);
    let consumer_only = consumer_groups(&bootstrap, &["--list", "--type", "consumer"])?.stdout;
    ensure!(!consumer_only.contains("typed-group"), "a classic group listed as consumer:\n{consumer_only}");
    let classic_only = consumer_groups(&bootstrap, &["--list", "--type", "classic"])?.stdout;
    ensure!(classic_only.contains("typed-group"), "{classic_only}");
    // Kafka 4.x asks ConsumerGroupDescribe first; GROUP_ID_NOT_FOUND sends it to DescribeGroups.
    let described = consumer_groups(&bootstrap, &["--describe", "--group", "typed-group"])?.stdout;
    ensure!(described.contains("grouped") && described.contains("typed-group"), "{described}");
    println!("kafka-consumer-groups --list --type:\n{listed}\n--describe:\n{described}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_election_and_acl_tools_get_kafkas_answers() {
    let mut cluster = cluster();
    let result = election_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn election_scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = leader_client(cluster).await?;
    create_topics_ok(&mut client, &[("elected", 1)]).await?;
    let bootstrap = cluster.bootstrap();
    let args = ["--election-type", "preferred", "--topic", "elected", "--partition", "0"];
    // The preferred replica is the first Metadata lists: the lowest voter id.
    let preferred = *cluster.ids().first().context("no node")?;
    match tool(LEADER_ELECTION, &bootstrap, &args) {
        Ok(out) if leader == preferred => {
            ensure!(
                out.stdout.contains("Valid replica already elected for partitions elected-0"),
                "{}",
                out.stdout
            )
        }
        Ok(out) => {
            bail!("leader {leader} is not preferred {preferred}, yet the election succeeded: {}", out.stdout)
        }
        Err(e) if leader != preferred => {
            ensure!(format!("{e:#}").contains("PreferredLeaderNotAvailable"), "{e:#}")
        }
        Err(e) => return Err(e),
    }
    let unclean = tool(
        LEADER_ELECTION,
        &bootstrap,
        &["--election-type", "unclean", "--topic", "elected", "--partition", "0"],
    )?;
    ensure!(unclean.stdout.contains("Valid replica already elected"), "unclean: {}", unclean.stdout);
    let acls = tool(ACLS, &bootstrap, &["--list"])
        .err()
        .context("kafka-acls --list succeeded without an authorizer")?;
    ensure!(
        format!("{acls:#}").contains("SecurityDisabledException: No Authorizer is configured."),
        "{acls:#}"
    );
    println!(
        "leader election: leader {leader}, preferred {preferred}; kafka-acls: SecurityDisabledException"
    );
    Ok(())
}
