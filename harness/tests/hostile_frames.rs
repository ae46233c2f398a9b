//! Hostile frames against a live three-node cluster (issue 13): random bytes, huge and negative length
//! prefixes, truncated frames, versions out of range for every API key, garbage bodies for
//! every API key and version, corrupt record batches inside well-formed Produce requests, and
//! compact array lengths near u32::MAX in flexible versions. Each case gets its own
//! connection, to each node in turn, and must be answered (one response frame) or closed; no
//! node may exit or panic in a handler, each node's RSS must stay bounded, and a normal producer/consumer, running throughout, must
//! keep succeeding.
//!
//! Seeded: the seed is printed; `HOSTILE_SEED=<n>` replays a run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use harness::batch::{encode_batch, TestRecord};
use harness::check::assert_round_trip;
use harness::codec::{encode_request, length_prefixed};
use harness::raw_client::frame_with_header;
use harness::raw_ops::{create_topics_ok, produce_request, BatchFor};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

/// Partition segments of 1 MiB: this test writes little.
const SEGMENT_BYTES: u64 = 1 << 20;
/// The request read timeout the node runs with, so truncated frames close quickly (ms).
const READ_TIMEOUT_MS: u64 = 500;
/// The idle timeout the node runs with (ms): a garbage body can decode as a Produce with
/// acks=0, which gets no response, and the case then ends with the idle close.
const IDLE_TIMEOUT_MS: u64 = 1_000;
/// How long one case may take to be answered or closed.
/// (A garbage body can decode as a long-polling Fetch: FETCH_WAIT_MS_MAX is 30 s.)
const CASE_TIMEOUT: Duration = Duration::from_secs(40);
/// Cases in flight at once.
const CASES_IN_FLIGHT: usize = 16;
/// How much the node's resident memory may grow over the whole run (KiB).
const RSS_GROWTH_KIB_MAX: u64 = 256 * 1024;
/// The node's `socket.request.max.bytes` (Kafka's default).
const SOCKET_REQUEST_MAX_BYTES: i32 = 104_857_600;

