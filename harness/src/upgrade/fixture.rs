//! How an upgrade fixture's cluster runs, and its data directories on disk.
//!
//! The replicated membership holds every node's Raft and Kafka addresses, so a data directory
//! finds its peers only on the ports it was written with: the fixture's three nodes always run
//! on fixed ports ([`FIXTURE_BASE_PORT`], laid out as `scripts/cluster.sh` does), with a
//! SASL_PLAINTEXT listener for SCRAM and the ACL authorizer. The PLAINTEXT listener's
//! principal (`User:ANONYMOUS`) is a super user: the tools that write and read the fixture go
//! through it, and the ACLs are enforced on the SCRAM users of the SASL listener.
//!
//! Each node's data directory is archived as `node-<id>.tar.gz`. The Raft log's segments are
//! preallocated, zero-filled 64 MiB files (0.1.0 has no setting for their size): the archive is
//! made from a sparse copy (`cp --sparse=always`) with `tar --sparse`, so the zeros take no
//! room in it and unpack as holes (the same bytes when read).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::ClusterOptions;

/// Node `id` serves Kafka on 27091 + id, Raft on 27191 + id, the admin API on 27291 + id and
/// SASL_PLAINTEXT on 27391 + id: below Linux's ephemeral range (32768–60999), away from the
/// ports of `scripts/cluster.sh` (9092), the compatibility matrix (19092, 19392) and kgo (18092).
pub const FIXTURE_BASE_PORT: u16 = 27092;
/// Voters of the fixture's cluster.
pub const FIXTURE_NODES: u64 = 3;
/// The fixture's node ids.
pub fn node_ids() -> impl Iterator<Item = u64> {
    1..=FIXTURE_NODES
}

/// The second listener (SCRAM logins, ACLs enforced).
pub const SASL_LISTENER: &str = "SASL_PLAINTEXT";
/// Kafka's name for the ACL authorizer, which onelog maps to its own.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The configs every node of the fixture runs with, whichever build: the SASL mechanisms, the
/// authorizer, small partition segments, and no auto-creation (a typo must fail, not create).
pub fn node_configs() -> Vec<(String, String)> {
    [
        ("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512"),
        ("authorizer.class.name", STANDARD_AUTHORIZER),
        ("allow.everyone.if.no.acl.found", "false"),
        ("super.users", "User:ANONYMOUS;User:admin"),
        ("auto.create.topics.enable", "false"),
        ("log.segment.bytes", "1048576"),
        ("group.initial.rebalance.delay.ms", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Configs a build that loads the fixture adds: idle producer ids and transactional ids are
/// forgotten by wall-clock age (`producer.id.expiration.ms`, at most 24.8 days, and
/// `transactional.id.expiration.ms`), and the fixture is older than that on most days it is
/// read. The duties that forget them look first at start-up, before the node leads, then once
/// per interval: at the largest interval they do not look during a run, so what the old
/// release left is still there to compare. (Forgetting idle state on time is not what an
/// upgrade test checks.)
pub fn reader_configs() -> Vec<(String, String)> {
    let max = i32::MAX.to_string();
    [
        "producer.id.expiration.ms",
        "producer.id.expiration.check.interval.ms",
        "transactional.id.expiration.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "log.retention.check.interval.ms",
    ]
    .iter()
    .map(|k| (k.to_string(), max.clone()))
    .collect()
}

/// A three-node cluster on the fixture's ports with `configs`, of `binary` (`None`: the
/// current build, `ONELOG_BIN` or the debug build).
pub fn cluster_options(binary: Option<&Path>, configs: &[(String, String)]) -> ClusterOptions {
    let mut options = ClusterOptions::new(FIXTURE_NODES)
        .base_port(FIXTURE_BASE_PORT)
        .listener(SASL_LISTENER, SASL_LISTENER);
    options.binary = binary.map(Path::to_path_buf);
    for (key, value) in configs {
        options = options.config(key, value);
    }
    options
}

/// The fixture of release `version` in this repository: `harness/fixtures/<version>`.
pub fn fixture_dir(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(version)
}

/// Node `id`'s archive's file name.
pub fn archive_name(id: u64) -> String {
    format!("node-{id}.tar.gz")
}

/// Archives the data directory `data` (of a stopped node) as `archive`: a sparse copy first,
/// then `tar --sparse`, entries sorted and owned by 0, so the archive holds the data and not
/// the zeros of preallocated segments.
pub fn pack(data: &Path, archive: &Path) -> Result<()> {
    let staging = tempfile::Builder::new().prefix("onelog-fixture-pack-").tempdir()?;
    let copy = staging.path().join("data");
    run(Command::new("cp").arg("-a").arg("--sparse=always").arg(data).arg(&copy))?;
    run(Command::new("tar")
        .args(["--sparse", "--sort=name", "--owner=0", "--group=0", "--numeric-owner", "-czf"])
        .arg(archive)
        .arg("-C")
        .arg(&copy)
        .arg("."))
}

/// Unpacks `archive` into the (empty) data directory `data`.
pub fn unpack(archive: &Path, data: &Path) -> Result<()> {
    if !archive.is_file() {
        bail!("fixture archive {} is missing", archive.display());
    }
    std::fs::create_dir_all(data)?;
    run(Command::new("tar").arg("-xzf").arg(archive).arg("-C").arg(data))
}

fn run(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!("{command:?} failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}
