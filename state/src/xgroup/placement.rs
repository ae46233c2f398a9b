//! Placement (docs/SCALING.md §2): which nodes vote in each Raft group, and which group holds
//! a topic, a transactional id or a consumer, Streams or share group.
//!
//! Pure and deterministic, so every node computes the same layout from the same settings and
//! a leader places a new topic as any other would. Everything an operator can get wrong is
//! refused here with a message that names the setting, the group or node and the problem
//! ([`PlacementError`]); nothing is placed from a half-valid setting.
//!
//! - Voters: group g's are the R nodes (g + i) mod n in id order, i in 0 … R-1, unless
//!   `onelog.raft.group.<g>.voters` names them; its first voter is its preferred leader, so
//!   with as many groups as nodes each node leads one.
//! - A topic: its config `onelog.raft.group`, else the group of its `onelog.placement.key`,
//!   else the hash of its name. Recorded at creation (a later step), never recomputed.
//! - An id (transactional id, group id): the first `onelog.placement.rules` entry of its kind
//!   whose prefix matches, else the hash of the id. A placement key's group: its pin
//!   (`onelog.placement.key.<key>`), else its hash. So a key names one transaction domain: an
//!   application's input, output, transactional ids and consumer group can share it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::GroupId;

/// How many Raft groups a cluster may have: each is an openraft instance, a log and its
/// checkpoints on every voter, and the transport names it in every frame.
pub const RAFT_GROUPS_MAX: u32 = 64;

/// The topic config that pins a topic to a group.
pub const TOPIC_GROUP_CONFIG: &str = "onelog.raft.group";
/// The topic config that places a topic with its placement key.
pub const TOPIC_KEY_CONFIG: &str = "onelog.placement.key";

/// Whether `name` is one of the topic configs that place a topic. Neither is in
/// `topic_config::TOPIC_CONFIGS`: they are taken at creation only, where group 0's leader
/// decides the group and records it as [`TOPIC_GROUP_CONFIG`] (`Placement::topic`); a later
/// change is refused and a replacing AlterConfigs keeps them (`configs::altered`), since moving
/// a topic between groups is not supported.
pub fn is_topic_placement_config(name: &str) -> bool {
    name == TOPIC_GROUP_CONFIG || name == TOPIC_KEY_CONFIG
}

/// The group a topic was placed in, as recorded in its configs in group 0's state: 0 without
/// [`TOPIC_GROUP_CONFIG`], as for every topic of a one-group cluster.
pub fn recorded_topic_group(configs: &BTreeMap<String, String>) -> GroupId {
    configs.get(TOPIC_GROUP_CONFIG).and_then(|g| g.trim().parse().ok()).unwrap_or(0)
}

/// Whether group `group`'s copy of a topic with `configs` holds the topic's data: group 0 has
/// every topic's metadata, and so has every group of a cluster that places its consumer groups
/// (`features::GROUP_PLACEMENT`, for their assignments and commits), but each holds the data
/// of the topics placed in it only (the others' partitions there stay empty).
pub fn holds_topic_data(group: GroupId, configs: &BTreeMap<String, String>) -> bool {
    recorded_topic_group(configs) == group
}

/// Why a placement config's value cannot be, whatever the group count; the count itself is
/// checked by `Placement::topic`.
pub fn topic_config_value_problem(name: &str, value: &str) -> Option<String> {
    let bad = |why: &str| Some(format!("Invalid value {value} for configuration {name}: {why}"));
    match name {
        TOPIC_GROUP_CONFIG if value.trim().parse::<GroupId>().is_err() => bad("not a Raft group number"),
        TOPIC_KEY_CONFIG if value.trim().is_empty() => bad("a placement key must name a key"),
        TOPIC_KEY_CONFIG if value.chars().count() > TOPIC_KEY_CHARS_MAX => {
            bad(&format!("longer than {TOPIC_KEY_CHARS_MAX} characters"))
        }
        _ => None,
    }
}

/// Longest placement key accepted: a topic name's limit.
pub const TOPIC_KEY_CHARS_MAX: usize = 249;

/// A placement setting refused, with the reason in the words an operator reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementError(pub String);

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlacementError {}

fn refuse<T>(message: String) -> Result<T, PlacementError> {
    Err(PlacementError(message))
}

