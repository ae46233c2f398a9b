//! `configure` against hand-built topics: task counts, regexes, repartition and changelog
//! sizing, copartitioning, the internal topics to create, which status wins, and inputs a
//! member should never send (bad indexes, loops, odd counts) answered without a panic.

use kafka_compat::error_code::{INVALID_TOPIC_EXCEPTION, STREAMS_INVALID_TOPOLOGY, UNKNOWN_SERVER_ERROR};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::PartitionState;

fn topic(partitions: usize) -> Topic {
    Topic {
        topic_id: [7; 16],
        replication_factor: 1,
        configs: BTreeMap::new(),
        partitions: vec![PartitionState::new(); partitions],
    }
}

fn topics(list: &[(&str, usize)]) -> BTreeMap<String, Topic> {
    list.iter().map(|&(name, n)| (name.to_string(), topic(n))).collect()
}

fn info(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo { name: name.to_string(), partitions, ..TopicInfo::default() }
}

fn sub(sources: &[&str]) -> Subtopology {
    Subtopology { source_topics: sources.iter().map(|s| s.to_string()).collect(), ..Subtopology::default() }
}

/// Subtopologies with ids "0", "1", … in the given order.
fn topology(subs: Vec<Subtopology>) -> Topology {
    let subtopologies = subs.into_iter().enumerate().map(|(i, s)| (i.to_string(), s)).collect();
    Topology { epoch: 1, subtopologies }
}

fn group(sources: &[i16], repartition: &[i16]) -> CopartitionGroup {
    CopartitionGroup {
        source_topics: sources.to_vec(),
        repartition_source_topics: repartition.to_vec(),
        ..CopartitionGroup::default()
    }
}

fn error(configured: &ConfiguredTopology) -> (Status, &str) {
    let error = configured.error.as_ref().expect("a status");
    assert!(configured.subtopologies.is_none() && configured.rejected.is_none());
    (error.status, error.message.as_str())
}

fn rejected(configured: &ConfiguredTopology) -> (i16, Option<String>) {
    let refusal = configured.rejected.clone().expect("a refusal");
    assert!(configured.subtopologies.is_none() && configured.error.is_none());
    assert!(configured.internal_topics_to_create.is_empty());
    (refusal.code, refusal.message)
}

fn tasks(configured: &ConfiguredTopology) -> Vec<i32> {
    let subtopologies = configured.subtopologies.as_ref().expect("ready");
    subtopologies.values().map(|s| s.num_tasks).collect()
}

