//! Placement: the default layout spreads voters and leaders, every bad setting is refused with
//! a message naming it, and hashing is pinned so a placement never moves with the binary.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn settings(nodes: &[u64], groups: u32, r: usize) -> LayoutSettings {
    LayoutSettings {
        nodes: nodes.iter().copied().collect::<BTreeSet<_>>(),
        groups,
        replication_factor: r,
        voters: BTreeMap::new(),
    }
}

fn refused<T: std::fmt::Debug>(result: Result<T, PlacementError>) -> String {
    result.expect_err("refused").0
}

#[test]
fn three_groups_on_three_nodes_each_node_leads_one() {
    let layout = Layout::of(&settings(&[1, 2, 3], 3, 3)).unwrap();
    assert_eq!(layout.voters, vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]]);
    let leaders: BTreeSet<u64> = (0..3).filter_map(|g| layout.preferred_leader(g)).collect();
    assert_eq!(leaders, BTreeSet::from([1, 2, 3]));
}

#[test]
fn three_groups_on_five_nodes_with_three_voters_each() {
    let layout = Layout::of(&settings(&[1, 2, 3, 4, 5], 3, 3)).unwrap();
    assert_eq!(layout.voters, vec![vec![1, 2, 3], vec![2, 3, 4], vec![3, 4, 5]]);
}

#[test]
fn one_group_is_today_s_cluster() {
    let layout = Layout::of(&settings(&[1, 2, 3], 1, 3)).unwrap();
    assert_eq!(layout.voters, vec![vec![1, 2, 3]]);
    let placement = Placement::single();
    assert_eq!(placement.topic("any", &BTreeMap::new()), Ok(0));
    assert_eq!(placement.id(IdKind::Txn, "any"), 0);
}

#[test]
fn named_voters_replace_the_default_for_their_group_only() {
    let mut s = settings(&[1, 2, 3, 4], 2, 2);
    s.voters.insert(1, vec![4, 1]);
    let layout = Layout::of(&s).unwrap();
    assert_eq!(layout.voters, vec![vec![1, 2], vec![4, 1]]);
    assert_eq!(layout.preferred_leader(1), Some(4));
}

#[test]
fn bad_layouts_are_refused_by_name() {
    assert_eq!(
        refused(Layout::of(&settings(&[1, 2, 3], 0, 3))),
        "onelog.raft.groups 0 must be between 1 and 64"
    );
    assert_eq!(
        refused(Layout::of(&settings(&[1, 2, 3], 65, 3))),
        "onelog.raft.groups 65 must be between 1 and 64"
    );
    assert_eq!(
        refused(Layout::of(&settings(&[1, 2], 2, 3))),
        "onelog.raft.replication.factor 3 must be between 1 and the 2 nodes"
    );
    let mut unknown_group = settings(&[1, 2, 3], 3, 3);
    unknown_group.voters.insert(3, vec![1, 2, 3]);
    assert_eq!(
        refused(Layout::of(&unknown_group)),
        "onelog.raft.group.3.voters names group 3, but the cluster has 3 groups (0–2)"
    );
    let mut unknown_node = settings(&[1, 2, 3], 3, 3);
    unknown_node.voters.insert(1, vec![1, 2, 9]);
    assert_eq!(
        refused(Layout::of(&unknown_node)),
        "onelog.raft.group.1.voters names node 9, which is not a member (1, 2, 3)"
    );
    let mut too_few = settings(&[1, 2, 3], 3, 3);
    too_few.voters.insert(2, vec![1, 2]);
    assert_eq!(
        refused(Layout::of(&too_few)),
        "group 2 has 2 voters (onelog.raft.group.2.voters), fewer than onelog.raft.replication.factor 3"
    );
    let mut twice = settings(&[1, 2, 3], 3, 2);
    twice.voters.insert(0, vec![1, 1, 2]);
    assert_eq!(refused(Layout::of(&twice)), "onelog.raft.group.0.voters names a node twice");
}

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn a_topic_goes_to_its_pinned_group_then_its_key_then_its_hash() {
    let keys = BTreeMap::from([("payments".to_string(), 2)]);
    let placement = Placement::new(3, "", keys).unwrap();
    assert_eq!(placement.topic("orders", &configs(&[(TOPIC_GROUP_CONFIG, "1")])), Ok(1));
    assert_eq!(placement.topic("orders", &configs(&[(TOPIC_KEY_CONFIG, "payments")])), Ok(2));
    // The group config wins over the key.
    let both = configs(&[(TOPIC_GROUP_CONFIG, "0"), (TOPIC_KEY_CONFIG, "payments")]);
    assert_eq!(placement.topic("orders", &both), Ok(0));
    assert_eq!(placement.topic("orders", &BTreeMap::new()), Ok(hash_group("orders", 3)));
    // An unpinned key is placed by its hash, the same for a topic and an id naming it.
    let unpinned = placement.topic("t", &configs(&[(TOPIC_KEY_CONFIG, "shipping")])).unwrap();
    assert_eq!(unpinned, hash_group("shipping", 3));
}

