//! Consume-process-produce with a SIGKILL of the client strictly between produce and commit
//! (issue #5, acceptance test 2; the EOS article's live run, shared/seeds/kafka-eos-live-run-ru).
//!
//! Attempt A (`txn-worker --hang-before-commit`) reads 10 inputs as group G, writes 10 outputs
//! and sends the input offsets to its transaction, then announces READY-TO-COMMIT and sleeps; the
//! test kills it with SIGKILL. The outputs are on disk but invisible to read_committed, and the
//! group's offset has not moved (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
//! while the dead transaction holds its pending offset). Attempt B, with the same
//! transactional.id, fences A in init_transactions (aborting A's transaction), reads the same 10
//! inputs again and commits: read_committed sees every output exactly once (10),
//! read_uncommitted all 20 physical records, and the group's offset is 10.

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::{client_config, create_topics};
use harness::raw_ops::topic_name;
use harness::txn::{committed_offset, read_values, READ_COMMITTED, READ_UNCOMMITTED};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::UNSTABLE_OFFSET_COMMIT;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetFetchRequest};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Offset;

const INPUT: &str = "eos-input";
const OUTPUT: &str = "eos-output";
const GROUP: &str = "eos-group";
const TRANSACTIONAL_ID: &str = "eos-worker";
const RECORDS: usize = 10;
/// Longest a worker may take to reach its marker or to finish.
const WORKER_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread")]
async fn consume_process_produce_survives_sigkill_between_produce_and_commit() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = sigkill_scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn sigkill_scenario(cluster: &mut Cluster) -> Result<()> {
    cluster.wait_for_leader(Duration::from_secs(30))?;
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(INPUT, 1), (OUTPUT, 1)]).await?;
    produce_inputs(&bootstrap).await?;
    let dir = cluster.root().join("txn-worker");
    std::fs::create_dir_all(&dir)?;

    // Attempt A: killed with its outputs on disk and its transaction open.
    let marker = dir.join("attempt-a.ready");
    let mut attempt_a = Worker::spawn(&bootstrap, dir.join("attempt-a.log"), Some(&marker))?;
    attempt_a.wait_for(&marker)?;
    let status = attempt_a.kill9()?;
    println!("attempt A: READY-TO-COMMIT seen, killed: {status}");
    ensure!(status.signal() == Some(libc::SIGKILL), "attempt A ended with {status}, not SIGKILL");

    let before = Figures::read(cluster, &bootstrap).await?;
    println!("before the retry: {before}");
    ensure!(before.read_committed.is_empty(), "read_committed sees the killed attempt: {before}");
    ensure!(before.read_uncommitted.len() == RECORDS, "attempt A's outputs are on disk: {before}");
    ensure!(before.group_offset == Offset::Invalid, "the group's offset moved: {before}");
    ensure!(before.stable_fetch.1 == UNSTABLE_OFFSET_COMMIT, "require_stable while open: {before}");

    // Attempt B: same transactional.id and group; fences A, re-reads the same inputs, commits.
    let mut attempt_b = Worker::spawn(&bootstrap, dir.join("attempt-b.log"), None)?;
    let status = attempt_b.wait()?;
    ensure!(status.success(), "attempt B ended with {status}:\n{}", attempt_b.log());

    let after = Figures::read(cluster, &bootstrap).await?;
    println!("after the retry: {after}");
    let expected: Vec<String> = (0..RECORDS).map(|i| format!("processed-input-{i}")).collect();
    ensure!(after.read_committed == expected, "read_committed must see each output once: {after}");
    ensure!(after.read_uncommitted.len() == 2 * RECORDS, "10 aborted + 10 committed on disk: {after}");
    ensure!(after.group_offset == Offset::Offset(RECORDS as i64), "group offset: {after}");
    ensure!(after.stable_fetch == (RECORDS as i64, 0), "require_stable after the commit: {after}");
    Ok(())
}