#[test]
fn all_sources_exist_ready_with_one_task_per_widest_partition() {
    let mut first = sub(&["b", "a"]);
    first.state_changelog_topics = vec![info("app-store-changelog", 0)];
    let t = topology(vec![first, sub(&["c"])]);
    let existing = topics(&[("a", 3), ("b", 5), ("c", 2), ("app-store-changelog", 5)]);
    let configured = configure(&t, &existing);
    assert!(configured.is_ready());
    assert_eq!((configured.error.clone(), configured.rejected.clone()), (None, None));
    assert_eq!(configured.topology_epoch, 1);
    assert_eq!(tasks(&configured), vec![5, 2]);
    let zero = &configured.subtopologies.as_ref().unwrap()["0"];
    assert_eq!(zero.source_topics, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(zero.state_changelog_topics["app-store-changelog"].partitions, 5);
    assert!(configured.internal_topics_to_create.is_empty());
}

#[test]
fn missing_source_topics_are_named_sorted_three_at_most() {
    let t = topology(vec![sub(&["a", "z", "y"]), sub(&["x", "w"])]);
    let configured = configure(&t, &topics(&[("a", 1)]));
    let message = "Source topics w, x, y and 1 additional topics are missing.";
    assert_eq!(error(&configured), (Status::MissingSourceTopics, message));
    assert!(configured.internal_topics_to_create.is_empty());

    let t = topology(vec![sub(&["a", "b"])]);
    let configured = configure(&t, &BTreeMap::new());
    assert_eq!(error(&configured), (Status::MissingSourceTopics, "Source topics a, b are missing."));
}

#[test]
fn regex_sources_resolve_by_full_match() {
    let mut s = sub(&[]);
    s.source_topic_regex = vec!["orders-.*".to_string()];
    s.state_changelog_topics = vec![info("orders-store-changelog", 0)];
    let existing = topics(&[("orders-1", 2), ("orders-2", 4), ("xorders-3", 9), ("orders", 8)]);
    let configured = configure(&topology(vec![s.clone()]), &existing);
    // The changelog would match the regex too, but the topology's own topics never do.
    assert_eq!(configured.internal_topics_to_create["orders-store-changelog"].partitions, 4);
    let mut existing = existing;
    existing.insert("orders-store-changelog".to_string(), topic(4));
    let configured = configure(&topology(vec![s]), &existing);
    assert_eq!(tasks(&configured), vec![4]);
    let sources = &configured.subtopologies.as_ref().unwrap()["0"].source_topics;
    assert_eq!(sources, &vec!["orders-1".to_string(), "orders-2".to_string()]);
}

#[test]
fn regex_matching_nothing_or_invalid_is_a_missing_source() {
    let mut s = sub(&[]);
    s.source_topic_regex = vec!["(".to_string(), "nothing-.*".to_string()];
    let configured = configure(&topology(vec![s.clone()]), &topics(&[("a", 1)]));
    let message = "Source topics matching (, nothing-.* are missing.";
    assert_eq!(error(&configured), (Status::MissingSourceTopics, message));

    // A regex that matches nothing next to a named topic is fine.
    s.source_topics = vec!["a".to_string()];
    assert_eq!(tasks(&configure(&topology(vec![s]), &topics(&[("a", 3)]))), vec![3]);
}

/// `first` reads a (4) and b (2) and writes rep; `second` reads rep and writes rep2 and
/// fixed; `third` reads rep2 and fixed, whose 7 partitions the member fixed (kept, though its
/// writer's widest input has 4).
fn chain() -> Topology {
    let mut first = sub(&["a", "b"]);
    first.repartition_sink_topics = vec!["rep".to_string()];
    let mut second = sub(&[]);
    second.repartition_source_topics = vec![info("rep", 0)];
    second.repartition_sink_topics = vec!["rep2".to_string(), "fixed".to_string()];
    second.state_changelog_topics = vec![TopicInfo {
        name: "store-changelog".to_string(),
        partitions: 0,
        replication_factor: 3,
        topic_configs: vec![("cleanup.policy".to_string(), "compact".to_string())],
    }];
    let mut third = sub(&[]);
    third.repartition_source_topics = vec![info("rep2", 0), info("fixed", 7)];
    // "1" (second) comes before "2" (first), its writer: rep2 is settled in a second round.
    topology(vec![third, second, first])
}

#[test]
fn repartition_counts_follow_the_upstream_sources() {
    let configured = configure(&chain(), &topics(&[("a", 4), ("b", 2)]));
    let (status, message) = error(&configured);
    assert_eq!(status, Status::MissingInternalTopics);
    assert_eq!(message, "Internal topics are missing: fixed, rep, rep2 and 1 additional topics");
    let create = &configured.internal_topics_to_create;
    let counts: Vec<(&str, i32)> = create.values().map(|t| (t.name.as_str(), t.partitions)).collect();
    assert_eq!(counts, vec![("fixed", 7), ("rep", 4), ("rep2", 4), ("store-changelog", 4)]);
    let changelog = &create["store-changelog"];
    assert_eq!(changelog.replication_factor, Some(3));
    assert_eq!(changelog.configs.get("cleanup.policy").map(String::as_str), Some("compact"));
    assert_eq!(create["rep"].replication_factor, None);

    let existing =
        topics(&[("a", 4), ("b", 2), ("rep", 4), ("rep2", 4), ("fixed", 7), ("store-changelog", 4)]);
    let configured = configure(&chain(), &existing);
    // Subtopology "0" reads rep2 (4) and fixed (7).
    assert_eq!(tasks(&configured), vec![7, 4, 4]);
    let sources = &configured.subtopologies.as_ref().unwrap()["1"].repartition_source_topics;
    assert_eq!(sources["rep"].partitions, 4);
}

#[test]
fn copartitioned_user_topics_must_agree() {
    let mut s = sub(&["a", "b"]);
    s.copartition_groups = vec![group(&[0, 1], &[])];
    let configured = configure(&topology(vec![s]), &topics(&[("a", 2), ("b", 3)]));
    let message = "Following topics do not have the same number of partitions: [{a=2, b=3}]";
    assert_eq!(error(&configured), (Status::IncorrectlyPartitionedTopics, message));
    assert!(configured.internal_topics_to_create.is_empty());
}

/// 0 reads a (4) and writes rep; 1 reads c (6) and rep, copartitioned.
fn copartitioned_join(rep_partitions: i32) -> Topology {
    let mut writer = sub(&["a"]);
    writer.repartition_sink_topics = vec!["rep".to_string()];
    let mut join = sub(&["c"]);
    join.repartition_source_topics = vec![info("rep", rep_partitions)];
    join.copartition_groups = vec![group(&[0], &[0])];
    topology(vec![writer, join])
}

#[test]
fn copartitioned_repartition_topic_takes_the_groups_count() {
    let configured = configure(&copartitioned_join(0), &topics(&[("a", 4), ("c", 6)]));
    assert_eq!(configured.internal_topics_to_create["rep"].partitions, 6);

    // An empty group constrains nothing.
    let mut t = copartitioned_join(0);
    t.subtopologies.get_mut("1").unwrap().copartition_groups.push(CopartitionGroup::default());
    assert_eq!(configure(&t, &topics(&[("a", 4), ("c", 6)])).internal_topics_to_create["rep"].partitions, 6);

    let configured = configure(&copartitioned_join(7), &topics(&[("a", 4), ("c", 6)]));
    let message =
        "Number of partitions [7] of repartition topic [rep] doesn't match number of partitions [6] of the source topic.";
    assert_eq!(error(&configured), (Status::IncorrectlyPartitionedTopics, message));

    let existing = topics(&[("a", 4), ("c", 6), ("rep", 6)]);
    assert_eq!(tasks(&configure(&copartitioned_join(0), &existing)), vec![4, 6]);
}

#[test]
fn internal_topic_with_other_partition_count_wins_over_missing_ones() {
    let configured = configure(&chain(), &topics(&[("a", 4), ("b", 2), ("rep2", 3)]));
    let message = "Existing topic rep2 has different number of partitions: expected 4, found 3";
    assert_eq!(error(&configured), (Status::IncorrectlyPartitionedTopics, message));
    assert!(configured.internal_topics_to_create.is_empty());
}

#[test]
fn missing_source_topics_win_over_every_other_status() {
    let mut s = sub(&["a", "b", "gone"]);
    s.copartition_groups = vec![group(&[0, 1], &[])];
    s.state_changelog_topics = vec![info("changelog", 0)];
    let existing = topics(&[("a", 2), ("b", 3), ("changelog", 9)]);
    let configured = configure(&topology(vec![s]), &existing);
    assert_eq!(error(&configured), (Status::MissingSourceTopics, "Source topics gone are missing."));
}

#[test]
fn malformed_copartition_indexes_fail_the_heartbeat_without_panic() {
    for bad in [group(&[2], &[]), group(&[-1], &[]), group(&[], &[0]), group(&[i16::MAX], &[i16::MIN])] {
        let mut s = sub(&["a", "missing"]);
        s.copartition_groups = vec![bad.clone()];
        // Kafka resolves the indexes first, so even a missing source topic is not reported.
        assert_eq!(
            rejected(&configure(&topology(vec![s]), &topics(&[("a", 1)]))),
            (UNKNOWN_SERVER_ERROR, None)
        );
    }
    let mut s = sub(&["a"]);
    s.copartition_groups =
        vec![CopartitionGroup { source_topic_regex: vec![0], ..CopartitionGroup::default() }];
    assert_eq!(rejected(&configure(&topology(vec![s]), &topics(&[("a", 1)]))), (UNKNOWN_SERVER_ERROR, None));
}

#[test]
fn topologies_kafka_cannot_size_are_refused() {
    let mut a = sub(&[]);
    a.repartition_source_topics = vec![info("x", 0)];
    a.repartition_sink_topics = vec!["y".to_string()];
    let mut b = sub(&[]);
    b.repartition_source_topics = vec![info("y", 0)];
    b.repartition_sink_topics = vec!["x".to_string()];
    let (code, message) = rejected(&configure(&topology(vec![a, b]), &BTreeMap::new()));
    assert_eq!(code, STREAMS_INVALID_TOPOLOGY);
    assert!(message.unwrap().contains("There may be loops in the topology that cannot be resolved."));

    let mut never_written = sub(&["a"]);
    never_written.repartition_source_topics = vec![info("orphan", 0)];
    let (code, message) = rejected(&configure(&topology(vec![never_written]), &topics(&[("a", 1)])));
    assert_eq!(code, STREAMS_INVALID_TOPOLOGY);
    assert!(message.unwrap().ends_with("because a repartition source topic is never used as a sink topic."));

    let configured = configure(&topology(vec![sub(&["a"]), sub(&[])]), &topics(&[("a", 1)]));
    assert_eq!(
        rejected(&configured),
        (STREAMS_INVALID_TOPOLOGY, Some("No source topics found for subtopology 1".to_string()))
    );
}

#[test]
fn odd_counts_and_names_are_refused_as_kafka_does() {
    let mut negative = sub(&["a"]);
    negative.repartition_source_topics = vec![info("rep", -3)];
    negative.repartition_sink_topics = vec!["rep".to_string()];
    assert_eq!(
        rejected(&configure(&topology(vec![negative]), &topics(&[("a", 1)]))),
        (UNKNOWN_SERVER_ERROR, None)
    );

    assert_eq!(
        rejected(&configure(&topology(vec![sub(&["empty"])]), &topics(&[("empty", 0)]))).0,
        UNKNOWN_SERVER_ERROR
    );

    let mut bad_name = sub(&["a"]);
    bad_name.state_changelog_topics = vec![info("bad/name", 0)];
    let configured = configure(&topology(vec![bad_name]), &topics(&[("a", 1)]));
    let message = "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'";
    assert_eq!(rejected(&configured), (INVALID_TOPIC_EXCEPTION, Some(message.to_string())));

    let t = Topology { epoch: -1, ..topology(vec![sub(&["a"])]) };
    assert_eq!(rejected(&configure(&t, &topics(&[("a", 1)]))), (UNKNOWN_SERVER_ERROR, None));
}

fn random_name(rng: &mut StdRng) -> String {
    ["a", "b", "c", "r1", "r2", "r3", "ch1", "ch2", "bad name", ""][rng.gen_range(0..10)].to_string()
}

fn random_info(rng: &mut StdRng) -> TopicInfo {
    let partitions = [0, 0, 1, 3, -1, i32::MAX, i32::MIN][rng.gen_range(0..7)];
    TopicInfo {
        name: random_name(rng),
        partitions,
        replication_factor: rng.gen_range(-2..4),
        topic_configs: vec![],
    }
}

fn random_list<T>(rng: &mut StdRng, mut make: impl FnMut(&mut StdRng) -> T) -> Vec<T> {
    (0..rng.gen_range(0..4)).map(|_| make(rng)).collect()
}

fn random_topology(rng: &mut StdRng) -> Topology {
    let subs = (0..rng.gen_range(0..4))
        .map(|_| Subtopology {
            source_topics: random_list(rng, random_name),
            source_topic_regex: random_list(rng, |r| {
                ["a|b", "r.*", "(", ".*"][r.gen_range(0..4)].to_string()
            }),
            state_changelog_topics: random_list(rng, random_info),
            repartition_sink_topics: random_list(rng, random_name),
            repartition_source_topics: random_list(rng, random_info),
            copartition_groups: random_list(rng, |r| CopartitionGroup {
                source_topics: random_list(r, |r| r.gen_range(-1..4)),
                source_topic_regex: random_list(r, |r| r.gen_range(-1..4)),
                repartition_source_topics: random_list(r, |r| r.gen_range(-1..4)),
            }),
        })
        .collect();
    Topology { epoch: rng.gen_range(-1..3), ..topology(subs) }
}

#[test]
fn random_inputs_never_panic_and_give_the_same_answer_twice() {
    for seed in 0..500 {
        let mut rng = StdRng::seed_from_u64(seed);
        let t = random_topology(&mut rng);
        let names = ["a", "b", "c", "r1", "r2", "ch1"];
        let mut existing = BTreeMap::new();
        for name in names {
            if rng.gen_bool(0.6) {
                existing.insert(name.to_string(), topic(rng.gen_range(0..5)));
            }
        }
        let first = configure(&t, &existing);
        assert_eq!(configure(&t.clone(), &existing.clone()), first, "seed {seed}");
        let outcomes = [first.subtopologies.is_some(), first.error.is_some(), first.rejected.is_some()];
        assert_eq!(outcomes.iter().filter(|&&o| o).count(), 1, "seed {seed}: {first:?}");
        assert!(
            first.internal_topics_to_create.is_empty()
                || first.error.as_ref().unwrap().status == Status::MissingInternalTopics
        );
        for s in first.subtopologies.iter().flat_map(BTreeMap::values) {
            assert!(s.num_tasks > 0, "seed {seed}");
        }
    }
}
