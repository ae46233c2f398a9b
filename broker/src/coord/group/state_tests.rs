//! The group state machine driven alone: no tokio, no lock, no clock. Times are explicit
//! instants, timers are the `Timer`s a transition returns (fired by calling
//! `rebalance_timer_fired` at the time they name), and parked requests are answered by the
//! `Reply`s it returns. This is what the async shell does, spelled out step by step.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_compat::error_code;
use onelog_state::command::GenerationOp;

use super::effects::{Effects, Reply, Timer};
use super::messages::{CoordinatorConfig, JoinResult, SyncResult};
use super::state::{GroupState, Groups};
use super::sync::SyncStep;

fn groups(initial_delay_ms: u64) -> Groups {
    Groups::new(CoordinatorConfig {
        initial_rebalance_delay_ms: initial_delay_ms,
        min_session_timeout_ms: 1_000,
        max_session_timeout_ms: 60_000,
        max_size: 100,
    })
}

use super::tests::join_req as req;

/// KIP-394: the first join is refused with the id to join with.
fn member_id(groups: &mut Groups, now: Instant) -> String {
    let (code, id) = groups.join(&req("", b""), now).expect_err("MEMBER_ID_REQUIRED");
    assert_eq!(code, error_code::MEMBER_ID_REQUIRED);
    id
}

fn join_replies(effects: &Effects) -> BTreeMap<String, JoinResult> {
    let joins = effects.replies.iter().filter_map(|r| match r {
        Reply::Join { group_id, member_id, result } if group_id == "g" => {
            Some((member_id.clone(), result.clone()))
        }
        _ => None,
    });
    joins.collect()
}

fn sync_replies(effects: &Effects) -> BTreeMap<String, SyncResult> {
    let syncs = effects.replies.iter().filter_map(|r| match r {
        Reply::Sync { group_id, member_id, result } if group_id == "g" => {
            Some((member_id.clone(), result.clone()))
        }
        _ => None,
    });
    syncs.collect()
}

fn timer(seq: u64, after_ms: u64) -> Timer {
    Timer { group_id: "g".to_string(), seq, after: Duration::from_millis(after_ms) }
}

fn state(groups: &Groups) -> GroupState {
    groups.describe("g").expect("group").state
}

/// Two members make generation 1 through the KIP-134 initial delay (extended once because the
/// second joined during it), then the follower's SyncGroup waits for the leader's.
#[test]
fn two_members_join_and_sync_with_explicit_times() {
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let mut g = groups(3_000);
    let (a, b) = (member_id(&mut g, t0), member_id(&mut g, t0));

    let joined = g.join(&req(&a, b"a"), t0).expect("joins");
    assert_eq!(joined.member_id, a);
    assert!(joined.effects.replies.is_empty(), "parked until the rebalance completes");
    assert_eq!(joined.effects.timers, vec![timer(1, 3_000)], "the initial delay");
    let joined = g.join(&req(&b, b"b"), at(1_000)).expect("joins");
    assert!(joined.effects.replies.is_empty() && joined.effects.timers.is_empty());
    assert_eq!(state(&g), GroupState::PreparingRebalance);

    // `b` joined during the delay: it is extended once, by at most what the rebalance
    // timeout leaves (Kafka's `InitialDelayedJoin`).
    let fired = g.rebalance_timer_fired("g", 1, at(3_000));
    assert!(fired.replies.is_empty());
    assert_eq!(fired.timers, vec![timer(1, 3_000)]);
    let fired = g.rebalance_timer_fired("g", 1, at(6_000));
    assert!(fired.timers.is_empty());
    let answers = join_replies(&fired);
    assert_eq!(answers.len(), 2);
    let leader = answers[&a].leader.clone();
    let follower = if leader == a { b.clone() } else { a.clone() };
    assert!(answers.values().all(|r| (r.error_code, r.generation_id) == (error_code::NONE, 1)));
    assert_eq!(answers[&leader].members.len(), 2, "only the leader gets the metadata");
    assert!(answers[&follower].members.is_empty());
    assert_eq!(state(&g), GroupState::CompletingRebalance);

    let parked = g.sync("g", 1, (&follower, None), Vec::new(), at(6_100));
    assert!(matches!(parked, SyncStep::Park));
    let assignments = vec![(a.clone(), Bytes::from_static(b"0")), (b.clone(), Bytes::from_static(b"1"))];
    let (mine, generation, effects) = completes(&mut g, 1, &leader, assignments, at(6_200));
    let expected = |id: &str| Bytes::from(if id == a { &b"0"[..] } else { &b"1"[..] });
    assert_eq!((mine.error_code, mine.assignment), (error_code::NONE, expected(&leader)));
    assert_eq!((generation.generation_id, generation.members.len()), (1, 2));
    let theirs = sync_replies(&effects);
    assert_eq!(theirs[&follower].assignment, expected(&follower));
    assert_eq!(state(&g), GroupState::Stable);
    assert_eq!(g.heartbeat("g", 1, (&follower, None), at(7_000)), error_code::NONE);
    assert_eq!(g.heartbeat("g", 0, (&follower, None), at(7_000)), error_code::ILLEGAL_GENERATION);
}