#[tokio::test(flavor = "multi_thread")]
async fn hostile_frames_never_stop_the_node() {
    let options = ClusterOptions::new(NODES)
        .config("log.segment.bytes", SEGMENT_BYTES)
        .config("onelog.request.read.timeout.ms", READ_TIMEOUT_MS)
        .config("connections.max.idle.ms", IDLE_TIMEOUT_MS);
    let mut cluster = Cluster::start_with(options).expect("starting onelog");
    let seed = std::env::var("HOSTILE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("hostile_frames seed {seed} (replay: HOSTILE_SEED={seed} cargo test -p harness --test hostile_frames)");
    let result = scenario(&mut cluster, seed).await;
    cluster.unwrap_or_dump(result.with_context(|| format!("seed {seed}")));
}

/// Cases go to every node in turn: followers forward some requests to the leader.
const NODES: u64 = 3;

async fn scenario(cluster: &mut Cluster, seed: u64) -> Result<()> {
    let leader = cluster.leader()?;
    let leader_addr = cluster.kafka_addr(leader);
    let ids = cluster.ids();
    let addrs: Vec<_> = ids.iter().map(|id| cluster.kafka_addr(*id)).collect();
    let pids: Vec<u32> =
        ids.iter().map(|id| cluster.pid(*id).context("a node is not running")).collect::<Result<_>>()?;
    let mut client = RawClient::connect_negotiated(leader_addr).await?;
    create_topics_ok(&mut client, &[("steady", 1), ("hostile", 1)]).await?;
    drop(client);
    let rss_before: Vec<u64> = pids.iter().map(|pid| rss_kib(*pid)).collect::<Result<_>>()?;

    let steady = SteadyClient::start(leader_addr);
    let mut rng = StdRng::seed_from_u64(seed);
    let cases = all_cases(&mut rng)?;
    let case_count = cases.len();
    let started = Instant::now();
    let (answered, closed) = run_cases(&addrs, cases).await?;
    let elapsed = started.elapsed();
    let (ok, failed) = steady.stop().await;
    eprintln!(
        "{case_count} hostile cases over {NODES} nodes in {elapsed:?}: {answered} answered, {closed} closed; \
         steady client {ok} round trips"
    );

    for (i, id) in ids.iter().enumerate() {
        ensure!(cluster.is_running(*id), "node {id} exited");
        let rss_after = rss_kib(pids[i])?;
        let counters = listener_counters(cluster, *id)?;
        eprintln!("node {id}: RSS {} KiB -> {rss_after} KiB; {counters}", rss_before[i]);
        // A panic on input is a bug even though the node survives it.
        ensure!(counters["handler_panics"] == 0, "node {id}: handler tasks panicked: {counters}");
        ensure!(
            rss_after <= rss_before[i] + RSS_GROWTH_KIB_MAX,
            "node {id}: RSS grew from {} KiB to {rss_after} KiB (bound +{RSS_GROWTH_KIB_MAX} KiB)",
            rss_before[i]
        );
    }
    ensure!(
        failed.is_empty(),
        "the steady client failed {} times: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    ensure!(ok > 0, "the steady client completed no round trip");
    assert_round_trip(leader_addr, "steady", "after the hostile cases").await
}

/// One hostile input: a name for failure messages and the bytes sent on a fresh connection.
struct Case {
    name: String,
    bytes: Bytes,
}

fn case(name: impl Into<String>, bytes: impl Into<Bytes>) -> Case {
    Case { name: name.into(), bytes: bytes.into() }
}

fn all_cases(rng: &mut StdRng) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    random_bytes(rng, &mut cases);
    length_prefixes(&mut cases);
    truncated(rng, &mut cases)?;
    versions_out_of_range(&mut cases);
    garbage_bodies(rng, &mut cases);
    huge_compact_arrays(rng, &mut cases);
    corrupt_batches(rng, &mut cases)?;
    Ok(cases)
}

fn random_bytes(rng: &mut StdRng, cases: &mut Vec<Case>) {
    for i in 0..300 {
        let mut bytes = vec![0u8; rng.gen_range(1..4096)];
        rng.fill_bytes(&mut bytes);
        cases.push(case(format!("random bytes #{i} ({} bytes)", bytes.len()), bytes));
        // The same behind a plausible length prefix, so the body reaches the decoder.
        let mut body = vec![0u8; rng.gen_range(8..2048)];
        rng.fill_bytes(&mut body);
        cases.push(case(format!("random framed body #{i}"), length_prefixed(&body)));
    }
}

fn length_prefixes(cases: &mut Vec<Case>) {
    for len in [i32::MIN, -1, 0, 1, 7, SOCKET_REQUEST_MAX_BYTES + 1, i32::MAX] {
        let mut bytes = BytesMut::new();
        bytes.put_i32(len);
        bytes.put_slice(&[0u8; 32]);
        cases.push(case(format!("length prefix {len}"), bytes));
    }
}

fn truncated(rng: &mut StdRng, cases: &mut Vec<Case>) -> Result<()> {
    let whole = encode_request(1, 12, &kafka_protocol::messages::MetadataRequest::default())?;
    for _ in 0..16 {
        let cut = rng.gen_range(1..whole.len());
        cases.push(case(format!("Metadata v12 cut at {cut} of {}", whole.len()), whole.slice(..cut)));
    }
    Ok(())
}

/// Every API key kafka-protocol knows, at versions nobody serves.
fn versions_out_of_range(cases: &mut Vec<Case>) {
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        for version in [range.min - 1, range.max + 1, -1, i16::MIN, i16::MAX] {
            let frame = frame_with_header(key as i16, version, 7, &[0u8; 16]);
            cases.push(case(format!("{key:?} v{version}"), frame));
        }
    }
}

const GARBAGE_BODIES_PER_VERSION: usize = 4;