/// What each group's voters are: `voters[g]`, preferred leader first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub voters: Vec<Vec<u64>>,
}

/// The settings the layout is computed from: the cluster's members, `onelog.raft.groups`,
/// `onelog.raft.replication.factor` and any `onelog.raft.group.<g>.voters`.
#[derive(Debug, Clone, Default)]
pub struct LayoutSettings {
    pub nodes: BTreeSet<u64>,
    pub groups: u32,
    pub replication_factor: usize,
    pub voters: BTreeMap<GroupId, Vec<u64>>,
}

impl Layout {
    /// Every group's voters, or the first problem found.
    pub fn of(settings: &LayoutSettings) -> Result<Layout, PlacementError> {
        let LayoutSettings { nodes, groups, replication_factor: r, .. } = settings;
        check_group_count(*groups)?;
        if *r == 0 || *r > nodes.len() {
            let n = nodes.len();
            return refuse(format!("onelog.raft.replication.factor {r} must be between 1 and the {n} nodes"));
        }
        if let Some(g) = settings.voters.keys().find(|g| **g >= *groups) {
            return refuse(format!(
                "onelog.raft.group.{g}.voters names group {g}, but the cluster has {groups} groups (0–{})",
                groups - 1
            ));
        }
        let ids: Vec<u64> = nodes.iter().copied().collect();
        let voters = (0..*groups)
            .map(|g| match settings.voters.get(&g) {
                Some(named) => named_voters(g, named, nodes, *r),
                None => Ok((0..*r).map(|i| ids[(g as usize + i) % ids.len()]).collect()),
            })
            .collect::<Result<_, _>>()?;
        Ok(Layout { voters })
    }

    /// Group `g`'s preferred leader: its first voter.
    pub fn preferred_leader(&self, g: GroupId) -> Option<u64> {
        self.voters.get(g as usize).and_then(|v| v.first().copied())
    }
}

fn check_group_count(groups: u32) -> Result<(), PlacementError> {
    if groups == 0 || groups > RAFT_GROUPS_MAX {
        return refuse(format!("onelog.raft.groups {groups} must be between 1 and {RAFT_GROUPS_MAX}"));
    }
    Ok(())
}

/// `onelog.raft.group.<g>.voters`, checked: members only, no repeats, at least R of them.
fn named_voters(
    g: GroupId,
    named: &[u64],
    nodes: &BTreeSet<u64>,
    r: usize,
) -> Result<Vec<u64>, PlacementError> {
    let setting = format!("onelog.raft.group.{g}.voters");
    if let Some(unknown) = named.iter().find(|id| !nodes.contains(id)) {
        let members: Vec<String> = nodes.iter().map(u64::to_string).collect();
        return refuse(format!(
            "{setting} names node {unknown}, which is not a member ({})",
            members.join(", ")
        ));
    }
    let distinct: BTreeSet<&u64> = named.iter().collect();
    if distinct.len() != named.len() {
        return refuse(format!("{setting} names a node twice"));
    }
    if named.len() < r {
        return refuse(format!(
            "group {g} has {} voters ({setting}), fewer than onelog.raft.replication.factor {r}",
            named.len()
        ));
    }
    Ok(named.to_vec())
}

/// Which ids a placement rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// Transactional ids (`txn:`).
    Txn,
    /// Consumer, Streams and share group ids (`group:`).
    Group,
    /// Names of new topics that name neither a group nor a placement key (`topic:`): so a
    /// topic created by a tool that sends only Kafka's own configs (`kafka-topics.sh` refuses
    /// any other name before it asks the broker) can be placed too.
    Topic,
}

/// Where a rule sends the ids it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Key(String),
    Group(GroupId),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub kind: IdKind,
    pub prefix: String,
    pub target: Target,
}

/// The placement of a cluster of `groups` groups: rules for ids and pinned keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    groups: u32,
    rules: Vec<Rule>,
    keys: BTreeMap<String, GroupId>,
}

