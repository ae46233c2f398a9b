//! `compat_rdkafka`: the compatibility-matrix driver for the `rdkafka` crate (librdkafka), client
//! id `rdkafka-rust`. It runs every scenario id of harness/compat/README.md against
//! COMPAT_BOOTSTRAP and prints one JSON line per scenario; scripts/compat.sh runs it. Each
//! scenario runs on its own thread so that a hung librdkafka call fails its cell after
//! COMPAT_TIMEOUT_S instead of stalling the matrix.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, ensure, Context, Result};
use harness::kafka::client_config;
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const CLIENT: &str = "rdkafka-rust";
const SCENARIOS: [&str; 20] = [
    "create_topic",
    "produce_consume",
    "compression",
    "consume_earliest",
    "consume_latest",
    "seek_timestamp",
    "group_rebalance",
    "member_leave_rejoin",
    "idempotent_produce",
    "txn_commit_abort",
    "consume_process_produce",
    "txn_fencing",
    "alter_config",
    "delete_records",
    "leader_kill",
    "txn_leader_kill",
    "err_unknown_topic",
    "err_offset_out_of_range",
    "err_stale_generation",
    "err_fenced_producer",
];
/// Budget of one librdkafka call (flush, commit, transaction step).
const CALL: Duration = Duration::from_secs(30);

struct Env {
    bootstrap: String,
    prefix: String,
    timeout: Duration,
}

fn env() -> Env {
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    Env {
        bootstrap: var("COMPAT_BOOTSTRAP", "127.0.0.1:19092"),
        prefix: var("COMPAT_PREFIX", &format!("compat-rs-{}", std::process::id())),
        timeout: Duration::from_secs(var("COMPAT_TIMEOUT_S", "60").parse().unwrap_or(60)),
    }
}

fn name(scenario: &str, suffix: &str) -> String {
    format!("{}-{CLIENT}-{scenario}{suffix}", env().prefix)
}

type Rec = (String, String, Vec<(String, String)>);

fn records(n: usize, tag: &str) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            let headers = vec![("h1".to_string(), format!("a{i}")), ("h2".to_string(), String::new())];
            (format!("k-{tag}-{i}"), format!("v-{tag}-{i}"), headers)
        })
        .collect()
}

fn values(n: usize, tag: &str) -> Vec<String> {
    records(n, tag).into_iter().map(|r| r.1).collect()
}

fn config(extra: &[(&str, &str)]) -> ClientConfig {
    let mut c = client_config(&env().bootstrap);
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(f)
}

fn admin() -> Result<AdminClient<DefaultClientContext>> {
    Ok(config(&[]).create()?)
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(CALL)).request_timeout(Some(CALL))
}

fn topic(scenario: &str, partitions: i32, suffix: &str) -> Result<String> {
    let t = name(scenario, suffix);
    let new = NewTopic::new(&t, partitions, TopicReplication::Fixed(3)).set("segment.bytes", "1048576");
    for r in block_on(admin()?.create_topics(&[new], &opts()))? {
        r.map_err(|(n, code)| anyhow!("create_topics {n}: {code:?}"))?;
    }
    Ok(t)
}

fn producer(extra: &[(&str, &str)]) -> Result<BaseProducer> {
    Ok(config(&[&[("linger.ms", "5")], extra].concat()).create()?)
}

fn send(p: &BaseProducer, t: &str, partition: i32, recs: &[Rec]) -> Result<()> {
    for (k, v, hs) in recs {
        let headers = hs.iter().fold(OwnedHeaders::new(), |h, (hk, hv)| {
            h.insert(Header { key: hk, value: Some(hv.as_bytes()) })
        });
        let rec = BaseRecord::to(t).partition(partition).key(k).payload(v).headers(headers);
        p.send(rec).map_err(|(e, _)| e)?;
        p.poll(Duration::ZERO);
    }
    Ok(())
}

fn produce(t: &str, partition: i32, recs: &[Rec], extra: &[(&str, &str)]) -> Result<()> {
    let p = producer(extra)?;
    send(&p, t, partition, recs)?;
    p.flush(CALL)?;
    Ok(())
}

fn assigned(t: &str, offset: Offset, extra: &[(&str, &str)]) -> Result<BaseConsumer> {
    let group = name("assign", "");
    let c: BaseConsumer =
        config(&[&[("group.id", group.as_str()), ("enable.auto.commit", "false")], extra].concat())
            .create()?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(t, 0, offset)?;
    c.assign(&tpl)?;
    Ok(c)
}