/// Random bodies for every API key at every version kafka-protocol knows.
fn garbage_bodies(rng: &mut StdRng, cases: &mut Vec<Case>) {
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        for version in range.min..=range.max {
            for i in 0..GARBAGE_BODIES_PER_VERSION {
                let mut body = vec![0u8; rng.gen_range(0..256)];
                rng.fill_bytes(&mut body);
                let frame = frame_with_header(key as i16, version, 9, &body);
                cases.push(case(format!("{key:?} v{version} random body #{i}"), frame));
                // Mostly zeros (empty strings and arrays, zero fields) with a few random bytes:
                // these often decode, so they reach the handlers.
                let mut body = vec![0u8; rng.gen_range(0..64)];
                for _ in 0..rng.gen_range(0..3) {
                    if !body.is_empty() {
                        let at = rng.gen_range(0..body.len());
                        body[at] = rng.gen();
                    }
                }
                let frame = frame_with_header(key as i16, version, 10, &body);
                cases.push(case(format!("{key:?} v{version} near-zero body #{i}"), frame));
            }
        }
    }
}

/// Unsigned varint, as flexible versions encode compact array lengths (length + 1).
fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// A compact array length near u32::MAX after `zeros` zero bytes (which read as zero-valued
/// fixed fields, null strings and empty arrays), so it lands on the first few fields of each
/// flexible request, whichever of them is an array.
fn huge_compact_arrays(rng: &mut StdRng, cases: &mut Vec<Case>) {
    for key in ApiKey::iter() {
        let range = key.valid_versions();
        if key.request_header_version(range.max) < 2 {
            continue; // no flexible version
        }
        for zeros in [0usize, 1, 2, 4, 6, 8, 10, 12, 16] {
            let mut body = BytesMut::new();
            body.put_bytes(0, zeros);
            put_uvarint(&mut body, u32::MAX - rng.gen_range(0..16));
            let mut tail = vec![0u8; rng.gen_range(0..64)];
            rng.fill_bytes(&mut tail);
            body.put_slice(&tail);
            let frame = frame_with_header(key as i16, range.max, 11, &body);
            cases.push(case(
                format!("{key:?} v{} huge compact array after {zeros} zero bytes", range.max),
                frame,
            ));
        }
    }
}

/// Offsets of v2 record batch fields (KIP-98 layout).
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const RECORDS_COUNT_AT: usize = 57;

/// Well-formed Produce v9 requests carrying broken batches: flipped bytes with the CRC left
/// wrong and with it recomputed, absurd record counts and batch lengths, wrong magic, and
/// compression flags over uncompressed bodies (garbage to every codec).
fn corrupt_batches(rng: &mut StdRng, cases: &mut Vec<Case>) -> Result<()> {
    let records: Vec<TestRecord> =
        (0..5).map(|i| TestRecord::new(format!("k{i}"), vec![b'v'; 64], 1_700_000_000_000)).collect();
    let good = encode_batch(&records)?;
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..40 {
        let mut batch = good.to_vec();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..batch.len());
            batch[at] ^= 1 << rng.gen_range(0..8);
        }
        let fix_crc = i % 2 == 1;
        if fix_crc {
            restamp_crc(&mut batch);
        }
        variants.push((
            format!("flipped bits #{i} (CRC {})", if fix_crc { "recomputed" } else { "stale" }),
            batch,
        ));
    }
    for count in [-1i32, 0, 6, 1_000_000, i32::MAX] {
        let mut batch = good.to_vec();
        batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
        restamp_crc(&mut batch);
        variants.push((format!("records count {count}"), batch));
    }
    for length in [-1i32, 0, 10, i32::MAX] {
        let mut batch = good.to_vec();
        batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        variants.push((format!("batch length {length}"), batch));
    }
    for magic in [0u8, 1, 3, 0xff] {
        let mut batch = good.to_vec();
        batch[MAGIC_AT] = magic;
        variants.push((format!("magic {magic}"), batch));
    }
    for codec in 1u8..=7 {
        let mut batch = good.to_vec();
        batch[ATTRIBUTES_AT + 1] = (batch[ATTRIBUTES_AT + 1] & !0x07) | codec;
        restamp_crc(&mut batch);
        variants.push((format!("codec {codec} over an uncompressed body"), batch));
    }
    for (name, batch) in variants {
        let request =
            produce_request(-1, &[BatchFor { topic: "hostile".into(), partition: 0, records: batch.into() }]);
        cases.push(case(format!("Produce v9, {name}"), encode_request(3, 9, &request)?));
    }
    Ok(())
}

