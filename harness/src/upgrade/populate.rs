//! Writes the upgrade fixture's data set onto a running cluster (the old release's) with stock
//! clients: librdkafka for records, transactions, the idempotent producer and a consumer
//! group's commits; Kafka's command-line tools (kafka-clients/kafka-tools 4.x, `harness/java`)
//! for topics with configs, topic deletion, DeleteRecords, offset resets, SCRAM users, ACLs,
//! quotas and dynamic configs. Every step is recorded as the line the manifest shows.
//!
//! [`check_written`] then says whether what `observe` read back is what these steps meant to
//! write, so that a fixture is never made from a release that lost something on its own.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use super::manifest::{ClusterState, PartitionState};
use super::observe::Names;
use crate::java;
use crate::kafka::{client_config, create_topics};
use crate::txn::{send_sync, transactional_producer, TXN_CALL_TIMEOUT};

const TOPIC_COMMAND: &str = "org.apache.kafka.tools.TopicCommand";
const ACL_COMMAND: &str = "org.apache.kafka.tools.AclCommand";
const DELETE_RECORDS_COMMAND: &str = "org.apache.kafka.tools.DeleteRecordsCommand";

/// Records per partition of the plain, compressed, idempotent and trimmed topics.
pub const RECORDS_PER_PARTITION: usize = 10;
/// Codecs of `fx-compressed`, partition by partition.
pub const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];
/// The transactional ids: one commits twice, one aborts.
pub const TXN_COMMITTED: &str = "fx-txn-committed";
pub const TXN_ABORTED: &str = "fx-txn-aborted";
/// The topic the fixture deletes.
pub const DELETED_TOPIC: &str = "fx-doomed";
/// SCRAM users and their passwords.
pub const ALICE: (&str, &str) = ("alice", "alice-secret");
pub const BOB: (&str, &str) = ("bob", "bob-secret");
/// The topic only alice may read (over SASL).
pub const SECURED_TOPIC: &str = "fx-secured";
/// Where `fx-trimmed`'s partitions start after DeleteRecords.
pub const TRIMMED_TO: [i64; 2] = [4, 7];
/// What `fx-group` commits on `fx-plain`, partition by partition.
pub const GROUP_OFFSETS: [i64; 3] = [10, 6, 3];
/// What `kafka-consumer-groups --reset-offsets` sets for `fx-reset` on `fx-idempotent`.
pub const RESET_TO: i64 = 4;

/// What [`populate`] did: the names `observe` needs and the steps, as the manifest lists them.
pub struct Written {
    pub names: Names,
    pub steps: Vec<String>,
}

/// Writes the whole data set through `bootstrap` (PLAINTEXT, the fixture's super user);
/// `work` holds the tools' input files.
pub async fn populate(bootstrap: &str, work: &Path) -> Result<Written> {
    let mut steps = Vec::new();
    topics(bootstrap, &mut steps).await?;
    records(bootstrap, &mut steps).await?;
    transactions(bootstrap, &mut steps).await?;
    trim_and_delete(bootstrap, work, &mut steps).await?;
    group_offsets(bootstrap, &mut steps)?;
    security(bootstrap, &mut steps)?;
    let names = Names {
        deleted_topics: vec![DELETED_TOPIC.to_string()],
        transactional_ids: vec![TXN_ABORTED.to_string(), TXN_COMMITTED.to_string()],
    };
    Ok(Written { names, steps })
}

/// A Kafka tool that must succeed; its command line becomes a step.
fn tool(bootstrap: &str, class: &str, script: &str, args: &[&str], steps: &mut Vec<String>) -> Result<()> {
    java::tool(class, bootstrap, args).with_context(|| format!("{script} {}", args.join(" ")))?;
    steps.push(format!("{script} {}", args.join(" ")));
    Ok(())
}

/// kafka-configs.sh, which must succeed.
fn configs_tool(bootstrap: &str, args: &[&str], steps: &mut Vec<String>) -> Result<()> {
    let (ok, out) = java::config_command(bootstrap, args)?;
    if !ok {
        bail!("kafka-configs.sh {} failed: {out}", args.join(" "));
    }
    steps.push(format!("kafka-configs.sh {}", args.join(" ")));
    Ok(())
}