/// Reads n messages (failing on an error), then polls 1 s more to see there are no others.
fn read(c: &BaseConsumer, n: usize) -> Result<Vec<OwnedMessage>> {
    let mut out = Vec::new();
    let deadline = Instant::now() + env().timeout / 3;
    let mut quiet: Option<Instant> = None;
    while Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            out.push(m?.detach());
            if out.len() >= n && quiet.is_none() {
                quiet = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        if quiet.is_some_and(|q| Instant::now() > q) {
            return Ok(out);
        }
    }
    bail!("read {} of {n} messages", out.len())
}

fn triple(m: &OwnedMessage) -> Rec {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let headers = m
        .headers()
        .map(|hs| hs.iter().map(|h| (h.key.to_string(), text(h.value))).collect())
        .unwrap_or_default();
    (text(m.key()), text(m.payload()), headers)
}

fn vals(ms: &[OwnedMessage]) -> Vec<String> {
    ms.iter().map(|m| triple(m).1).collect()
}

fn check<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<()> {
    ensure!(got == want, "{what}: got {got:.300?}, want {want:.300?}");
    Ok(())
}

fn create_topic() -> Result<String> {
    let t = topic("create_topic", 3, "")?;
    let p = producer(&[])?;
    let md = p.client().fetch_metadata(Some(&t), CALL)?;
    let parts = md.topics()[0].partitions();
    check("partitions", parts.len(), 3)?;
    ensure!(parts.iter().all(|p| p.replicas().len() == 3), "3 replicas each");
    Ok("3 partitions, 3 replicas each".into())
}

fn produce_consume() -> Result<String> {
    let t = topic("produce_consume", 1, "")?;
    let recs = records(20, "r");
    produce(&t, 0, &recs, &[])?;
    let got: Vec<Rec> = read(&assigned(&t, Offset::Beginning, &[])?, 20)?.iter().map(triple).collect();
    check("records", got, recs)?;
    Ok("20 records with keys and 2 headers exact".into())
}

fn compression() -> Result<String> {
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let t = topic("compression", 1, &format!("-{codec}"))?;
        let recs = records(50, codec);
        produce(&t, 0, &recs, &[("compression.type", codec)])?;
        let got: Vec<Rec> = read(&assigned(&t, Offset::Beginning, &[])?, 50)?.iter().map(triple).collect();
        check(codec, got, recs)?;
    }
    Ok("codecs: gzip,snappy,lz4,zstd".into())
}

fn subscribed(t: &str, group: &str, reset: &str, extra: &[(&str, &str)]) -> Result<BaseConsumer> {
    let base = [("group.id", group), ("enable.auto.commit", "false"), ("auto.offset.reset", reset)];
    let c: BaseConsumer = config(&[&base[..], extra].concat()).create()?;
    c.subscribe(&[t])?;
    Ok(c)
}

/// Polls every consumer until their assignments add up to `total`, each non-empty.
fn wait_assignment(cs: &[&BaseConsumer], total: usize) -> Result<Vec<usize>> {
    let deadline = Instant::now() + env().timeout / 2;
    while Instant::now() < deadline {
        for c in cs {
            if let Some(m) = c.poll(Duration::from_millis(100)) {
                let m = m?;
                bail!("a record arrived while waiting for the assignment: offset {}", m.offset());
            }
        }
        let sizes: Vec<usize> = cs.iter().map(|c| c.assignment().map(|a| a.count()).unwrap_or(0)).collect();
        if sizes.iter().sum::<usize>() == total && sizes.iter().all(|s| *s > 0) {
            return Ok(sizes);
        }
    }
    bail!("assignments never settled")
}

fn consume_earliest() -> Result<String> {
    let t = topic("consume_earliest", 1, "")?;
    let recs = records(10, "r");
    produce(&t, 0, &recs, &[])?;
    let c = subscribed(&t, &name("consume_earliest", ""), "earliest", &[])?;
    check("records", read(&c, 10)?.iter().map(triple).collect(), recs)?;
    Ok("10 of 10 from a group without offsets".into())
}

fn consume_latest() -> Result<String> {
    let t = topic("consume_latest", 1, "")?;
    produce(&t, 0, &records(5, "old"), &[])?;
    let c = subscribed(&t, &name("consume_latest", ""), "latest", &[])?;
    wait_assignment(&[&c], 1)?;
    // librdkafka reports no position before the first record: let the reset happen first.
    let settle = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settle {
        ensure!(c.poll(Duration::from_millis(200)).is_none(), "read an old record");
    }
    let fresh = records(5, "new");
    produce(&t, 0, &fresh, &[])?;
    check("records after joining", read(&c, 5)?.iter().map(triple).collect(), fresh)?;
    Ok("only the 5 records produced after joining".into())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as i64
}

