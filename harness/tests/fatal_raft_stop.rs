//! Regression (issue 14): a node whose Raft core stopped on a fatal error kept serving Kafka
//! requests from frozen state — after "Raft node stopped on a fatal error; exiting" a node
//! answered Metadata for 20 minutes, because nothing refused requests and the orderly exit did
//! not always finish. Now the node refuses every request from the moment the fault is known
//! and a watchdog ends the process if the orderly exit has not within a bound.
//!
//! One follower of three runs with fault `raft-log-fsync-fails` (fault-injection build only),
//! armed by a file once it serves: its next fdatasync of a Raft log segment fails with EIO, as
//! a failing disk's would. A prober polls that node's log; once the "exiting" line is there,
//! every Kafka request it sends (on a new connection, and on one opened before the fault) must
//! go unanswered, and the admin API must not report the frozen state either. The second case also blocks the orderly exit after that line (flag
//! `fatal-exit-hangs`), as it was seen to hang: only the watchdog can end the process then.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::admin_api;
use harness::atomic::{send_atomic, Slice};
use harness::codec::encode_request;
use harness::probe::blocking_request;
use harness::raw_ops::create_topics_ok;
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const FAULT: &str = "raft-log-fsync-fails";
/// The fatal path's exit code (`broker::fatal::EXIT_CODE`, EX_SOFTWARE).
const FATAL_EXIT_CODE: i32 = 70;
/// The line `broker::fatal::stop` logs once requests are already refused.
const EXITING_LINE: &str = "Raft node stopped on a fatal error; exiting";
/// How long the test waits for the faulty node to exit before calling it a hang.
const EXIT_WAIT: Duration = Duration::from_secs(30);
/// Timeout of one probe request; an unanswered probe is what the test wants.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const METADATA_VERSION: i16 = 1;

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_whose_log_fsync_fails_refuses_every_request_and_exits() {
    run(&[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_whose_exit_hangs_after_a_failed_fsync_is_ended_by_the_watchdog() {
    run(&[("ONELOG_FAULT_FLAGS", "fatal-exit-hangs")]).await;
}

async fn run(extra_env: &[(&str, &str)]) {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1024 * 1024);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster, extra_env).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster, extra_env: &[(&str, &str)]) -> Result<()> {
    let leader = cluster.leader()?;
    let followers = cluster.followers()?;
    let (faulty, healthy) = (followers[0], followers[1]);
    let arm_file = cluster.dir(faulty).join("arm-fault");

    // Phase 1: restart one follower with the fault, unarmed; it serves like the others.
    cluster.kill9(faulty)?;
    let mut env = vec![
        ("ONELOG_FAULT".to_owned(), FAULT.to_owned()),
        ("ONELOG_FAULT_ARMED_BY".to_owned(), arm_file.display().to_string()),
    ];
    env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    cluster.set_node_env(faulty, env);
    cluster.start_node(faulty)?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    create_topics_ok(&mut client, &[("before", 1)]).await?;
    wait_until_known(cluster.kafka_addr(faulty), "before")?;

    // Phase 2: arm the fault; the next replicated entry fails the follower's fsync.
    let opened_before = TcpStream::connect(cluster.kafka_addr(faulty))?;
    let log_start = std::fs::metadata(cluster.log_path(faulty))?.len();
    let stop = Arc::new(AtomicBool::new(false));
    let prober = {
        let addrs = (cluster.kafka_addr(faulty), cluster.admin_addr(faulty));
        let (log, stop) = (cluster.log_path(faulty), stop.clone());
        std::thread::spawn(move || probe_after_fault(addrs, &log, log_start, opened_before, &stop))
    };
    std::fs::write(&arm_file, b"")?;
    let armed = Instant::now();
    send_atomic(&mut client, &[Slice { topic: "before", key: b"k", value: b"v" }])
        .await
        .context("a produce with two healthy nodes of three")?;

    // Phase 3: the faulty node exits on the fatal path, within a bound.
    let status = cluster.wait_exit(faulty, EXIT_WAIT)?;
    let exited_after = armed.elapsed();
    stop.store(true, Ordering::SeqCst);
    let probes = prober.join().expect("prober thread")?;
    let Some(status) = status else {
        bail!("node {faulty} still running {EXIT_WAIT:?} after its fsync failed (probes: {probes:?})");
    };
    ensure!(status.code() == Some(FATAL_EXIT_CODE), "node {faulty} stopped with {status}, not code 70");
    let log = cluster.log_tail(faulty, 200);
    ensure!(log.contains("fault injection: failing an fdatasync"), "the fault did not fire:\n{log}");
    ensure!(log.contains(EXITING_LINE), "no {EXITING_LINE:?} line:\n{log}");
    println!(
        "node {faulty} exited ({status}) {exited_after:?} after the fault was armed; \
         {} probes after its \"exiting\" line, none answered; exiting line to exit seen by the prober: {:?}",
        probes.after_line, probes.line_to_last_probe
    );

    // Phase 4: the other two keep serving, writes and a topic the dead node never heard of.
    send_atomic(&mut client, &[Slice { topic: "before", key: b"k2", value: b"v2" }]).await?;
    create_topics_ok(&mut client, &[("after", 1)]).await?;
    wait_until_known(cluster.kafka_addr(healthy), "after")?;
    cluster.check_none_exited()?;
    Ok(())
}

/// What the prober saw.
#[derive(Debug, Default)]
struct Probes {
    /// Requests sent once the "exiting" line was in the log (each went unanswered).
    after_line: usize,
    /// From first seeing the line to the last unanswered probe.
    line_to_last_probe: Option<Duration>,
}

/// Until `stop`: once the node's log (past `log_start`) holds the "exiting" line, sends
/// Metadata on the connection opened before the fault, then on new connections, and asks the
/// admin API for `/status`; fails on the first answer (an admin 503 is a refusal).
fn probe_after_fault(
    (addr, admin): (SocketAddr, SocketAddr),
    log: &std::path::Path,
    log_start: u64,
    mut opened_before: TcpStream,
    stop: &AtomicBool,
) -> Result<Probes> {
    let mut probes = Probes::default();
    let mut line_seen = None;
    while !stop.load(Ordering::SeqCst) {
        if line_seen.is_none() {
            let text = std::fs::read(log)?;
            let fresh = String::from_utf8_lossy(&text[log_start as usize..]);
            if !fresh.contains(EXITING_LINE) {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            line_seen = Some(Instant::now());
            ensure!(
                !answers(&mut opened_before)?,
                "a connection opened before the fault got an answer after the \"exiting\" line"
            );
            probes.after_line += 1;
        }
        let request = MetadataRequest::default().with_topics(Some(Vec::new()));
        if let Ok(response) = blocking_request(addr, METADATA_VERSION, &request, PROBE_TIMEOUT) {
            bail!("answered Metadata after its \"exiting\" line: controller {:?}", response.controller_id);
        }
        if let Ok(status) = admin_api::status(admin) {
            bail!("answered GET /status after its \"exiting\" line: {status:?}");
        }
        probes.after_line += 2;
        probes.line_to_last_probe = line_seen.map(|t| t.elapsed());
    }
    Ok(probes)
}

/// Whether a Metadata request on `stream` gets any response bytes back.
fn answers(stream: &mut TcpStream) -> Result<bool> {
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    let request = MetadataRequest::default().with_topics(Some(Vec::new()));
    if stream.write_all(&encode_request(0, METADATA_VERSION, &request)?).is_err() {
        return Ok(false);
    }
    let mut length = [0u8; 4];
    Ok(stream.read_exact(&mut length).is_ok())
}

/// Waits until `addr` answers Metadata for `topic` without an error.
fn wait_until_known(addr: SocketAddr, topic: &str) -> Result<()> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))]));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = blocking_request(addr, METADATA_VERSION, &request, PROBE_TIMEOUT)?;
        if response.topics.iter().all(|t| t.error_code == 0) {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "{addr} does not know topic {topic:?} after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}