async fn topics(bootstrap: &str, steps: &mut Vec<String>) -> Result<()> {
    let topics = [
        ("fx-plain", 3),
        ("fx-compressed", CODECS.len() as i32),
        ("fx-idempotent", 2),
        ("fx-txn", 2),
        (SECURED_TOPIC, 1),
        ("fx-trimmed", 2),
        (DELETED_TOPIC, 1),
    ];
    create_topics(bootstrap, &topics).await?;
    steps.push(format!("librdkafka AdminClient create_topics {topics:?}"));
    let args = [
        "--create",
        "--topic",
        "fx-configured",
        "--partitions",
        "1",
        "--config",
        "retention.ms=-1",
        "--config",
        "segment.bytes=2097152",
    ];
    tool(bootstrap, TOPIC_COMMAND, "kafka-topics.sh", &args, steps)
}

/// A librdkafka producer; `extra` configs on top of acks=all.
fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Result<FutureProducer> {
    let mut config = client_config(bootstrap);
    config.set("acks", "all").set("message.timeout.ms", "30000");
    for (k, v) in extra {
        config.set(*k, *v);
    }
    Ok(config.create()?)
}

/// Sends `values` to `topic`/`partition` all at once (one or a few batches), then waits for
/// every acknowledgement.
async fn send_burst(p: &FutureProducer, topic: &str, partition: i32, values: &[String]) -> Result<()> {
    let mut pending = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let key = format!("k{i}");
        let record = FutureRecord::to(topic).partition(partition).key(&key).payload(value);
        pending.push(p.send_result(record).map_err(|(e, _)| e)?);
    }
    for delivery in pending {
        delivery.await?.map_err(|(e, _)| anyhow::anyhow!("delivery to {topic}/{partition}: {e}"))?;
    }
    Ok(())
}

/// Uncompressed records one by one with keys and headers, each codec's batch, an idempotent
/// producer's batches, and the records of the secured, trimmed and doomed topics.
async fn records(bootstrap: &str, steps: &mut Vec<String>) -> Result<()> {
    let plain = producer(bootstrap, &[("enable.idempotence", "false"), ("linger.ms", "0")])?;
    for p in 0..3 {
        for i in 0..RECORDS_PER_PARTITION {
            let (key, value, header) = (format!("k{i}"), format!("fx-plain-{p}-{i:02}"), format!("h{i}"));
            let headers = OwnedHeaders::new().insert(Header { key: "fx", value: Some(&header) });
            let record = FutureRecord::to("fx-plain").partition(p).key(&key).payload(&value).headers(headers);
            plain.send(record, TXN_CALL_TIMEOUT).await.map_err(|(e, _)| anyhow::anyhow!("fx-plain: {e}"))?;
        }
    }
    steps.push(
        "librdkafka: fx-plain, 10 uncompressed records per partition one at a time, keys and a header".into(),
    );
    for (p, codec) in CODECS.iter().enumerate() {
        let producer = producer(
            bootstrap,
            &[("enable.idempotence", "false"), ("compression.codec", codec), ("linger.ms", "100")],
        )?;
        let padding = "compressible ".repeat(8);
        let values: Vec<String> =
            (0..RECORDS_PER_PARTITION).map(|i| format!("fx-compressed-{p}-{i:02} {padding}")).collect();
        send_burst(&producer, "fx-compressed", p as i32, &values).await?;
        steps.push(format!(
            "librdkafka compression.codec={codec}: fx-compressed/{p}, 10 records in one burst"
        ));
    }
    let idempotent = producer(bootstrap, &[("enable.idempotence", "true"), ("linger.ms", "20")])?;
    for p in 0..2 {
        let values: Vec<String> =
            (0..RECORDS_PER_PARTITION).map(|i| format!("fx-idempotent-{p}-{i:02}")).collect();
        for half in values.chunks(RECORDS_PER_PARTITION / 2) {
            send_burst(&idempotent, "fx-idempotent", p, half).await?;
        }
    }
    steps.push(
        "librdkafka enable.idempotence=true: fx-idempotent, 10 records per partition in two bursts".into(),
    );
    let others: [(&str, i32, usize); 4] =
        [(SECURED_TOPIC, 0, 5), ("fx-trimmed", 0, 10), ("fx-trimmed", 1, 10), (DELETED_TOPIC, 0, 3)];
    for (topic, p, n) in others {
        let values: Vec<String> = (0..n).map(|i| format!("{topic}-{p}-{i:02}")).collect();
        send_burst(&plain, topic, p, &values).await?;
    }
    steps.push("librdkafka: fx-secured 5 records, fx-trimmed 10 per partition, fx-doomed 3".into());
    Ok(())
}

