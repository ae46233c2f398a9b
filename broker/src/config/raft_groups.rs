//! The Raft groups' settings (docs/SCALING.md §2): how many groups the cluster runs, how many
//! voters each has and which, and how often a leader hands a group back to its preferred
//! leader. Cluster-wide and static: every node must be given the same values.
//!
//! - `onelog.raft.groups` (1–64, default 1: one group, today's cluster);
//! - `onelog.raft.replication.factor` (-1, the default, is min(3, nodes));
//! - `onelog.raft.group.<g>.voters` (node ids, preferred leader first), one key per group;
//! - `onelog.placement.rules` (`topic:PREFIX=TARGET`, `txn:…`, `group:…`, TARGET a group or
//!   `key:NAME`) and `onelog.placement.key.<key>` (the group a placement key is pinned to):
//!   where new topics and ids go (`Placement`), refused at start if a rule or pin cannot be;
//! - Kafka's `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`,
//!   which move a Raft group's leadership back as Kafka's move a partition's. onelog checks every
//!   30 s by default (Kafka: 300 s): a group's leader carries all of its partitions' writes, so
//!   an imbalance costs more than one partition's does.
//!
//! The layout itself (`onelog_state::xgroup::placement::Layout`) needs the nodes, which are
//! known only with the peers; `node.rs` computes it at start and refuses a bad one there.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;
use onelog_state::xgroup::placement::{Layout, LayoutSettings, Placement, PlacementError};

use super::Values;

/// `onelog.raft.group.<g>.voters`: the key's prefix and suffix.
const VOTERS_PREFIX: &str = "onelog.raft.group.";
const VOTERS_SUFFIX: &str = ".voters";

/// The replication factor `-1` stands for: Kafka's and KRaft's usual three, or every node of
/// a smaller cluster.
const DEFAULT_REPLICATION_FACTOR: usize = 3;

/// `onelog.placement.key.<key>`: the prefix of a placement key's pin.
const KEY_PIN_PREFIX: &str = "onelog.placement.key.";

/// Whether `key` is one of the keys named by a prefix: `onelog.raft.group.<g>.voters` (g a
/// decimal group number) or `onelog.placement.key.<key>`.
pub fn is_prefixed_key(key: &str) -> bool {
    voters_key_group(key).is_some() || key.strip_prefix(KEY_PIN_PREFIX).is_some_and(|k| !k.is_empty())
}

fn voters_key_group(key: &str) -> Option<u32> {
    let number = key.strip_prefix(VOTERS_PREFIX)?.strip_suffix(VOTERS_SUFFIX)?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}

/// The groups' settings as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftGroupSettings {
    pub groups: u32,
    /// `None`: min(3, nodes).
    pub replication_factor: Option<usize>,
    pub voters: BTreeMap<u32, Vec<u64>>,
    /// `auto.leader.rebalance.enable`.
    pub rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms.
    pub rebalance_interval_ms: u64,
    /// Where new topics and ids go: `onelog.placement.rules` and the key pins.
    pub placement: Placement,
}

/// `onelog.placement.rules` and the `onelog.placement.key.<key>` pins over `groups` groups.
fn placement(c: &Values, groups: u32) -> anyhow::Result<Placement> {
    let mut keys = BTreeMap::new();
    for (key, value) in c.with_prefix(KEY_PIN_PREFIX) {
        let name = &key[KEY_PIN_PREFIX.len()..];
        let g = value.trim().parse::<u32>().with_context(|| format!("{key}={value}: not a group number"))?;
        keys.insert(name.to_string(), g);
    }
    Placement::new(groups, c.text("onelog.placement.rules")?, keys).map_err(anyhow::Error::new)
}