fn seek_timestamp() -> Result<String> {
    let t = topic("seek_timestamp", 1, "")?;
    let base = now_ms() - 60_000;
    let p = producer(&[])?;
    for (i, (k, v, _)) in records(5, "r").iter().enumerate() {
        p.send(BaseRecord::to(&t).partition(0).key(k).payload(v).timestamp(base + i as i64 * 1000))
            .map_err(|(e, _)| e)?;
    }
    p.flush(CALL)?;
    let c = assigned(&t, Offset::Beginning, &[])?;
    let mut q = TopicPartitionList::new();
    q.add_partition_offset(&t, 0, Offset::Offset(base + 2500))?;
    let found = c.offsets_for_times(q, CALL)?;
    let offset = found.find_partition(&t, 0).context("no answer")?.offset();
    check("offset for base+2.5s", offset, Offset::Offset(3))?;
    let c = assigned(&t, offset, &[])?;
    let m = read(&c, 1)?.remove(0);
    check("record", (triple(&m).1, m.timestamp().to_millis()), ("v-r-3".to_string(), Some(base + 3000)))?;
    Ok("offsets_for_times -> 3, read v-r-3".into())
}

/// Round-robin polls, committing each message synchronously; answers the values processed.
fn consume_some(cs: &[&BaseConsumer], n: usize) -> Result<Vec<String>> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + env().timeout / 2;
    while seen.len() < n {
        ensure!(Instant::now() < deadline, "consumed {} of {n}", seen.len());
        for c in cs {
            if let Some(m) = c.poll(Duration::from_millis(100)) {
                let m = m?;
                c.commit_message(&m, rdkafka::consumer::CommitMode::Sync)?;
                seen.push(triple(&m.detach()).1);
            }
        }
    }
    Ok(seen)
}

fn group_rebalance() -> Result<String> {
    let t = topic("group_rebalance", 3, "")?;
    let group = name("group_rebalance", "");
    let a = subscribed(&t, &group, "earliest", &[])?;
    wait_assignment(&[&a], 3)?;
    let b = subscribed(&t, &group, "earliest", &[])?;
    let sizes = wait_assignment(&[&a, &b], 3)?;
    let mut all = Vec::new();
    for p in 0..3 {
        let recs = records(10, &format!("p{p}"));
        produce(&t, p, &recs, &[])?;
        all.extend(recs.into_iter().map(|r| r.1));
    }
    let first = consume_some(&[&a, &b], 15)?;
    drop((a, b));
    let resumed = subscribed(&t, &group, "earliest", &[])?;
    let rest = vals(&read(&resumed, 30 - first.len())?);
    let got: BTreeSet<String> = first.iter().chain(rest.iter()).cloned().collect();
    check("records before and after the resume (no duplicates)", first.len() + rest.len(), 30)?;
    check("records before and after the resume", got, all.into_iter().collect())?;
    Ok(format!("assignment {sizes:?}, {} committed then {} resumed", first.len(), rest.len()))
}

fn member_leave_rejoin() -> Result<String> {
    let t = topic("member_leave_rejoin", 3, "")?;
    let group = name("member_leave_rejoin", "");
    let a = subscribed(&t, &group, "earliest", &[])?;
    let b = subscribed(&t, &group, "earliest", &[])?;
    wait_assignment(&[&a, &b], 3)?;
    drop(b);
    wait_assignment(&[&a], 3)?;
    let c = subscribed(&t, &group, "earliest", &[])?;
    let sizes = wait_assignment(&[&a, &c], 3)?;
    Ok(format!("after leave 3/3, after rejoin {sizes:?}"))
}

fn idempotent_produce() -> Result<String> {
    let t = topic("idempotent_produce", 1, "")?;
    let recs = records(200, "r");
    produce(&t, 0, &recs, &[("enable.idempotence", "true"), ("acks", "all")])?;
    let got: Vec<Rec> = read(&assigned(&t, Offset::Beginning, &[])?, 200)?.iter().map(triple).collect();
    check("records", got, recs)?;
    Ok("200 records once, in order".into())
}

fn txn_producer(id: &str) -> Result<BaseProducer> {
    let p = producer(&[("transactional.id", id), ("transaction.timeout.ms", "60000")])?;
    p.init_transactions(CALL)?;
    Ok(p)
}