/// The transactional producers: a commit (with offsets for `fx-txn-group`), an abort (with
/// offsets for `fx-txn-aborted-group`), then a second commit.
async fn transactions(bootstrap: &str, steps: &mut Vec<String>) -> Result<()> {
    let committed = transactional_producer(bootstrap, TXN_COMMITTED)?;
    let aborted = transactional_producer(bootstrap, TXN_ABORTED)?;
    let offsets = |group: &str, offset: i64| -> Result<_> {
        let consumer: BaseConsumer = client_config(bootstrap).set("group.id", group).create()?;
        let metadata = consumer.group_metadata().context("consumer group metadata")?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("fx-plain", 0, Offset::Offset(offset))?;
        Ok((tpl, metadata))
    };
    committed.begin_transaction()?;
    for (p, value) in [(0, "fx-txn-c1-a"), (1, "fx-txn-c1-b"), (0, "fx-txn-c1-c")] {
        send_sync(&committed, "fx-txn", Some(p), value, value).await?;
    }
    let (tpl, metadata) = offsets("fx-txn-group", 5)?;
    committed.send_offsets_to_transaction(&tpl, &metadata, TXN_CALL_TIMEOUT)?;
    committed.commit_transaction(TXN_CALL_TIMEOUT)?;
    aborted.begin_transaction()?;
    for (p, value) in [(0, "fx-txn-a1-a"), (1, "fx-txn-a1-b")] {
        send_sync(&aborted, "fx-txn", Some(p), value, value).await?;
    }
    let (tpl, metadata) = offsets("fx-txn-aborted-group", 7)?;
    aborted.send_offsets_to_transaction(&tpl, &metadata, TXN_CALL_TIMEOUT)?;
    aborted.abort_transaction(TXN_CALL_TIMEOUT)?;
    committed.begin_transaction()?;
    for (p, value) in [(1, "fx-txn-c2-a"), (0, "fx-txn-c2-b")] {
        send_sync(&committed, "fx-txn", Some(p), value, value).await?;
    }
    committed.commit_transaction(TXN_CALL_TIMEOUT)?;
    steps.push(format!(
        "librdkafka transactional.id={TXN_COMMITTED}: fx-txn c1-a, c1-b, c1-c + offsets of fx-txn-group \
         (fx-plain/0 at 5), committed; {TXN_ABORTED}: a1-a, a1-b + offsets of fx-txn-aborted-group \
         (fx-plain/0 at 7), aborted; {TXN_COMMITTED}: c2-a, c2-b, committed"
    ));
    Ok(())
}

/// DeleteRecords on `fx-trimmed` with kafka-delete-records.sh, and `fx-doomed` deleted with
/// kafka-topics.sh.
async fn trim_and_delete(bootstrap: &str, work: &Path, steps: &mut Vec<String>) -> Result<()> {
    let json = work.join("delete-records.json");
    let partitions: Vec<String> = TRIMMED_TO
        .iter()
        .enumerate()
        .map(|(p, o)| format!(r#"{{"topic":"fx-trimmed","partition":{p},"offset":{o}}}"#))
        .collect();
    std::fs::write(&json, format!(r#"{{"version":1,"partitions":[{}]}}"#, partitions.join(",")))?;
    let path = json.to_string_lossy().to_string();
    java::tool(DELETE_RECORDS_COMMAND, bootstrap, &["--offset-json-file", &path])
        .context("kafka-delete-records.sh")?;
    steps.push(format!(
        "kafka-delete-records.sh --offset-json-file delete-records.json (fx-trimmed/0 before {}, fx-trimmed/1 before {})",
        TRIMMED_TO[0], TRIMMED_TO[1]
    ));
    tool(bootstrap, TOPIC_COMMAND, "kafka-topics.sh", &["--delete", "--topic", DELETED_TOPIC], steps)
}

/// `fx-group`: a librdkafka member of the group reads `fx-plain` and commits its offsets (one
/// with metadata), then leaves; `fx-reset`: kafka-consumer-groups.sh --reset-offsets.
fn group_offsets(bootstrap: &str, steps: &mut Vec<String>) -> Result<()> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "fx-group")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "10000")
        .create()?;
    consumer.subscribe(&["fx-plain"])?;
    let (mut read, deadline) = (0, Instant::now() + Duration::from_secs(60));
    while read < 3 * RECORDS_PER_PARTITION {
        if Instant::now() > deadline {
            bail!("fx-group read {read} of fx-plain's records in 60 s");
        }
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            m.context("fx-group member")?;
            read += 1;
        }
    }
    let mut tpl = TopicPartitionList::new();
    for (p, offset) in GROUP_OFFSETS.iter().enumerate() {
        tpl.add_partition_offset("fx-plain", p as i32, Offset::Offset(*offset))?;
    }
    tpl.find_partition("fx-plain", 1).context("partition 1")?.set_metadata("fx-meta");
    consumer.commit(&tpl, CommitMode::Sync)?;
    consumer.unsubscribe();
    drop(consumer);
    steps.push(format!("librdkafka group member of fx-group: read fx-plain, committed {GROUP_OFFSETS:?} (metadata on 1), left"));
    let to = RESET_TO.to_string();
    let args = [
        "--reset-offsets",
        "--group",
        "fx-reset",
        "--topic",
        "fx-idempotent",
        "--to-offset",
        &to,
        "--execute",
    ];
    tool(bootstrap, java::CONSUMER_GROUP_COMMAND, "kafka-consumer-groups.sh", &args, steps)
}