/// The leader member's SyncGroup and its generation's log entry: (the leader's answer, the
/// generation, the waiting members' answers).
fn completes(
    g: &mut Groups,
    generation_id: i32,
    leader: &str,
    assignments: Vec<(String, Bytes)>,
    now: Instant,
) -> (SyncResult, GenerationOp, Effects) {
    let SyncStep::Completed(generation) = g.sync("g", generation_id, (leader, None), assignments, now) else {
        panic!("the leader completes the generation")
    };
    let (mine, effects) = g.recorded("g", generation_id, leader, true);
    (mine, generation, effects)
}

/// Without an initial delay a lone member completes at once; a second one makes the group
/// rebalance, completing when the first rejoins. Returns (leader, follower) of generation 2.
fn two_members(g: &mut Groups, t0: Instant) -> (String, String) {
    let a = member_id(g, t0);
    let first = g.join(&req(&a, b"a"), t0).expect("joins");
    assert_eq!(first.effects.timers, vec![timer(1, 0)], "no initial delay configured");
    assert_eq!(join_replies(&first.effects)[&a].generation_id, 1, "alone: complete at once");
    let b = member_id(g, t0);
    let joined = g.join(&req(&b, b"b"), t0).expect("joins");
    assert!(joined.effects.replies.is_empty(), "`b` waits for `a` to rejoin");
    assert_eq!(joined.effects.timers, vec![timer(2, 30_000)], "bounded by the rebalance timeout");
    assert_eq!(g.heartbeat("g", 1, (&a, None), t0), error_code::REBALANCE_IN_PROGRESS);
    let answers = join_replies(&g.join(&req(&a, b"a"), t0).expect("rejoins").effects);
    assert!(answers.values().all(|r| r.generation_id == 2) && answers.len() == 2);
    assert_eq!(answers[&a].leader, a, "the leader stays the leader");
    (a, b)
}

