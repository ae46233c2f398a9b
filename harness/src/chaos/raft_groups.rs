//! `--groups N` (issue 32): the cluster runs N Raft groups, and every fault hits every group of
//! the node it lands on. The bank and copier workloads spread their topics and transactional
//! ids over the groups, so their transactions span groups; the queue and share workloads stay
//! in group 0 (`placement`). Once the cluster is whole again each group must have come back:
//! every node names the same leader in the same term for each group it runs, and has applied
//! the same index of it. The workloads' own checks cover the data they placed; this covers
//! every group's replicas (elections, rejoins after a wiped disk, handovers and
//! preferred-leader moves under faults), including groups a workload left empty.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::checker::Violations;
use crate::Cluster;

/// How long the groups may take to agree once the cluster is whole: elections, a transfer back
/// to each preferred leader, a wiped node catching up.
const AGREE_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// One node's view of one group: leader, term, applied index.
type View = (Option<u64>, Option<u64>, Option<u64>);

/// Each group's view on every node, or the first node that did not answer.
fn views(cluster: &Cluster) -> Result<BTreeMap<u64, BTreeMap<u64, View>>, String> {
    let mut by_group: BTreeMap<u64, BTreeMap<u64, View>> = BTreeMap::new();
    for id in cluster.ids() {
        let status = cluster.status(id).map_err(|e| format!("node {id}: {e:#}"))?;
        for row in status.raft_groups["groups"].as_array().into_iter().flatten() {
            let Some(group) = row["group"].as_u64() else { continue };
            let view = (row["leader"].as_u64(), row["term"].as_u64(), row["last_applied"].as_u64());
            by_group.entry(group).or_default().insert(id, view);
        }
    }
    Ok(by_group)
}

/// The first group whose nodes disagree (or that has no leader), described; `None` once all
/// agree and there are `groups` of them.
fn disagreement(views: &BTreeMap<u64, BTreeMap<u64, View>>, groups: u32) -> Option<String> {
    if views.len() != groups as usize {
        return Some(format!("{} groups reported, {groups} configured: {views:?}", views.len()));
    }
    views.iter().find_map(|(group, nodes)| {
        let mut seen = nodes.values();
        let first = seen.next()?;
        let agreed = first.0.is_some() && seen.all(|v| v == first);
        (!agreed).then(|| format!("group {group}: {nodes:?} (node: (leader, term, applied))"))
    })
}

/// Waits until every group agrees on every node; a violation if one does not within
/// [`AGREE_TIMEOUT`]. Prints each group's leader once they agree.
pub fn groups_agree(cluster: &Cluster, groups: u32) -> Violations {
    let mut v = Violations::default();
    if groups < 2 {
        return v;
    }
    let started = Instant::now();
    loop {
        let problem = match views(cluster) {
            Ok(views) => match disagreement(&views, groups) {
                None => {
                    let leaders: Vec<String> = views
                        .iter()
                        .map(|(g, nodes)| {
                            format!("group {g}: node {:?}", nodes.values().next().and_then(|v| v.0))
                        })
                        .collect();
                    println!(
                        "raft groups agree {:.1} s after the cluster was whole: {}",
                        started.elapsed().as_secs_f64(),
                        leaders.join(", ")
                    );
                    return v;
                }
                Some(problem) => problem,
            },
            Err(e) => e,
        };
        if started.elapsed() > AGREE_TIMEOUT {
            v.add("raft group divergence", format!("after {AGREE_TIMEOUT:?}: {problem}"));
            return v;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(rows: &[(u64, u64, View)]) -> BTreeMap<u64, BTreeMap<u64, View>> {
        let mut out: BTreeMap<u64, BTreeMap<u64, View>> = BTreeMap::new();
        for (group, node, view) in rows {
            out.entry(*group).or_default().insert(*node, *view);
        }
        out
    }

    #[test]
    fn groups_agree_only_with_one_leader_term_and_index_each() {
        let agreed = of(&[
            (0, 1, (Some(1), Some(3), Some(9))),
            (0, 2, (Some(1), Some(3), Some(9))),
            (1, 1, (Some(2), Some(1), Some(4))),
            (1, 2, (Some(2), Some(1), Some(4))),
        ]);
        assert_eq!(disagreement(&agreed, 2), None);
        assert!(disagreement(&agreed, 3).is_some(), "a group missing");
        let behind = of(&[(0, 1, (Some(1), Some(3), Some(9))), (0, 2, (Some(1), Some(3), Some(8)))]);
        assert!(disagreement(&behind, 1).unwrap().contains("group 0"));
        let leaderless = of(&[(0, 1, (None, Some(3), Some(9))), (0, 2, (None, Some(3), Some(9)))]);
        assert!(disagreement(&leaderless, 1).is_some());
    }
}
