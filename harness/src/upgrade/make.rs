//! Making an upgrade fixture: three nodes of an old release on the fixture's ports, the data
//! set written with stock clients (`populate`), a restart of the whole cluster on the same
//! release (so the manifest shows what that release itself reads back from its directories),
//! the manifest read with `observe` and checked against what was written and against the
//! logins and ACLs (`verify`), then SIGTERM to every node and each data directory archived.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};

use super::fixture::{self, archive_name, node_ids};
use super::manifest::{Manifest, MANIFEST_FILE};
use super::observe::{observe, Target};
use super::populate::{check_written, populate};
use super::verify::verify;
use crate::Cluster;

/// What to make a fixture from, and where to put it.
pub struct MakeOptions {
    /// The old release's `onelog` (`scripts/release-binary.sh VERSION`).
    pub binary: PathBuf,
    pub release: String,
    pub commit: String,
    /// The fixture directory (its archives and manifest are replaced).
    pub out: PathBuf,
}

/// Longest wait for an agreed leader after the restart.
const LEADER_WAIT: Duration = Duration::from_secs(30);

/// Makes the fixture; returns its manifest.
pub fn make(options: &MakeOptions) -> Result<Manifest> {
    let configs = fixture::node_configs();
    let mut cluster = Cluster::start_with(fixture::cluster_options(Some(&options.binary), &configs))
        .with_context(|| format!("starting three nodes of {}", options.binary.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let result = rt.block_on(write_and_read(&mut cluster, options, &configs));
    let manifest = cluster.unwrap_or_dump(result);
    for id in node_ids() {
        let status = cluster.terminate(id)?;
        ensure!(status.success(), "node {id} exited with {status} after SIGTERM");
    }
    std::fs::create_dir_all(&options.out)?;
    for (id, name) in &manifest.archives {
        fixture::pack(&cluster.data_dir(*id), &options.out.join(name))?;
    }
    manifest.write(&options.out.join(MANIFEST_FILE))?;
    Ok(manifest)
}

async fn write_and_read(
    cluster: &mut Cluster,
    options: &MakeOptions,
    configs: &[(String, String)],
) -> Result<Manifest> {
    let written = populate(&cluster.bootstrap(), cluster.root()).await?;
    // A restart of every node on the same release: the manifest is what it reads back.
    for id in node_ids() {
        cluster.terminate(id)?;
    }
    cluster.start_all()?;
    cluster.wait_for_leader(LEADER_WAIT)?;
    let state = observe(&Target::of(cluster)?, &written.names).await?;
    let problems = check_written(&state);
    ensure!(
        problems.is_empty(),
        "the old release does not read back what was written:\n{}",
        problems.join("\n")
    );
    let manifest = Manifest {
        release: options.release.clone(),
        commit: options.commit.clone(),
        written_by: written.steps,
        node_configs: configs.iter().cloned().collect(),
        archives: node_ids().map(|id| (id, archive_name(id))).collect::<BTreeMap<_, _>>(),
        state,
    };
    verify(cluster, &manifest).await.context("the old release against its own manifest")?;
    Ok(manifest)
}

/// A fixture's node directories unpacked into a prepared (not started) cluster.
pub fn unpack_into(cluster: &Cluster, dir: &Path, manifest: &Manifest) -> Result<()> {
    for (id, name) in &manifest.archives {
        fixture::unpack(&dir.join(name), &cluster.data_dir(*id))?;
    }
    Ok(())
}