impl Placement {
    /// `rules` is `onelog.placement.rules` (comma-separated `txn:PREFIX=TARGET`,
    /// `group:PREFIX=TARGET` or `topic:PREFIX=TARGET`, TARGET a group number or `key:NAME`); `keys` the
    /// `onelog.placement.key.<key>` pins.
    pub fn new(
        groups: u32,
        rules: &str,
        keys: BTreeMap<String, GroupId>,
    ) -> Result<Placement, PlacementError> {
        check_group_count(groups)?;
        if let Some((key, g)) = keys.iter().find(|(_, g)| **g >= groups) {
            return refuse(format!("onelog.placement.key.{key}: {}", no_such_group(*g, groups)));
        }
        let rules = rules.split(',').map(str::trim).filter(|r| !r.is_empty());
        let rules = rules.map(|r| parse_rule(r, groups)).collect::<Result<_, _>>()?;
        Ok(Placement { groups, rules, keys })
    }

    /// One group holding everything: today's cluster.
    pub fn single() -> Placement {
        Placement { groups: 1, rules: Vec::new(), keys: BTreeMap::new() }
    }

    pub fn groups(&self) -> u32 {
        self.groups
    }

    /// A new topic's group, from its configs (`onelog.raft.group`, `onelog.placement.key`).
    pub fn topic(&self, name: &str, configs: &BTreeMap<String, String>) -> Result<GroupId, PlacementError> {
        if let Some(value) = configs.get(TOPIC_GROUP_CONFIG) {
            let g = value
                .trim()
                .parse::<GroupId>()
                .map_err(|_| PlacementError(format!("{TOPIC_GROUP_CONFIG}={value} is not a group number")))?;
            if g >= self.groups {
                return refuse(format!("{TOPIC_GROUP_CONFIG}={value}: {}", no_such_group(g, self.groups)));
            }
            return Ok(g);
        }
        match configs.get(TOPIC_KEY_CONFIG).map(|key| key.trim()) {
            Some("") => refuse(format!("{TOPIC_KEY_CONFIG} must name a key")),
            Some(key) => Ok(self.key(key)),
            None => Ok(self.id(IdKind::Topic, name)),
        }
    }

    /// The group of a transactional id or a group id.
    pub fn id(&self, kind: IdKind, id: &str) -> GroupId {
        let rule = self.rules.iter().find(|r| r.kind == kind && id.starts_with(&r.prefix));
        match rule.map(|r| &r.target) {
            Some(Target::Group(g)) => *g,
            Some(Target::Key(key)) => self.key(key),
            None => hash_group(id, self.groups),
        }
    }

    /// A placement key's group: pinned, else its hash.
    pub fn key(&self, key: &str) -> GroupId {
        self.keys.get(key).copied().unwrap_or_else(|| hash_group(key, self.groups))
    }
}

fn no_such_group(g: GroupId, groups: u32) -> String {
    format!("group {g} does not exist (the cluster has {groups} groups, 0–{})", groups - 1)
}

fn parse_rule(rule: &str, groups: u32) -> Result<Rule, PlacementError> {
    let bad = |why: &str| PlacementError(format!("onelog.placement.rules: {rule:?} {why}"));
    let (kind, rest) = rule.split_once(':').ok_or_else(|| bad("has no kind (txn:, group: or topic:)"))?;
    let kind = match kind.trim() {
        "txn" => IdKind::Txn,
        "group" => IdKind::Group,
        "topic" => IdKind::Topic,
        _ => return Err(bad("has a kind other than txn, group or topic")),
    };
    let (prefix, target) = rest.split_once('=').ok_or_else(|| bad("has no =TARGET"))?;
    let target = match target.trim().strip_prefix("key:") {
        Some("") => return Err(bad("names an empty key")),
        Some(key) => Target::Key(key.to_string()),
        None => {
            let g = target
                .trim()
                .parse::<GroupId>()
                .map_err(|_| bad("targets neither a group number nor key:NAME"))?;
            if g >= groups {
                return Err(bad(&format!("targets {}", no_such_group(g, groups))));
            }
            Target::Group(g)
        }
    };
    Ok(Rule { kind, prefix: prefix.to_string(), target })
}

/// A name's group by hash: CRC32C of its UTF-8 bytes, which no build, platform or Rust release
/// changes (a placement must never move because the binary did).
pub fn hash_group(name: &str, groups: u32) -> GroupId {
    crc32c::crc32c(name.as_bytes()) % groups.max(1)
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
