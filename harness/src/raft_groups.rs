//! What the tests of a cluster running several Raft groups (issue 32) read from `/status`:
//! one group's row on one node, and the wait until every group is led by its preferred leader.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde_json::Value;

use crate::cluster::ClusterOptions;
use crate::Cluster;

const POLL: Duration = Duration::from_millis(100);

/// Topics and transactional ids whose name starts so are placed in group 2 by
/// [`start_three_groups`]'s rules.
pub const RULED_PREFIX: &str = "ruled-";

/// Topics and transactional ids named `xg0-…` are placed in group 0, `xg1-…` in group 1.
pub const GROUP0_PREFIX: &str = "xg0-";
pub const GROUP1_PREFIX: &str = "xg1-";

/// The rules of [`start_three_groups`]: topics, transactional ids and group ids named
/// `ruled-…` in group 2, `xg1-…` in group 1 and `xg0-…` in group 0.
pub fn three_group_rules() -> String {
    let (g0, g1, g2) = (GROUP0_PREFIX, GROUP1_PREFIX, RULED_PREFIX);
    format!(
        "topic:{g2}=2,txn:{g2}=2,group:{g2}=2,topic:{g1}=1,txn:{g1}=1,group:{g1}=1,topic:{g0}=0,txn:{g0}=0,\
         group:{g0}=0"
    )
}

/// Three nodes running three groups, each checking its groups' preferred leaders every second,
/// and placing topics and transactional ids by [`three_group_rules`].
pub fn start_three_groups() -> Result<Cluster> {
    let options = ClusterOptions::new(3)
        .config("onelog.raft.groups", 3)
        .config("leader.imbalance.check.interval.seconds", 1)
        .config("onelog.placement.rules", three_group_rules());
    let cluster = Cluster::start_with(options).context("starting 3 nodes with 3 groups")?;
    ensure!(cluster.has_admin_api(), "the broker has no --admin-listen: groups cannot be seen");
    Ok(cluster)
}

/// Group `g`'s row in node `id`'s `/status`.
pub fn group_row(cluster: &Cluster, id: u64, g: u64) -> Result<Value> {
    let status = cluster.status(id)?;
    let rows = status.raft_groups["groups"].as_array().context("raft_groups.groups")?;
    rows.iter()
        .find(|r| r["group"].as_u64() == Some(g))
        .cloned()
        .with_context(|| format!("node {id} runs no group {g}"))
}

/// The preferred leader of group `g` on nodes 1–3 with the default layout: `(g mod 3) + 1`.
pub fn preferred_of_three(g: u64) -> u64 {
    g % 3 + 1
}

/// Waits, at most `timeout`, until every node in `nodes` sees each of `groups` groups led by its
/// preferred leader on nodes 1–3, in one term for all of them; checks the voters (all three)
/// and the preferred leader each node reports.
pub async fn settle(
    cluster: &mut Cluster,
    nodes: &[u64],
    groups: u64,
    timeout: Duration,
) -> Result<Duration> {
    let started = Instant::now();
    loop {
        let mut problem = None;
        for g in 0..groups {
            let rows: Vec<Value> =
                nodes.iter().map(|id| group_row(cluster, *id, g)).collect::<Result<_>>()?;
            for row in &rows {
                ensure!(row["preferred_leader"].as_u64() == Some(preferred_of_three(g)), "group {g}: {row}");
                let mut voters: Vec<u64> = serde_json::from_value(row["voters"].clone())?;
                voters.sort_unstable();
                ensure!(voters == [1, 2, 3] || voters.is_empty(), "group {g}'s voters: {row}");
            }
            let agreed = rows
                .iter()
                .all(|r| r["leader"].as_u64() == Some(preferred_of_three(g)) && r["term"] == rows[0]["term"]);
            if !agreed {
                problem = Some(format!("group {g}: {rows:?}"));
            }
        }
        let Some(problem) = problem else { return Ok(started.elapsed()) };
        ensure!(started.elapsed() < timeout, "groups not on their preferred leaders: {problem}");
        tokio::time::sleep(POLL).await;
    }
}

/// Waits, at most `timeout`, until every node in `nodes` reports the same digest of group `g`
/// (`GET /digest?group=G`: the same applied index and the same bytes in every partition);
/// returns the highest log end offset summed over the group's partitions.
pub async fn digests_agree(cluster: &Cluster, nodes: &[u64], g: u64, timeout: Duration) -> Result<u64> {
    let started = Instant::now();
    loop {
        let digests: Vec<crate::admin_api::Digest> = nodes
            .iter()
            .map(|id| {
                crate::admin_api::group_digest(cluster.admin_addr(*id), g)
                    .with_context(|| format!("node {id}"))
            })
            .collect::<Result<_>>()?;
        let same = digests
            .windows(2)
            .all(|w| w[0].last_applied == w[1].last_applied && w[0].partitions == w[1].partitions);
        if same {
            return Ok(digests[0].partitions.iter().map(|p| p.log_end_offset.max(0) as u64).sum());
        }
        ensure!(
            started.elapsed() < timeout,
            "group {g}'s digests differ between nodes {nodes:?}: {digests:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The Java client's "13 physical, 10 logical" run (`TxnLiveRun`, harness/java) on `topic`
/// with `transactional_id`: its summary must show 13 physical and 10 logical transactions, and
/// read_committed must read exactly the 10 committed records.
pub async fn java_live_run(
    cluster: &Cluster,
    clients: crate::java::Clients,
    topic: &str,
    transactional_id: &str,
) -> Result<()> {
    crate::kafka::create_topics(&cluster.bootstrap(), &[(topic, 1)]).await?;
    let args =
        [cluster.bootstrap(), format!("--topic={topic}"), format!("--transactional-id={transactional_id}")];
    let summary = tokio::task::spawn_blocking(move || clients.run("TxnLiveRun", &args)).await??;
    let committed: Vec<String> =
        (0..5).map(|i| format!("batchA-{i}")).chain((0..5).map(|i| format!("batchB-{i}"))).collect();
    ensure!(summary["physical"] == 13 && summary["logical"] == 10, "{clients:?}: {summary}");
    let read = &summary["read_committed"]["values"];
    ensure!(*read == serde_json::json!(committed), "{clients:?} read_committed: {read}");
    Ok(())
}