#[test]
fn bad_topic_placements_are_refused_by_name() {
    let placement = Placement::new(3, "", BTreeMap::new()).unwrap();
    assert_eq!(
        refused(placement.topic("t", &configs(&[(TOPIC_GROUP_CONFIG, "3")]))),
        "onelog.raft.group=3: group 3 does not exist (the cluster has 3 groups, 0–2)"
    );
    assert_eq!(
        refused(placement.topic("t", &configs(&[(TOPIC_GROUP_CONFIG, "two")]))),
        "onelog.raft.group=two is not a group number"
    );
    assert_eq!(
        refused(placement.topic("t", &configs(&[(TOPIC_KEY_CONFIG, " ")]))),
        "onelog.placement.key must name a key"
    );
}

#[test]
fn ids_follow_the_first_matching_rule_of_their_kind() {
    let keys = BTreeMap::from([("payments".to_string(), 1)]);
    let rules = "txn:payments-=key:payments, group:payments-=key:payments, txn:pay=2, group:=0";
    let placement = Placement::new(3, rules, keys).unwrap();
    assert_eq!(placement.id(IdKind::Txn, "payments-7"), 1, "the first rule matches");
    assert_eq!(placement.id(IdKind::Txn, "payroll"), 2, "the third");
    assert_eq!(placement.id(IdKind::Group, "payments-app"), 1);
    assert_eq!(placement.id(IdKind::Group, "anything"), 0, "an empty prefix matches every id");
    assert_eq!(placement.id(IdKind::Txn, "other"), hash_group("other", 3), "no rule: the hash");
}

#[test]
fn bad_rules_and_keys_are_refused_by_name() {
    let none = BTreeMap::new;
    let cases = [
        ("payments=1", "onelog.placement.rules: \"payments=1\" has no kind (txn:, group: or topic:)"),
        ("queue:x=1", "onelog.placement.rules: \"queue:x=1\" has a kind other than txn, group or topic"),
        ("txn:x", "onelog.placement.rules: \"txn:x\" has no =TARGET"),
        ("txn:x=key:", "onelog.placement.rules: \"txn:x=key:\" names an empty key"),
        ("txn:x=one", "onelog.placement.rules: \"txn:x=one\" targets neither a group number nor key:NAME"),
        (
            "group:x=5",
            "onelog.placement.rules: \"group:x=5\" targets group 5 does not exist (the cluster has 3 groups, 0–2)",
        ),
    ];
    for (rules, want) in cases {
        assert_eq!(refused(Placement::new(3, rules, none())), want);
    }
    let pinned = BTreeMap::from([("payments".to_string(), 3)]);
    assert_eq!(
        refused(Placement::new(3, "", pinned)),
        "onelog.placement.key.payments: group 3 does not exist (the cluster has 3 groups, 0–2)"
    );
    assert_eq!(refused(Placement::new(0, "", none())), "onelog.raft.groups 0 must be between 1 and 64");
}

/// CRC32C of the name (the Castagnoli check value 0xE3069283 for "123456789"): the groups
/// pinned here are what every build must compute, or topics and ids would move between groups
/// across an upgrade. Computed independently of the crate, from the polynomial.
#[test]
fn the_hash_is_pinned() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    let pinned = [("orders", 161_988_746u32), ("payments", 1_133_496_106), ("tx-1", 3_041_897_284), ("", 0)];
    for (name, crc) in pinned {
        assert_eq!(hash_group(name, 3), crc % 3, "{name}");
        assert_eq!(hash_group(name, 64), crc % 64, "{name}");
    }
    assert_eq!(hash_group("orders", 3), 2);
    assert_eq!(hash_group("payments", 3), 1);
}

#[test]
fn a_recorded_topic_group_is_read_back_and_bad_values_are_named() {
    let configs = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    assert_eq!(recorded_topic_group(&configs(TOPIC_GROUP_CONFIG, "2")), 2);
    assert_eq!(recorded_topic_group(&BTreeMap::new()), 0);
    assert!(topic_config_value_problem(TOPIC_GROUP_CONFIG, "x").unwrap().contains(TOPIC_GROUP_CONFIG));
    assert!(topic_config_value_problem(TOPIC_KEY_CONFIG, " ").is_some());
    assert!(topic_config_value_problem(TOPIC_KEY_CONFIG, &"k".repeat(250)).is_some());
    assert!(topic_config_value_problem(TOPIC_KEY_CONFIG, "payments").is_none());
    assert!(is_topic_placement_config(TOPIC_KEY_CONFIG) && !is_topic_placement_config("retention.ms"));
}

#[test]
fn topic_rules_place_names_that_give_no_group_or_key() {
    let placement = Placement::new(3, "topic:payments-=2, topic:shared-=key:app", BTreeMap::new()).unwrap();
    assert_eq!(placement.topic("payments-in", &BTreeMap::new()), Ok(2));
    assert_eq!(placement.topic("shared-out", &BTreeMap::new()), Ok(placement.key("app")));
    let given = BTreeMap::from([(TOPIC_GROUP_CONFIG.to_string(), "1".to_string())]);
    assert_eq!(placement.topic("payments-in", &given), Ok(1), "a topic's own config wins");
    assert_eq!(placement.topic("other", &BTreeMap::new()), Ok(hash_group("other", 3)));
    assert!(refused(Placement::new(3, "topic:x=3", BTreeMap::new())).contains("does not exist"));
}