/// Recomputes a v2 batch's CRC32C (attributes to end) after an edit.
fn restamp_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Sends every case on its own connection, `CASES_IN_FLIGHT` at a time; returns how many were
/// answered and how many closed. A case neither answered nor closed in time fails the test.
async fn run_cases(addrs: &[std::net::SocketAddr], cases: Vec<Case>) -> Result<(usize, usize)> {
    let (mut answered, mut closed) = (0, 0);
    let mut in_flight = JoinSet::new();
    let mut cases = cases.into_iter().enumerate();
    loop {
        while in_flight.len() < CASES_IN_FLIGHT {
            let Some((i, case)) = cases.next() else { break };
            let addr = addrs[i % addrs.len()];
            in_flight.spawn(async move {
                let outcome = tokio::time::timeout(CASE_TIMEOUT, send_case(addr, &case.bytes)).await;
                (format!("{} (to {addr})", case.name), outcome)
            });
        }
        let Some(done) = in_flight.join_next().await else { break };
        let (name, outcome) = done?;
        match outcome {
            Ok(Ok(Outcome::Answered)) => answered += 1,
            Ok(Ok(Outcome::Closed)) => closed += 1,
            Ok(Err(e)) => return Err(e.context(name)),
            Err(_) => bail!("{name}: neither answered nor closed within {CASE_TIMEOUT:?}"),
        }
    }
    Ok((answered, closed))
}

enum Outcome {
    /// One whole response frame came back.
    Answered,
    /// The node closed (or reset) the connection first.
    Closed,
}

async fn send_case(addr: std::net::SocketAddr, bytes: &[u8]) -> Result<Outcome> {
    let mut stream = TcpStream::connect(addr).await.context("connecting: is the node gone?")?;
    if stream.write_all(bytes).await.is_err() {
        return Ok(Outcome::Closed); // closed while we were still writing
    }
    let mut prefix = [0u8; 4];
    if stream.read_exact(&mut prefix).await.is_err() {
        return Ok(Outcome::Closed);
    }
    let len = i32::from_be_bytes(prefix);
    ensure!((4..=64 * 1024 * 1024).contains(&len), "response length prefix {len}");
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).await.context("a response cut short")?;
    Ok(Outcome::Answered)
}

/// A normal client producing and consuming in a loop while the hostile cases run.
struct SteadyClient {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<String>>,
    ok: Arc<AtomicU64>,
}

impl SteadyClient {
    fn start(addr: std::net::SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let (stop2, ok2) = (stop.clone(), ok.clone());
        let task = tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut round = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                round += 1;
                match assert_round_trip(addr, "steady", &format!("steady {round}")).await {
                    Ok(()) => ok2.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        failures.push(format!("round {round}: {e:#}"));
                        0
                    }
                };
            }
            failures
        });
        SteadyClient { stop, task, ok }
    }

    /// Stops after the round in progress; returns the successful rounds and the failures.
    async fn stop(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let failures = self.task.await.unwrap_or_else(|e| vec![format!("steady task: {e}")]);
        (self.ok.load(Ordering::Relaxed), failures)
    }
}

/// The `kafka_listener` counters of `GET /status`.
fn listener_counters(cluster: &Cluster, id: u64) -> Result<serde_json::Value> {
    let response = harness::admin_api::request(cluster.admin_addr(id), "GET", "/status")?;
    let status: serde_json::Value = serde_json::from_str(&response.text())?;
    Ok(status["kafka_listener"].clone())
}

/// Resident memory of `pid` (VmRSS, KiB).
fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS line")?;
    line.split_whitespace().nth(1).context("VmRSS value")?.parse().context("VmRSS number")
}