/// One member stops heartbeating: once its session (10 s since its last sign of life) has
/// passed it is removed, and the other rejoins alone into the next generation.
#[test]
fn an_expired_session_removes_the_member_and_the_rest_rebalance() {
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    let mut g = groups(0);
    let (a, b) = two_members(&mut g, t0);
    completes(&mut g, 2, &a, Vec::new(), t0);
    // The first rebalance's timer fires late and is stale.
    let stale = g.rebalance_timer_fired("g", 1, at(1));
    assert!(stale.replies.is_empty() && stale.timers.is_empty());

    assert_eq!(g.heartbeat("g", 2, (&a, None), at(9_000)), error_code::NONE);
    let (removed, effects) = g.expire_sessions(at(10_000));
    assert!(removed.is_empty() && effects.timers.is_empty(), "10 s is not past the session");
    let (removed, effects) = g.expire_sessions(at(10_001));
    assert_eq!(removed, vec![("g".to_string(), b.clone())]);
    assert!(effects.replies.is_empty(), "`b` had nothing parked");
    assert_eq!(effects.timers, vec![timer(3, 30_000)], "the rest rebalance, bounded in time");
    assert_eq!(g.heartbeat("g", 2, (&b, None), at(10_002)), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(g.heartbeat("g", 2, (&a, None), at(10_002)), error_code::REBALANCE_IN_PROGRESS);

    let rejoined = g.join(&req(&a, b"a"), at(10_003)).expect("joins");
    let answer = &join_replies(&rejoined.effects)[&a];
    assert_eq!((answer.generation_id, answer.leader.as_str(), answer.members.len()), (3, a.as_str(), 1));
    assert_eq!(state(&g), GroupState::CompletingRebalance);
}

/// Parked requests are answered by replies: a follower's SyncGroup when a new member starts a
/// rebalance, a parked JoinGroup when its member leaves, and the old id of a KIP-345 static
/// member when a restarted instance takes over.
#[test]
fn parked_requests_are_answered_by_the_transitions_that_settle_them() {
    let t0 = Instant::now();
    let mut g = groups(0);
    let (_, follower) = two_members(&mut g, t0);
    assert!(matches!(g.sync("g", 2, (&follower, None), Vec::new(), t0), SyncStep::Park));

    let c = member_id(&mut g, t0);
    let joined = g.join(&req(&c, b"c"), t0).expect("joins");
    assert_eq!(sync_replies(&joined.effects)[&follower].error_code, error_code::REBALANCE_IN_PROGRESS);
    assert!(join_replies(&joined.effects).is_empty(), "`c` waits for the others to rejoin");
    let (code, left) = g.leave("g", &c, None, t0);
    assert_eq!(code, error_code::NONE);
    assert_eq!(join_replies(&left)[&c].error_code, error_code::UNKNOWN_MEMBER_ID);

    // KIP-134 keeps the static member's first join parked, so there is something to fence.
    let mut s = groups(3_000);
    let mut static_req = req("", b"s");
    static_req.group_instance_id = Some("instance-1".to_string());
    let old = s.join(&static_req, t0).expect("KIP-345: no MEMBER_ID_REQUIRED").member_id;
    let restarted = s.join(&static_req, t0).expect("takes over");
    assert_ne!(restarted.member_id, old);
    let fenced = join_replies(&restarted.effects).get(&old).map(|r| r.error_code);
    assert_eq!(fenced, Some(error_code::FENCED_INSTANCE_ID));
    assert_eq!(s.heartbeat("g", 0, (&old, Some("instance-1")), t0), error_code::FENCED_INSTANCE_ID);
}

/// Regression (kafka-python 3.0's group never settled): Kafka's `doCurrentMemberJoinGroup`.
/// A follower of a Stable group rejoining with unchanged protocols gets the current
/// generation at once, and its SyncGroup the current assignment; no rebalance starts. In
/// CompletingRebalance the leader's unchanged rejoin gets the members again. A Stable
/// leader's rejoin, or a follower's with new metadata, does rebalance.
#[test]
fn an_unchanged_rejoin_of_a_stable_group_gets_the_current_generation() {
    let t0 = Instant::now();
    let mut g = groups(0);
    let (a, b) = two_members(&mut g, t0);
    // CompletingRebalance: the leader lost its answer and asks again.
    let again = g.join(&req(&a, b"a"), t0).expect("joins");
    assert!(again.effects.timers.is_empty(), "no rebalance");
    let answer = &join_replies(&again.effects)[&a];
    assert_eq!((answer.generation_id, answer.leader.as_str(), answer.members.len()), (2, a.as_str(), 2));
    assert_eq!(state(&g), GroupState::CompletingRebalance);
    let assignments = vec![(a.clone(), Bytes::from_static(b"0")), (b.clone(), Bytes::from_static(b"1"))];
    completes(&mut g, 2, &a, assignments, t0);

    let rejoined = g.join(&req(&b, b"b"), t0).expect("joins");
    assert!(rejoined.effects.timers.is_empty(), "no rebalance");
    let answer = &join_replies(&rejoined.effects)[&b];
    assert_eq!((answer.error_code, answer.generation_id), (error_code::NONE, 2));
    assert_eq!((answer.leader.as_str(), answer.members.len()), (a.as_str(), 0));
    assert_eq!(state(&g), GroupState::Stable);
    let SyncStep::Answer(sync) = g.sync("g", 2, (&b, None), Vec::new(), t0) else { panic!("answered") };
    assert_eq!((sync.error_code, sync.assignment), (error_code::NONE, Bytes::from_static(b"1")));

    let changed = g.join(&req(&b, b"b2"), t0).expect("joins");
    assert!(join_replies(&changed.effects).is_empty(), "new metadata: b waits for a rebalance");
    assert_eq!(state(&g), GroupState::PreparingRebalance);
    let answers = join_replies(&g.join(&req(&a, b"a"), t0).expect("rejoins").effects);
    assert!(answers.values().all(|r| r.generation_id == 3) && answers.len() == 2);
    completes(&mut g, 3, &a, Vec::new(), t0);

    let leader = g.join(&req(&a, b"a"), t0).expect("joins");
    assert!(join_replies(&leader.effects).is_empty(), "a Stable leader's rejoin rebalances");
    assert_eq!(state(&g), GroupState::PreparingRebalance);
}

/// Online upgrade from a group a new leader adopted from the log: it knows the members but not
/// their subscriptions, so an upgradable consumer group rebalances to learn them (Loading),
/// while one that cannot upgrade is handed over as it is, without a rebalance, for apply to
/// refuse with Kafka's reason.
#[test]
fn an_adopted_group_rebalances_for_an_upgrade_only_when_it_could_upgrade() {
    use super::migration::Snapshot;
    use onelog_state::command::GenerationMember;
    let now = Instant::now();
    let member = |id: &str| GenerationMember {
        member_id: id.into(),
        group_instance_id: None,
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
    };
    let record = |protocol_type: &str| GenerationOp {
        group_id: "g".into(),
        generation_id: 3,
        protocol_type: protocol_type.into(),
        protocol_name: "range".into(),
        members: vec![member("a"), member("b")],
    };
    let state = |groups: &Groups| groups.describe("g").map(|v| v.state);
    for (protocol_type, max_members, want) in [
        ("connect", Some(10), None),
        ("consumer", None, None),
        ("consumer", Some(1), None),
        ("consumer", Some(10), Some(GroupState::PreparingRebalance)),
    ] {
        let mut groups = groups(0);
        groups.adopt(&record(protocol_type), now);
        let mut effects = Effects::default();
        let snapshot = groups.snapshot("g", max_members, &mut effects);
        let case = format!("{protocol_type} {max_members:?}");
        match want {
            None => {
                let Snapshot::Ready(s) = snapshot else { panic!("{case}: {snapshot:?}") };
                assert_eq!((s.generation_id, s.members.len()), (3, 2), "{case}");
                assert_eq!(state(&groups), Some(GroupState::Stable), "{case}: no rebalance");
            }
            Some(rebalancing) => {
                assert_eq!(snapshot, Snapshot::Loading, "{case}");
                assert_eq!(state(&groups), Some(rebalancing), "{case}");
            }
        }
    }
    let mut groups = groups(0);
    assert_eq!(groups.snapshot("g", Some(10), &mut Effects::default()), Snapshot::NotLive);
}