/// SCRAM users, ACLs and client quotas.
fn security(bootstrap: &str, steps: &mut Vec<String>) -> Result<()> {
    let alice =
        format!("SCRAM-SHA-256=[iterations=8192,password={}],SCRAM-SHA-512=[password={}]", ALICE.1, ALICE.1);
    let bob = format!("SCRAM-SHA-512=[iterations=4096,password={}]", BOB.1);
    for (user, config) in [(ALICE.0, alice), (BOB.0, bob)] {
        let args = ["--alter", "--add-config", &config, "--entity-type", "users", "--entity-name", user];
        configs_tool(bootstrap, &args, steps)?;
    }
    for line in ACLS {
        let args: Vec<&str> = line.split_whitespace().collect();
        tool(bootstrap, ACL_COMMAND, "kafka-acls.sh", &args, steps)?;
    }
    for line in QUOTAS.iter().chain(&CONFIGS) {
        let args: Vec<&str> = line.split_whitespace().collect();
        configs_tool(bootstrap, &args, steps)?;
    }
    Ok(())
}

/// kafka-acls.sh command lines: six bindings (two from the first line).
const ACLS: [&str; 5] = [
    "--add --allow-principal User:alice --operation Read --operation Describe --topic fx-secured",
    "--add --allow-principal User:alice --operation Read --group fx-secured- --resource-pattern-type prefixed",
    "--add --allow-principal User:alice --operation Write --transactional-id fx-alice-txn",
    "--add --deny-principal User:bob --operation All --topic fx-secured",
    "--add --allow-principal User:bob --operation Describe --cluster",
];

/// kafka-configs.sh command lines of the client quotas: a client id, a user, a user and
/// client id together (four values).
const QUOTAS: [&str; 3] = [
    "--alter --entity-type clients --entity-name fx-quota-app --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152",
    "--alter --entity-type users --entity-name alice --add-config request_percentage=200",
    "--alter --entity-type users --entity-name bob --entity-type clients --entity-name fx-bob-app --add-config producer_byte_rate=65536",
];

/// kafka-configs.sh command lines of the dynamic configs: two topics, the cluster-wide broker
/// default and broker 2's own.
const CONFIGS: [&str; 4] = [
    "--alter --entity-type topics --entity-name fx-plain --add-config max.message.bytes=524288,retention.bytes=1073741824",
    "--alter --entity-type topics --entity-name fx-configured --add-config max.message.bytes=65536",
    "--alter --entity-type brokers --entity-default --add-config message.max.bytes=2097152,log.retention.ms=-1",
    "--alter --entity-type brokers --entity-name 2 --add-config message.max.bytes=3145728",
];

/// What `state` (read back) lacks of what the steps wrote: one line per problem.
pub fn check_written(state: &ClusterState) -> Vec<String> {
    let mut problems = Vec::new();
    check_records(state, &mut problems);
    check_offsets_and_ids(state, &mut problems);
    check_security_and_configs(state, &mut problems);
    problems
}

fn partition<'a>(state: &'a ClusterState, topic: &str, p: i32) -> Option<&'a PartitionState> {
    state.topics.get(topic).and_then(|t| t.partitions.get(&p))
}

fn expect(problems: &mut Vec<String>, ok: bool, what: String) {
    if !ok {
        problems.push(what);
    }
}

/// The values of "offset value" lines.
fn values(lines: &[String]) -> Vec<&str> {
    lines.iter().map(|l| l.split_once(' ').map_or("", |x| x.1)).collect()
}