async fn produce_inputs(bootstrap: &str) -> Result<()> {
    let producer: FutureProducer = client_config(bootstrap).set("acks", "all").create()?;
    for i in 0..RECORDS {
        let (key, value) = (format!("key-{i}"), format!("input-{i}"));
        producer
            .send(FutureRecord::to(INPUT).key(&key).payload(&value), Duration::from_secs(30))
            .await
            .map_err(|(e, _)| anyhow::anyhow!("producing {value}: {e}"))?;
    }
    Ok(())
}

/// What the scenario checks at each verify step.
struct Figures {
    read_committed: Vec<String>,
    read_uncommitted: Vec<String>,
    /// The group's committed offset of the input, asked without require_stable.
    group_offset: Offset,
    /// (offset, error code) of OffsetFetch v7 with require_stable, from the leader.
    stable_fetch: (i64, i16),
}

impl Figures {
    async fn read(cluster: &mut Cluster, bootstrap: &str) -> Result<Self> {
        let leader = cluster.leader()?;
        let leader = cluster.kafka_addr(leader);
        Ok(Figures {
            read_committed: read_values(bootstrap, OUTPUT, 1, READ_COMMITTED)?,
            read_uncommitted: read_values(bootstrap, OUTPUT, 1, READ_UNCOMMITTED)?,
            group_offset: committed_offset(bootstrap, GROUP, INPUT, 0)?,
            stable_fetch: fetch_stable(&mut RawClient::connect_negotiated(leader).await?).await?,
        })
    }
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "output read_committed={} read_uncommitted={}, group offset {:?}, \
             require_stable OffsetFetch (offset, error) {:?}; read_committed values {:?}",
            self.read_committed.len(),
            self.read_uncommitted.len(),
            self.group_offset,
            self.stable_fetch,
            self.read_committed
        )
    }
}

/// OffsetFetch v7 with require_stable (KIP-447) of the group's input partition.
async fn fetch_stable(client: &mut RawClient) -> Result<(i64, i16)> {
    let topics =
        vec![OffsetFetchRequestTopic::default().with_name(topic_name(INPUT)).with_partition_indexes(vec![0])];
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_topics(Some(topics))
        .with_require_stable(true);
    let response = client.request(7, &request).await.context("OffsetFetch v7")?;
    ensure!(response.error_code == 0, "OffsetFetch v7: error {}", response.error_code);
    let p = response.topics.first().and_then(|t| t.partitions.first()).context("one partition")?;
    Ok((p.committed_offset, p.error_code))
}

/// A `txn-worker` process with its stdout and stderr in a file; killed if dropped running.
struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn spawn(bootstrap: &str, log: PathBuf, hang_marker: Option<&Path>) -> Result<Self> {
        let out = File::create(&log)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_txn-worker"));
        command.args(["--bootstrap", bootstrap, "--input", INPUT, "--output", OUTPUT, "--group", GROUP]);
        command.args(["--transactional-id", TRANSACTIONAL_ID, "--count", &RECORDS.to_string()]);
        if let Some(marker) = hang_marker {
            command.arg("--hang-before-commit").arg(marker);
        }
        command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        Ok(Worker { child: command.spawn().context("spawning txn-worker")?, log })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("<{}: {e}>", self.log.display()))
    }

    /// Waits until the worker wrote `marker`; fails if it exits first.
    fn wait_for(&mut self, marker: &Path) -> Result<()> {
        let deadline = Instant::now() + WORKER_TIMEOUT;
        while !marker.exists() {
            if let Some(status) = self.child.try_wait()? {
                bail!("worker exited ({status}) before {}:\n{}", marker.display(), self.log());
            }
            if Instant::now() > deadline {
                bail!("no {} within {WORKER_TIMEOUT:?}:\n{}", marker.display(), self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// SIGKILL, then reap.
    fn kill9(&mut self) -> Result<ExitStatus> {
        self.child.kill().context("SIGKILL")?;
        Ok(self.child.wait()?)
    }

    /// Waits for the worker to exit on its own.
    fn wait(&mut self) -> Result<ExitStatus> {
        let deadline = Instant::now() + WORKER_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("worker still running after {WORKER_TIMEOUT:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
