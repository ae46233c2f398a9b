use super::*;

pub(crate) fn coordinator(initial_delay_ms: u64) -> Coordinator {
    Coordinator::new(CoordinatorConfig {
        initial_rebalance_delay_ms: initial_delay_ms,
        min_session_timeout_ms: 1_000,
        max_session_timeout_ms: 60_000,
        max_size: 100,
    })
}

pub(crate) fn join_req(member_id: &str, metadata: &'static [u8]) -> JoinRequest {
    JoinRequest {
        group_id: "g".to_string(),
        member_id: member_id.to_string(),
        group_instance_id: None,
        client_id: "c".to_string(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".to_string(),
        protocols: vec![("range".to_string(), Bytes::from_static(metadata))],
        require_known_member_id: true,
    }
}

/// The leader member's SyncGroup, with its generation put in the log (as the handler does).
pub(crate) async fn leader_sync(
    c: &Coordinator,
    generation_id: i32,
    leader: &str,
    assignments: Vec<(String, Bytes)>,
) -> (SyncResult, GenerationOp) {
    let SyncOutcome::Record(generation) = c.sync("g", generation_id, (leader, None), assignments).await
    else {
        panic!("the leader completes the generation")
    };
    (c.recorded(&generation, leader, true), generation)
}

fn answered(outcome: SyncOutcome) -> SyncResult {
    match outcome {
        SyncOutcome::Answered(result) => result,
        SyncOutcome::Record(_) => panic!("answered, not completing a generation"),
    }
}

/// KIP-394: a first join gets MEMBER_ID_REQUIRED and the id, then joins with it.
pub(crate) async fn new_member(c: &Coordinator) -> String {
    let first = c.join(join_req("", b"m")).await;
    assert_eq!(first.error_code, error_code::MEMBER_ID_REQUIRED);
    assert!(!first.member_id.is_empty());
    first.member_id
}

/// Members `a` and `b` join together (one rebalance); returns their ids and join results.
async fn two_members_join(c: &Coordinator) -> (String, String, JoinResult, JoinResult) {
    let a = new_member(c).await;
    let b = new_member(c).await;
    let (c2, b2) = (c.clone(), b.clone());
    let b_join = tokio::spawn(async move { c2.join(join_req(&b2, b"b")).await });
    let a_join = c.join(join_req(&a, b"a")).await;
    let b_join = b_join.await.expect("join");
    (a, b, a_join, b_join)
}

#[tokio::test(start_paused = true)]
async fn one_member_joins_syncs_heartbeats_and_leaves() {
    let c = coordinator(3_000);
    let id = new_member(&c).await;
    assert_eq!(c.join(join_req("unknown", b"m")).await.error_code, error_code::UNKNOWN_MEMBER_ID);
    let started = Instant::now();
    let joined = c.join(join_req(&id, b"meta")).await;
    // KIP-134: the first rebalance of an empty group waits the initial delay.
    assert!(started.elapsed() >= Duration::from_millis(3_000));
    assert_eq!((joined.error_code, joined.generation_id), (error_code::NONE, 1));
    assert_eq!(joined.leader, id);
    assert_eq!(joined.members, vec![(id.clone(), None, Bytes::from_static(b"meta"))]);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(c.heartbeat("g", 1, &id, None), error_code::NONE);
    assert_eq!(c.check_commit("g", 1, &id, None), Some(error_code::REBALANCE_IN_PROGRESS));
    let (synced, completed) = leader_sync(&c, 1, &id, vec![(id.clone(), Bytes::from_static(b"a"))]).await;
    assert_eq!((synced.error_code, synced.assignment), (error_code::NONE, Bytes::from_static(b"a")));
    let members: Vec<&str> = completed.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!((completed.generation_id, members), (1, vec![id.as_str()]));
    assert_eq!(c.describe("g").expect("group").state, GroupState::Stable);
    assert_eq!(c.heartbeat("g", 0, &id, None), error_code::ILLEGAL_GENERATION);
    assert_eq!(c.heartbeat("g", 1, "other", None), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(c.check_commit("g", 1, &id, None), Some(error_code::NONE));
    assert_eq!(c.check_commit("g", 0, &id, None), Some(error_code::ILLEGAL_GENERATION));
    // Kafka: a simple consumer (generation -1) may not commit into a group with members.
    assert_eq!(c.check_commit("g", -1, "", None), Some(error_code::UNKNOWN_MEMBER_ID));
    assert_eq!(c.leave("g", &id, None), error_code::NONE);
    assert_eq!(c.leave("g", &id, None), error_code::UNKNOWN_MEMBER_ID);
    // Empty at once, not after the rebalance timeout: nobody is left to rejoin.
    let view = c.describe("g").expect("group");
    assert_eq!((view.state, view.members.len()), (GroupState::Empty, 0));
    // The emptied generation goes to the log once, so a new leader adopts no ghosts.
    let empty = c.take_empty_generations();
    assert_eq!(empty.len(), 1);
    assert_eq!((empty[0].generation_id, empty[0].members.len()), (2, 0));
    assert!(c.take_empty_generations().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_second_member_rebalances_and_the_follower_waits_for_the_leader() {
    let c = coordinator(0);
    let a = new_member(&c).await;
    let first = c.join(join_req(&a, b"a")).await;
    assert_eq!(first.generation_id, 1);
    let (s, _) = leader_sync(&c, 1, &a, vec![(a.clone(), Bytes::from_static(b"all"))]).await;
    assert_eq!(s.error_code, error_code::NONE);

    let b = new_member(&c).await;
    let c2 = c.clone();
    let b2 = b.clone();
    let b_join = tokio::spawn(async move { c2.join(join_req(&b2, b"b")).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(c.heartbeat("g", 1, &a, None), error_code::REBALANCE_IN_PROGRESS);
    let a_join = c.join(join_req(&a, b"a")).await;
    let b_join = b_join.await.expect("join task");
    assert_eq!((a_join.generation_id, b_join.generation_id), (2, 2));
    assert_eq!(a_join.leader, a, "the leader stays the leader");
    assert_eq!(a_join.members.len(), 2);
    assert!(b_join.members.is_empty(), "only the leader gets the metadata");

    let c2 = c.clone();
    let b2 = b.clone();
    let b_sync = tokio::spawn(async move { c2.sync("g", 2, (&b2, None), Vec::new()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!b_sync.is_finished(), "a follower waits for the leader's assignments");
    let assignments = vec![(a.clone(), Bytes::from_static(b"0")), (b.clone(), Bytes::from_static(b"1"))];
    let (sa, _) = leader_sync(&c, 2, &a, assignments).await;
    let sb = answered(b_sync.await.expect("sync task"));
    assert_eq!(sa.assignment, Bytes::from_static(b"0"));
    assert_eq!(sb.assignment, Bytes::from_static(b"1"));
}

/// Regression (franz-go's TestGroupETL, cooperative-sticky, failed in CI with "unable to
/// commit: ILLEGAL_GENERATION"): the followers' SyncGroups were answered as soon as the leader
/// handed in the assignments, before the generation's log entry was even queued, so a
/// follower's commit with the new generation could reach the log first and be fenced by
/// apply. Now nobody hears of the generation until it is recorded; until then the group is
/// CompletingRebalance (commits REBALANCE_IN_PROGRESS, as Kafka answers there), and a
/// generation that could not be recorded sends every waiting member to find the coordinator.
#[tokio::test(start_paused = true)]
async fn members_hear_of_a_generation_only_once_it_is_in_the_log() {
    let c = coordinator(100);
    let (a, b, a_join, _) = two_members_join(&c).await;
    let (leader, follower) = if a_join.leader == a { (a, b) } else { (b, a) };
    let (c2, f2) = (c.clone(), follower.clone());
    let early = tokio::spawn(async move { c2.sync("g", 1, (&f2, None), Vec::new()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let assignments =
        vec![(leader.clone(), Bytes::from_static(b"L")), (follower.clone(), Bytes::from_static(b"F"))];
    let SyncOutcome::Record(generation) = c.sync("g", 1, (&leader, None), assignments).await else {
        panic!("the leader completes the generation")
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!early.is_finished(), "a waiting follower is not answered before the log has it");
    // The follower asks again (a retry after a lost answer): it waits too.
    let (c2, f2) = (c.clone(), follower.clone());
    let late = tokio::spawn(async move { c2.sync("g", 1, (&f2, None), Vec::new()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!late.is_finished(), "nobody is answered before the log has it");
    let replaced = answered(early.await.expect("sync task"));
    assert_eq!(
        replaced.error_code,
        error_code::NOT_COORDINATOR,
        "a member's newer request replaces its older"
    );
    assert_eq!(c.describe("g").expect("group").state, GroupState::CompletingRebalance);
    assert_eq!(c.check_commit("g", 1, &follower, None), Some(error_code::REBALANCE_IN_PROGRESS));
    assert_eq!(c.heartbeat("g", 1, &follower, None), error_code::NONE);

    let mine = c.recorded(&generation, &leader, true);
    assert_eq!((mine.error_code, mine.assignment), (error_code::NONE, Bytes::from_static(b"L")));
    let theirs = answered(late.await.expect("sync task"));
    assert_eq!((theirs.error_code, theirs.assignment), (error_code::NONE, Bytes::from_static(b"F")));
    assert_eq!(c.check_commit("g", 1, &follower, None), Some(error_code::NONE));
    assert_eq!(c.describe("g").expect("group").state, GroupState::Stable);

    // The next generation cannot be recorded (leadership lost): NOT_COORDINATOR for everyone.
    let (c2, l2) = (c.clone(), leader.clone());
    let rejoin = tokio::spawn(async move { c2.join(join_req(&l2, b"changed")).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let follower_join = c.join(join_req(&follower, b"f")).await;
    let leader_join = rejoin.await.expect("join task");
    assert_eq!((leader_join.generation_id, follower_join.generation_id), (2, 2));
    let (c2, f2) = (c.clone(), follower.clone());
    let waiting = tokio::spawn(async move { c2.sync("g", 2, (&f2, None), Vec::new()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let SyncOutcome::Record(generation) = c.sync("g", 2, (&leader, None), Vec::new()).await else {
        panic!("the leader completes the generation")
    };
    assert_eq!(c.recorded(&generation, &leader, false).error_code, error_code::NOT_COORDINATOR);
    assert_eq!(answered(waiting.await.expect("sync task")).error_code, error_code::NOT_COORDINATOR);
    assert_eq!(c.describe("g").expect("group").state, GroupState::PreparingRebalance);
}

#[tokio::test(start_paused = true)]
async fn an_expired_session_removes_the_member_and_the_rest_rebalance() {
    let c = coordinator(100);
    let (a, b, a_join, b_join) = two_members_join(&c).await;
    assert_eq!(a_join.generation_id, b_join.generation_id);
    let leader = a_join.leader.clone();
    leader_sync(&c, 1, &leader, Vec::new()).await;
    // Only `a` heartbeats; `b`'s session (10 s) passes.
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        c.heartbeat("g", 1, &a, None);
        c.expire_sessions();
    }
    assert_eq!(c.heartbeat("g", 1, &b, None), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(c.heartbeat("g", 1, &a, None), error_code::REBALANCE_IN_PROGRESS);
    let rejoined = c.join(join_req(&a, b"a")).await;
    assert_eq!((rejoined.generation_id, rejoined.members.len()), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn a_member_that_does_not_rejoin_is_removed_when_the_rebalance_times_out() {
    let c = coordinator(100);
    let (a, b, a_join, _) = two_members_join(&c).await;
    leader_sync(&c, 1, &a_join.leader, Vec::new()).await;
    // A third member joins; `b` never rejoins and is dropped after the rebalance timeout (30 s).
    let d = new_member(&c).await;
    let (c2, a2) = (c.clone(), a.clone());
    let a_join = tokio::spawn(async move { c2.join(join_req(&a2, b"a")).await });
    let started = Instant::now();
    let d_join = c.join(join_req(&d, b"d")).await;
    assert!(started.elapsed() >= Duration::from_secs(30));
    assert_eq!((d_join.generation_id, a_join.await.expect("join").generation_id), (2, 2));
    let members: Vec<String> =
        c.describe("g").expect("group").members.into_iter().map(|m| m.member_id).collect();
    assert!(!members.contains(&b) && members.len() == 2);
}

#[tokio::test]
async fn mismatched_protocols_and_session_timeouts_are_refused() {
    let c = coordinator(0);
    let a = new_member(&c).await;
    c.join(join_req(&a, b"a")).await;
    let mut other = join_req("", b"x");
    other.protocols = vec![("roundrobin".to_string(), Bytes::new())];
    assert_eq!(c.join(other).await.error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    let mut short = join_req("", b"x");
    short.session_timeout_ms = 10;
    assert_eq!(c.join(short).await.error_code, error_code::INVALID_SESSION_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_new_leader_adopts_the_recorded_generation_and_its_members_keep_heartbeating() {
    let old = coordinator(0);
    let a = new_member(&old).await;
    old.join(join_req(&a, b"a")).await;
    let (_, record) = leader_sync(&old, 1, &a, vec![(a.clone(), Bytes::from_static(b"x"))]).await;

    let new = coordinator(0);
    new.adopt(&record);
    assert_eq!(new.heartbeat("g", 1, &a, None), error_code::NONE);
    assert_eq!(new.check_commit("g", 1, &a, None), Some(error_code::NONE));
    assert_eq!(new.check_commit("g", 0, &a, None), Some(error_code::ILLEGAL_GENERATION));
    assert_eq!(new.check_commit("g", 1, "zombie", None), Some(error_code::UNKNOWN_MEMBER_ID));
    // A member that does not heartbeat on the new leader expires like any other.
    tokio::time::sleep(Duration::from_secs(11)).await;
    new.expire_sessions();
    assert_eq!(new.heartbeat("g", 1, &a, None), error_code::UNKNOWN_MEMBER_ID);
}

#[tokio::test(start_paused = true)]
async fn a_restarted_static_member_takes_over_its_instance_and_fences_the_old_id() {
    let c = coordinator(0);
    let mut req = join_req("", b"s");
    req.group_instance_id = Some("instance-1".to_string());
    // KIP-345: a static member joins without MEMBER_ID_REQUIRED.
    let first = c.join(req.clone()).await;
    assert_eq!((first.error_code, first.generation_id), (error_code::NONE, 1));
    let old = first.member_id.clone();
    let assignment = vec![(old.clone(), Bytes::from_static(b"p0"))];
    let SyncOutcome::Record(generation) = c.sync("g", 1, (&old, Some("instance-1")), assignment).await else {
        panic!("the leader completes the generation")
    };
    c.recorded(&generation, &old, true);
    // Restarted: same instance id, no member id.
    let second = c.join(req.clone()).await;
    assert_eq!(second.error_code, error_code::NONE);
    let new = second.member_id.clone();
    assert_ne!(new, old);
    assert_eq!(
        c.heartbeat("g", second.generation_id, &old, Some("instance-1")),
        error_code::FENCED_INSTANCE_ID
    );
    assert_eq!(
        c.check_commit("g", second.generation_id, &old, Some("instance-1")),
        Some(error_code::FENCED_INSTANCE_ID)
    );
    let mut zombie = req.clone();
    zombie.member_id = old.clone();
    assert_eq!(c.join(zombie).await.error_code, error_code::FENCED_INSTANCE_ID);
    // Leaving by instance id alone removes the current holder.
    assert_eq!(c.leave("g", "", Some("instance-1")), error_code::NONE);
    assert_eq!(c.heartbeat("g", second.generation_id, &new, None), error_code::UNKNOWN_MEMBER_ID);
}

#[tokio::test]
async fn a_new_term_forgets_groups_and_answers_parked_joins_not_coordinator() {
    let c = coordinator(60_000);
    c.observe_term(3);
    let a = new_member(&c).await;
    let (c2, a2) = (c.clone(), a.clone());
    // Parked: the initial delay is a minute.
    let parked = tokio::spawn(async move { c2.join(join_req(&a2, b"a")).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.observe_term(3);
    assert!(c.describe("g").is_some(), "the same term keeps the groups");
    c.observe_term(5);
    assert!(c.describe("g").is_none());
    assert_eq!(parked.await.expect("join").error_code, error_code::NOT_COORDINATOR);
}

/// Kafka's `InitialDelayedJoin`: members of a new group joining 0 s, 2 s and 4 s after the
/// first all make generation 1, because each new member extends the 3 s delay once more
/// (3 s → 6 s → 9 s); without the extension the third would start generation 2.
#[tokio::test(start_paused = true)]
async fn each_new_member_extends_the_initial_delay() {
    let c = coordinator(3_000);
    let ids = [new_member(&c).await, new_member(&c).await, new_member(&c).await];
    let started = Instant::now();
    let mut joins = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let (c2, id) = (c.clone(), id.clone());
        joins.push(tokio::spawn(async move { c2.join(join_req(&id, b"m")).await }));
        if i < 2 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    for join in joins {
        let joined = join.await.expect("join");
        assert_eq!((joined.error_code, joined.generation_id), (error_code::NONE, 1));
    }
    assert!(started.elapsed() >= Duration::from_secs(9), "{:?}", started.elapsed());
    assert_eq!(c.describe("g").expect("group").members.len(), 3);
}

/// The extensions stop at the rebalance timeout (5 s here): members joining at 0 s, 1 s and
/// 4 s make generation 1 at 5 s, and one joining at 5.5 s, which a further extension would
/// have taken in, starts generation 2.
#[tokio::test(start_paused = true)]
async fn the_initial_delay_extensions_stop_at_the_rebalance_timeout() {
    let c = coordinator(3_000);
    let ids = [new_member(&c).await, new_member(&c).await, new_member(&c).await, new_member(&c).await];
    let join = |id: &String| {
        let (c2, id) = (c.clone(), id.clone());
        tokio::spawn(async move {
            let mut req = join_req(&id, b"m");
            req.rebalance_timeout_ms = 5_000;
            c2.join(req).await
        })
    };
    let mut first = Vec::new();
    for (id, wait_ms) in ids[..3].iter().zip([1_000, 3_000, 1_500]) {
        first.push(join(id));
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
    let late = join(&ids[3]);
    for j in first {
        assert_eq!(j.await.expect("join").generation_id, 1);
    }
    assert_eq!(late.await.expect("join").generation_id, 2);
}