impl RaftGroupSettings {
    pub(super) fn parse(c: &Values) -> anyhow::Result<Self> {
        let mut voters = BTreeMap::new();
        for (key, value) in c.with_prefix(VOTERS_PREFIX) {
            let Some(g) = voters_key_group(key) else { continue };
            let ids = value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|id| {
                    id.parse::<u64>().with_context(|| format!("{key}={value}: {id:?} is not a node id"))
                })
                .collect::<anyhow::Result<Vec<u64>>>()?;
            voters.insert(g, ids);
        }
        let rf = c.int("onelog.raft.replication.factor")?;
        let groups = c.int("onelog.raft.groups")? as u32;
        Ok(RaftGroupSettings {
            groups,
            placement: placement(c, groups)?,
            replication_factor: (rf > 0).then_some(rf as usize),
            voters,
            rebalance: c.bool("auto.leader.rebalance.enable")?,
            rebalance_interval_ms: (c.int("leader.imbalance.check.interval.seconds")?.max(1) as u64)
                .saturating_mul(1000),
        })
    }

    /// Every group's voters on a cluster of `nodes`, or the setting that is wrong.
    pub fn layout(&self, nodes: BTreeSet<u64>) -> Result<Layout, PlacementError> {
        let replication_factor =
            self.replication_factor.unwrap_or(DEFAULT_REPLICATION_FACTOR.min(nodes.len()));
        Layout::of(&LayoutSettings {
            nodes,
            groups: self.groups,
            replication_factor,
            voters: self.voters.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn settings(overrides: &[&str]) -> anyhow::Result<RaftGroupSettings> {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        Ok(BrokerConfig::from_overrides(&overrides)?.settings.raft_groups)
    }

    fn refusal(overrides: &[&str], nodes: &[u64]) -> String {
        match settings(overrides) {
            Err(e) => format!("{e:#}"),
            Ok(s) => s.layout(nodes.iter().copied().collect()).expect_err("refused").0,
        }
    }

    #[test]
    fn one_group_is_the_default_and_three_voters_at_most() {
        let s = settings(&[]).unwrap();
        assert_eq!(
            (s.groups, s.replication_factor, s.rebalance, s.rebalance_interval_ms),
            (1, None, true, 30_000)
        );
        assert_eq!(s.layout(BTreeSet::from([1])).unwrap().voters, vec![vec![1]]);
        let five =
            settings(&["onelog.raft.groups=2"]).unwrap().layout(BTreeSet::from([1, 2, 3, 4, 5])).unwrap();
        assert_eq!(five.voters, vec![vec![1, 2, 3], vec![2, 3, 4]]);
    }

    #[test]
    fn named_voters_and_the_replication_factor_are_read() {
        let s = settings(&[
            "onelog.raft.groups=2",
            "onelog.raft.replication.factor=2",
            "onelog.raft.group.1.voters=3, 1",
            "leader.imbalance.check.interval.seconds=2",
        ])
        .unwrap();
        assert_eq!(s.rebalance_interval_ms, 2_000);
        assert_eq!(s.layout(BTreeSet::from([1, 2, 3])).unwrap().voters, vec![vec![1, 2], vec![3, 1]]);
    }

    #[test]
    fn placement_rules_and_key_pins_are_read_and_bad_ones_refused() {
        let s = settings(&[
            "onelog.raft.groups=3",
            "onelog.placement.rules=topic:orders-=2,topic:app-=key:app",
            "onelog.placement.key.app=1",
        ])
        .unwrap();
        assert_eq!(s.placement.topic("orders-in", &BTreeMap::new()), Ok(2));
        assert_eq!(s.placement.topic("app-out", &BTreeMap::new()), Ok(1));
        let rule = refusal(&["onelog.raft.groups=3", "onelog.placement.rules=topic:x=3"], &[1, 2, 3]);
        assert!(rule.contains("onelog.placement.rules") && rule.contains("does not exist"), "{rule}");
        let pin = refusal(&["onelog.raft.groups=3", "onelog.placement.key.app=one"], &[1, 2, 3]);
        assert!(pin.contains("onelog.placement.key.app=one"), "{pin}");
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        assert!(refusal(&["onelog.raft.groups=65"], &[1]).contains("onelog.raft.groups"));
        let rf = refusal(&["onelog.raft.groups=3", "onelog.raft.replication.factor=4"], &[1, 2, 3]);
        assert!(rf.contains("onelog.raft.replication.factor 4"), "{rf}");
        let group = refusal(&["onelog.raft.groups=3", "onelog.raft.group.5.voters=1,2,3"], &[1, 2, 3]);
        assert!(group.contains("onelog.raft.group.5.voters names group 5"), "{group}");
        let node = refusal(&["onelog.raft.groups=2", "onelog.raft.group.1.voters=1,2,9"], &[1, 2, 3]);
        assert!(node.contains("names node 9"), "{node}");
        let few = refusal(&["onelog.raft.groups=2", "onelog.raft.group.1.voters=1,2"], &[1, 2, 3]);
        assert!(few.contains("fewer than onelog.raft.replication.factor 3"), "{few}");
        let bad = refusal(&["onelog.raft.group.1.voters=1,x"], &[1, 2, 3]);
        assert!(bad.contains("\"x\" is not a node id"), "{bad}");
        assert!(refusal(&["onelog.raft.group.x.voters=1"], &[1]).contains("unknown broker config"));
    }
}