fn check_records(state: &ClusterState, problems: &mut Vec<String>) {
    for p in 0..3 {
        let values: Vec<String> =
            (0..RECORDS_PER_PARTITION).map(|i| format!("{i} fx-plain-{p}-{i:02}")).collect();
        let seen = partition(state, "fx-plain", p).map(|s| s.read_committed.clone());
        expect(problems, seen.as_ref() == Some(&values), format!("fx-plain/{p} reads {seen:?}"));
    }
    for (p, codec) in CODECS.iter().enumerate() {
        let batches =
            partition(state, "fx-compressed", p as i32).map(|s| s.batches.clone()).unwrap_or_default();
        let ok = !batches.is_empty() && batches.iter().all(|b| b.contains(&format!(" {codec} ")));
        expect(problems, ok, format!("fx-compressed/{p} batches are not all {codec}: {batches:?}"));
    }
    for p in 0..2 {
        let producers = partition(state, "fx-idempotent", p).map_or(0, |s| s.producers.len());
        expect(problems, producers == 1, format!("fx-idempotent/{p}: {producers} producers, expected 1"));
        let trimmed = partition(state, "fx-trimmed", p).map(|s| s.log_start_offset);
        expect(
            problems,
            trimmed == Some(TRIMMED_TO[p as usize]),
            format!("fx-trimmed/{p} starts at {trimmed:?}"),
        );
    }
    let txn = |p: i32| partition(state, "fx-txn", p).map(|s| values(&s.read_committed)).unwrap_or_default();
    expect(
        problems,
        txn(0) == ["fx-txn-c1-a", "fx-txn-c1-c", "fx-txn-c2-b"],
        format!("fx-txn/0 reads {:?}", txn(0)),
    );
    expect(problems, txn(1) == ["fx-txn-c1-b", "fx-txn-c2-a"], format!("fx-txn/1 reads {:?}", txn(1)));
    let aborted = partition(state, "fx-txn", 0).is_some_and(|s| values(&s.records).contains(&"fx-txn-a1-a"));
    expect(problems, aborted, "fx-txn/0 lacks the aborted record in read_uncommitted".into());
    let deleted = state.deleted_topics.get(DELETED_TOPIC).map(String::as_str);
    expect(
        problems,
        deleted == Some("UNKNOWN_TOPIC_OR_PARTITION"),
        format!("{DELETED_TOPIC} answers {deleted:?}"),
    );
    expect(problems, !state.topics.contains_key(DELETED_TOPIC), format!("{DELETED_TOPIC} is still listed"));
}

fn check_offsets_and_ids(state: &ClusterState, problems: &mut Vec<String>) {
    let offsets = |group: &str| state.groups.get(group).map(|g| g.offsets.clone()).unwrap_or_default();
    let group: Vec<String> = offsets("fx-group").into_values().collect();
    expect(problems, group == ["10", "6 metadata fx-meta", "3"], format!("fx-group offsets {group:?}"));
    let reset: Vec<String> = offsets("fx-reset").into_values().collect();
    expect(
        problems,
        reset == [RESET_TO.to_string(), RESET_TO.to_string()],
        format!("fx-reset offsets {reset:?}"),
    );
    let in_txn = offsets("fx-txn-group").get("fx-plain/0").cloned();
    expect(
        problems,
        in_txn.as_deref() == Some("5"),
        format!("fx-txn-group fx-plain/0 at {in_txn:?}, expected 5"),
    );
    let aborted = offsets("fx-txn-aborted-group");
    expect(problems, aborted.is_empty(), format!("fx-txn-aborted-group has {aborted:?}"));
    for (id, state_name) in [(TXN_COMMITTED, "CompleteCommit"), (TXN_ABORTED, "CompleteAbort")] {
        let line = state.transactions.get(id).cloned().unwrap_or_default();
        expect(problems, line.starts_with(state_name), format!("{id}: {line:?}, expected {state_name}"));
    }
}

fn check_security_and_configs(state: &ClusterState, problems: &mut Vec<String>) {
    expect(problems, state.scram_users.len() == 2, format!("SCRAM users {:?}", state.scram_users));
    expect(
        problems,
        state.acls.len() == 6,
        format!("{} ACL bindings, expected 6: {:?}", state.acls.len(), state.acls),
    );
    let quotas = state.quotas.len();
    expect(problems, quotas == 4, format!("{quotas} quota values, expected 4: {:?}", state.quotas));
    let configured = state.topics.get("fx-configured").map(|t| t.configs.clone()).unwrap_or_default();
    expect(problems, configured.len() == 3, format!("fx-configured's dynamic configs: {configured:?}"));
    let default = state.broker_configs.get("").cloned().unwrap_or_default();
    expect(problems, default.len() == 2, format!("cluster-default broker configs: {default:?}"));
    let broker2 = state.broker_configs.get("2").cloned().unwrap_or_default();
    let ok = broker2.iter().any(|l| l == "message.max.bytes=3145728 (broker)");
    expect(problems, ok, format!("broker 2's configs: {broker2:?}"));
}