fn txn_commit_abort() -> Result<String> {
    let t = topic("txn_commit_abort", 1, "")?;
    let p = txn_producer(&name("txn_commit_abort", ""))?;
    for (tag, n, commit) in [("c1", 5, true), ("a", 3, false), ("c2", 5, true)] {
        p.begin_transaction()?;
        send(&p, &t, 0, &records(n, tag))?;
        // abort_transaction purges records not yet sent: flush so the aborted ones exist.
        p.flush(CALL)?;
        if commit {
            p.commit_transaction(CALL)?;
        } else {
            p.abort_transaction(CALL)?;
        }
    }
    let rc = vals(&read(&assigned(&t, Offset::Beginning, &[("isolation.level", "read_committed")])?, 10)?);
    check("read_committed", rc, [values(5, "c1"), values(5, "c2")].concat())?;
    let ru = vals(&read(&assigned(&t, Offset::Beginning, &[("isolation.level", "read_uncommitted")])?, 13)?);
    check("read_uncommitted", ru, [values(5, "c1"), values(3, "a"), values(5, "c2")].concat())?;
    Ok("read_committed 10, read_uncommitted 13".into())
}

fn consume_process_produce() -> Result<String> {
    let src = topic("consume_process_produce", 1, "-in")?;
    let dst = topic("consume_process_produce", 1, "-out")?;
    let group = name("consume_process_produce", "");
    produce(&src, 0, &records(10, "r"), &[])?;
    let c = subscribed(&src, &group, "earliest", &[("isolation.level", "read_committed")])?;
    let inputs = read(&c, 10)?;
    let p = txn_producer(&name("consume_process_produce", ""))?;
    p.begin_transaction()?;
    let out: Vec<Rec> = inputs.iter().map(triple).map(|(k, v, _)| (k, format!("out-{v}"), vec![])).collect();
    send(&p, &dst, 0, &out)?;
    let position = c.position()?;
    let metadata = c.group_metadata().context("no group metadata")?;
    p.send_offsets_to_transaction(&position, &metadata, CALL)?;
    p.commit_transaction(CALL)?;
    let got = vals(&read(&assigned(&dst, Offset::Beginning, &[("isolation.level", "read_committed")])?, 10)?);
    check("output", got, values(10, "r").iter().map(|v| format!("out-{v}")).collect())?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(&src, 0);
    let committed = c.committed_offsets(tpl, CALL)?;
    check(
        "committed offset",
        committed.find_partition(&src, 0).map(|e| e.offset()),
        Some(Offset::Offset(10)),
    )?;
    Ok("10 outputs exact, committed offset 10".into())
}

fn fenced_code(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    e.rdkafka_error_code().filter(|c| {
        matches!(
            c,
            RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
        )
    })
}

/// p1 opens a transaction, p2 with the same id fences it, p1 tries to commit.
fn fenced_pair(scenario: &str) -> Result<(String, BaseProducer, BaseProducer, KafkaError)> {
    let t = topic(scenario, 1, "")?;
    let id = name(scenario, "");
    let p1 = txn_producer(&id)?;
    p1.begin_transaction()?;
    send(&p1, &t, 0, &records(1, "p1"))?;
    p1.flush(CALL)?;
    let p2 = txn_producer(&id)?;
    let err = match send(&p1, &t, 0, &records(1, "after")).and_then(|_| Ok(p1.flush(CALL)?)) {
        Err(e) => e.downcast::<KafkaError>()?,
        Ok(()) => match p1.commit_transaction(CALL) {
            Err(e) => e,
            Ok(()) => bail!("the fenced producer committed"),
        },
    };
    ensure!(fenced_code(&err).is_some(), "fencing error, got {err}");
    Ok((t, p1, p2, err))
}

fn txn_fencing() -> Result<String> {
    let (t, _p1, p2, err) = fenced_pair("txn_fencing")?;
    p2.begin_transaction()?;
    send(&p2, &t, 0, &records(1, "p2"))?;
    p2.commit_transaction(CALL)?;
    let got = vals(&read(&assigned(&t, Offset::Beginning, &[("isolation.level", "read_committed")])?, 1)?);
    check("read_committed after fencing", got, values(1, "p2"))?;
    Ok(format!("p1 got {:?}; p2 committed", fenced_code(&err)))
}

fn err_fenced_producer() -> Result<String> {
    let (_t, p1, _p2, err) = fenced_pair("err_fenced_producer")?;
    match p1.begin_transaction().and_then(|_| p1.commit_transaction(CALL)) {
        Err(again) => Ok(format!("{:?}; next transaction refused: {again}", fenced_code(&err))),
        Ok(()) => bail!("the fenced producer committed another transaction"),
    }
}

fn alter_config() -> Result<String> {
    let t = topic("alter_config", 1, "")?;
    let a = admin()?;
    let alter = AlterConfig::new(ResourceSpecifier::Topic(&t)).set("retention.ms", "3600000");
    for r in block_on(a.alter_configs(&[alter], &opts()))? {
        r.map_err(|(spec, code)| anyhow!("alter_configs {spec:?}: {code:?}"))?;
    }
    let described = block_on(a.describe_configs(&[ResourceSpecifier::Topic(&t)], &opts()))?;
    let res =
        described.into_iter().next().context("no answer")?.map_err(|c| anyhow!("describe_configs: {c:?}"))?;
    let value = res.get("retention.ms").and_then(|e| e.value.clone());
    check("retention.ms", value.as_deref(), Some("3600000"))?;
    Ok("AlterConfigs retention.ms=3600000 read back".into())
}

fn delete_records() -> Result<String> {
    let t = topic("delete_records", 1, "")?;
    produce(&t, 0, &records(10, "r"), &[])?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&t, 0, Offset::Offset(5))?;
    let res = block_on(admin()?.delete_records(&tpl, &opts()))?;
    if let Some(e) = res.find_partition(&t, 0) {
        e.error()?;
    }
    let c = assigned(&t, Offset::Beginning, &[])?;
    check("watermarks", c.fetch_watermarks(&t, 0, CALL)?, (5, 10))?;
    let offsets: Vec<i64> = read(&c, 5)?.iter().map(|m| m.offset()).collect();
    check("offsets from earliest", offsets, (5..10).collect())?;
    Ok("low watermark 5, earliest read starts at 5".into())
}

fn leader_kill() -> Result<String> {
    let t = topic("leader_kill", 1, "")?;
    let p = Arc::new(producer(&[
        ("acks", "all"),
        ("enable.idempotence", "true"),
        ("message.timeout.ms", "60000"),
    ])?);
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(Mutex::new(0usize));
    let worker = {
        let (p, stop, sent, t) = (p.clone(), stop.clone(), sent.clone(), t.clone());
        std::thread::spawn(move || -> Result<()> {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                // Flush every 10 records: what flush returned for is acknowledged.
                send(&p, &t, 0, &records(10, &format!("lk{i}")))?;
                p.flush(Duration::from_secs(60))?;
                *sent.lock().expect("lock") = i + 1;
                i += 1;
            }
            Ok(())
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let kill = std::env::var("COMPAT_KILL_LEADER").context("COMPAT_KILL_LEADER is not set")?;
    let status =
        std::process::Command::new("sh").arg("-c").arg(&kill).stdout(std::process::Stdio::null()).status()?;
    ensure!(status.success(), "COMPAT_KILL_LEADER failed: {status}");
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    worker.join().map_err(|_| anyhow!("producer thread panicked"))??;
    let batches = *sent.lock().expect("lock");
    ensure!(batches > 0, "nothing acknowledged");
    let acked: Vec<String> = (0..batches).flat_map(|i| values(10, &format!("lk{i}"))).collect();
    let got: BTreeSet<String> =
        vals(&read(&assigned(&t, Offset::Beginning, &[])?, acked.len())?).into_iter().collect();
    let lost = acked.iter().filter(|v| !got.contains(*v)).count();
    ensure!(lost == 0, "{lost} of {} acknowledged records lost", acked.len());
    Ok(format!("{} acked, all read back", acked.len()))
}

/// One committed transaction of txn_leader_kill: its number, when it began and when its commit
/// returned, and how long the commit call took.
struct Committed {
    seq: usize,
    began: Instant,
    done: Instant,
    commit: Duration,
}

/// Budget of one transaction step in txn_leader_kill: long enough that a slow election is
/// waited out inside the client, never taken for a failure.
const TXN_CALL: Duration = Duration::from_secs(60);
/// How long txn_leader_kill holds one transaction open, its records acknowledged, while the
/// kill starts.
const TXN_HOLD: Duration = Duration::from_secs(1);

fn kill_leader() -> Result<Duration> {
    let kill = std::env::var("COMPAT_KILL_LEADER").context("COMPAT_KILL_LEADER is not set")?;
    let started = Instant::now();
    let status =
        std::process::Command::new("sh").arg("-c").arg(&kill).stdout(std::process::Stdio::null()).status()?;
    ensure!(status.success(), "COMPAT_KILL_LEADER failed: {status}");
    Ok(started.elapsed())
}

/// Transactions (begin, one record to each of 3 partitions, commit) in a loop for 2 s, across
/// COMPAT_KILL_LEADER (started while one transaction is held open, its records acknowledged)
/// and 3 s after it. Passes only if no transaction step failed, every
/// committed transaction's records read back exactly once, in order, under read_committed, and
/// transactions committed after the kill.
fn txn_leader_kill() -> Result<String> {
    let t = topic("txn_leader_kill", 3, "")?;
    let id = name("txn_leader_kill", "");
    let p = producer(&[
        ("transactional.id", id.as_str()),
        ("transaction.timeout.ms", "60000"),
        ("message.timeout.ms", "60000"),
    ])?;
    p.init_transactions(TXN_CALL)?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    // The transaction under way (number, start) and the committed count, for a stuck loop's error.
    let current = Arc::new(Mutex::new((0usize, Instant::now(), 0usize)));
    // Once the kill is wanted, the next transaction to have its records acknowledged is held
    // open TXN_HOLD (its number goes in `held`) and the kill starts meanwhile: the kill always
    // lands inside an open transaction, never by chance between two.
    let kill_wanted = Arc::new(AtomicBool::new(false));
    let held = Arc::new(Mutex::new(None::<usize>));
    let (tx, rx) = mpsc::channel();
    {
        let (stop, t, current) = (stop.clone(), t.clone(), current.clone());
        let (kill_wanted, held) = (kill_wanted.clone(), held.clone());
        std::thread::spawn(move || {
            let mut done = Vec::new();
            let mut seq = 0;
            let failure = loop {
                if stop.load(Ordering::Relaxed) {
                    break None;
                }
                let began = Instant::now();
                *current.lock().expect("lock") = (seq, began, done.len());
                let mut commit = Duration::ZERO;
                let step = (|| -> Result<()> {
                    p.begin_transaction().context("begin")?;
                    for partition in 0..3 {
                        let v = format!("tlk-{seq}-p{partition}");
                        p.send(BaseRecord::to(&t).partition(partition).key(&v).payload(&v))
                            .map_err(|(e, _)| e)
                            .context("send")?;
                    }
                    p.flush(TXN_CALL).context("flush")?;
                    if kill_wanted.load(Ordering::Relaxed) && held.lock().expect("lock").is_none() {
                        *held.lock().expect("lock") = Some(seq);
                        std::thread::sleep(TXN_HOLD);
                    }
                    let at = Instant::now();
                    let r = p.commit_transaction(TXN_CALL);
                    commit = at.elapsed();
                    r.map_err(|e| match &e {
                        KafkaError::Transaction(te) => anyhow!(
                            "commit after {} ms: {e} (requires abort: {}, retriable: {}, fatal: {})",
                            commit.as_millis(),
                            te.txn_requires_abort(),
                            te.is_retriable(),
                            te.is_fatal()
                        ),
                        _ => anyhow!("commit after {} ms: {e}", commit.as_millis()),
                    })
                })();
                if let Err(e) = step {
                    break Some((seq, Instant::now(), format!("{e:#}")));
                }
                done.push(Committed { seq, began, done: Instant::now(), commit });
                seq += 1;
            };
            let _ = tx.send((done, failure));
        });
    }
    std::thread::sleep(Duration::from_secs(2));
    kill_wanted.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + TXN_CALL / 4;
    let held_seq = loop {
        if let Some(seq) = *held.lock().expect("lock") {
            break seq;
        }
        if let Ok((_, failure)) = rx.try_recv() {
            let (seq, _, e) = failure.context("the transaction loop ended before the kill")?;
            bail!("transaction {seq} failed before the kill: {e}");
        }
        if Instant::now() > deadline {
            let (seq, began, n) = *current.lock().expect("lock");
            bail!(
                "no transaction got its records acknowledged in {:?}: transaction {seq} began {:.1} s ago; {n} committed",
                TXN_CALL / 4,
                began.elapsed().as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let kill_began = Instant::now();
    let killed = kill_leader();
    let kill_ended = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    // Leave the reading-back a third of the scenario's budget.
    let wait = (env().timeout * 2 / 3).saturating_sub(started.elapsed()).max(Duration::from_secs(1));
    let (committed, failure) = match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Disconnected) => bail!("transaction thread panicked"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let (seq, began, n) = *current.lock().expect("lock");
            bail!(
                "transaction {seq} stuck {:.1} s after it began ({:.1} s after the kill began); {n} committed",
                began.elapsed().as_secs_f64(),
                kill_began.elapsed().as_secs_f64()
            );
        }
    };
    let took = killed?;
    let before = committed.iter().filter(|c| c.done < kill_began).count();
    let during = committed.iter().filter(|c| c.done >= kill_began && c.done < kill_ended).count();
    let after = committed.len() - before - during;
    let held_commit = committed
        .iter()
        .find(|c| c.seq == held_seq)
        .map(|c| format!(", its commit took {} ms", c.commit.as_millis()))
        .unwrap_or_default();
    let counts = format!(
        "{} committed: {before} before the kill, {during} during it ({:.1} s), {after} after; transaction {held_seq} held open across the kill{held_commit}",
        committed.len(),
        took.as_secs_f64()
    );
    if let Some((seq, at, e)) = failure {
        let when = if at >= kill_began {
            format!("{:.1} s after the kill began", (at - kill_began).as_secs_f64())
        } else {
            format!("{:.1} s before the kill", (kill_began - at).as_secs_f64())
        };
        bail!("transaction {seq} failed {when}: {e}; {counts}");
    }
    ensure!(before > 0, "no transaction committed before the kill; {counts}");
    ensure!(after > 0, "no transaction committed after the kill; {counts}");
    let longest = committed.iter().map(|c| c.done - c.began).max().unwrap_or_default();
    let longest_commit = committed.iter().map(|c| c.commit).max().unwrap_or_default();

    let group = name("txn_leader_kill", "-read");
    let c: BaseConsumer = config(&[
        ("group.id", group.as_str()),
        ("enable.auto.commit", "false"),
        ("isolation.level", "read_committed"),
    ])
    .create()?;
    let mut tpl = TopicPartitionList::new();
    for partition in 0..3 {
        tpl.add_partition_offset(&t, partition, Offset::Beginning)?;
    }
    c.assign(&tpl)?;
    let got = read(&c, committed.len() * 3)?;
    for partition in 0..3 {
        let want: Vec<String> = committed.iter().map(|c| format!("tlk-{}-p{partition}", c.seq)).collect();
        let have: Vec<String> =
            got.iter().filter(|m| m.partition() == partition).map(|m| triple(m).1).collect();
        exactly_once(&format!("partition {partition} under read_committed"), &have, &want)?;
    }
    Ok(format!(
        "{counts}; all {} records read back once under read_committed; longest transaction {} ms (commit call {} ms)",
        committed.len() * 3,
        longest.as_millis(),
        longest_commit.as_millis()
    ))
}

/// Whether `have` is exactly `want` (each once, in order); the error counts what differs.
fn exactly_once(what: &str, have: &[String], want: &[String]) -> Result<()> {
    if have == want {
        return Ok(());
    }
    let wanted: BTreeSet<&String> = want.iter().collect();
    let mut seen = BTreeSet::new();
    let dups = have.iter().filter(|v| !seen.insert(*v)).count();
    let missing: Vec<&String> = want.iter().filter(|v| !seen.contains(v)).collect();
    let extra: Vec<&String> = have.iter().filter(|v| !wanted.contains(v)).collect();
    bail!(
        "{what}: {} records, want {}; {} missing (e.g. {:?}), {dups} duplicated, {} unexpected (e.g. {:?}){}",
        have.len(),
        want.len(),
        missing.len(),
        missing.iter().take(3).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(3).collect::<Vec<_>>(),
        if missing.is_empty() && dups == 0 && extra.is_empty() { ", out of order" } else { "" }
    )
}

fn err_unknown_topic() -> Result<String> {
    struct Collect(Mutex<Option<KafkaError>>);
    impl rdkafka::ClientContext for Collect {}
    impl rdkafka::producer::ProducerContext for Collect {
        type DeliveryOpaque = ();
        fn delivery(&self, r: &rdkafka::message::DeliveryResult<'_>, _: ()) {
            if let Err((e, _)) = r {
                *self.0.lock().expect("lock") = Some(e.clone());
            }
        }
    }
    let p: BaseProducer<Collect> =
        config(&[("message.timeout.ms", "5000")]).create_with_context(Collect(Mutex::new(None)))?;
    p.send(BaseRecord::<(), str>::to(&name("err_unknown_topic", "-missing")).payload("x"))
        .map_err(|(e, _)| e)?;
    let _ = p.flush(Duration::from_secs(20));
    let err = p.context().0.lock().expect("lock").clone().context("no delivery error")?;
    let ok = [
        RDKafkaErrorCode::UnknownTopicOrPartition,
        RDKafkaErrorCode::UnknownTopic,
        RDKafkaErrorCode::MessageTimedOut,
    ];
    ensure!(err.rdkafka_error_code().is_some_and(|c| ok.contains(&c)), "unexpected error {err}");
    Ok(format!("delivery error {err}"))
}

fn err_offset_out_of_range() -> Result<String> {
    let t = topic("err_offset_out_of_range", 1, "")?;
    produce(&t, 0, &records(5, "r"), &[])?;
    let c = assigned(&t, Offset::Offset(100), &[("auto.offset.reset", "error")])?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(500)) {
            None => continue,
            Some(Ok(m)) => bail!("read a record at offset {}", m.offset()),
            Some(Err(e)) => {
                let code = e.rdkafka_error_code();
                ensure!(
                    matches!(
                        code,
                        Some(RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange)
                    ),
                    "unexpected error {e}"
                );
                return Ok(format!("{e}"));
            }
        }
    }
    bail!("no error for offset 100 of 5")
}

fn err_stale_generation() -> Result<String> {
    let t = topic("err_stale_generation", 2, "")?;
    let group = name("err_stale_generation", "");
    // librdkafka heartbeats in the background; exceeding max.poll.interval.ms makes it leave.
    let a = subscribed(
        &t,
        &group,
        "earliest",
        &[("session.timeout.ms", "6000"), ("max.poll.interval.ms", "6000")],
    )?;
    wait_assignment(&[&a], 2)?;
    let b = subscribed(&t, &group, "earliest", &[])?;
    std::thread::sleep(Duration::from_secs(8));
    wait_assignment(&[&b], 2)?;
    // librdkafka tells a member that overran max.poll.interval.ms through its next poll
    // (_MAX_POLL_EXCEEDED), as it does against Kafka; a synchronous commit without that poll
    // can wait, without a timeout, for a rejoin that only a poll starts.
    if let Some(Err(e)) = a.poll(Duration::from_millis(500)) {
        ensure!(e.rdkafka_error_code() == Some(RDKafkaErrorCode::PollExceeded), "unexpected poll error {e}");
        return Ok(format!("the kicked-out member's poll: {e}"));
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&t, 0, Offset::Offset(1))?;
    match a.commit(&tpl, rdkafka::consumer::CommitMode::Sync) {
        Ok(()) => bail!("a member kicked out of the group committed"),
        Err(e) => {
            let ok = [
                RDKafkaErrorCode::IllegalGeneration,
                RDKafkaErrorCode::UnknownMemberId,
                RDKafkaErrorCode::RebalanceInProgress,
                RDKafkaErrorCode::PollExceeded,
            ];
            ensure!(e.rdkafka_error_code().is_some_and(|c| ok.contains(&c)), "unexpected commit error {e}");
            Ok(format!("commit after being kicked out: {e}"))
        }
    }
}

fn scenario(id: &str) -> fn() -> Result<String> {
    match id {
        "create_topic" => create_topic,
        "produce_consume" => produce_consume,
        "compression" => compression,
        "consume_earliest" => consume_earliest,
        "consume_latest" => consume_latest,
        "seek_timestamp" => seek_timestamp,
        "group_rebalance" => group_rebalance,
        "member_leave_rejoin" => member_leave_rejoin,
        "idempotent_produce" => idempotent_produce,
        "txn_commit_abort" => txn_commit_abort,
        "consume_process_produce" => consume_process_produce,
        "txn_fencing" => txn_fencing,
        "alter_config" => alter_config,
        "delete_records" => delete_records,
        "leader_kill" => leader_kill,
        "txn_leader_kill" => txn_leader_kill,
        "err_unknown_topic" => err_unknown_topic,
        "err_offset_out_of_range" => err_offset_out_of_range,
        "err_stale_generation" => err_stale_generation,
        _ => err_fenced_producer,
    }
}

fn main() {
    let env = env();
    let version = format!("rdkafka 0.39 (librdkafka {})", rdkafka::util::get_rdkafka_version().1);
    let only: Vec<String> = std::env::var("COMPAT_SCENARIOS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    for id in SCENARIOS.iter().filter(|s| only.is_empty() || only.iter().any(|o| o == *s)) {
        let started = Instant::now();
        let (tx, rx) = mpsc::channel();
        let run = scenario(id);
        std::thread::spawn(move || {
            let _ = tx.send(run());
        });
        let (result, detail) = match rx.recv_timeout(env.timeout) {
            Ok(Ok(detail)) => ("pass", detail),
            Ok(Err(e)) => ("fail", format!("{e:#}")),
            Err(_) => ("fail", format!("scenario still running after {:?}", env.timeout)),
        };
        eprintln!("[{CLIENT}] {id}: {result} ({:.1} s) {detail}", started.elapsed().as_secs_f64());
        let line = serde_json::json!({"client": CLIENT, "version": version, "scenario": id, "result": result, "detail": detail});
        println!("{line}");
    }
    // Abandoned scenario threads must not keep the process alive.
    std::process::exit(0);
}
