//! The leader's consumer-group clocks across a takeover: sessions armed from the log's record
//! of each member's liveness, and that record kept fresh by the leader.

use std::collections::BTreeMap;
use std::time::Duration;

use onelog_state::consumer_group::{ConsumerGroups, GroupSettings, RevocationTimer};

use super::{ConsumerCoordinator, GroupTimes};
use crate::limits::CONSUMER_LIVENESS_RECORD_MS;

const TIMES: GroupTimes = GroupTimes { session_timeout_ms: 45_000, heartbeat_interval_ms: 5_000 };
const WALL_MS: i64 = 1_000_000;

/// One group "g" with member "m", which the log last heard from at `last_seen_ms`.
fn group(last_seen_ms: i64) -> ConsumerGroups {
    let join = onelog_state::testing::consumer_join("g", "m");
    let mut groups = ConsumerGroups::default();
    groups.heartbeat(&BTreeMap::new(), &join, &GroupSettings::default(), last_seen_ms).unwrap();
    let seen = onelog_state::command::SeenMember {
        group_id: "g".into(),
        member_id: "m".into(),
        seen_ms: last_seen_ms,
    };
    groups.record_liveness(&[seen]);
    groups
}

/// The first tick at which a new leader (term 2) fences "m", never hearing from it.
async fn fenced_after(groups: &ConsumerGroups) -> Duration {
    let coordinator = ConsumerCoordinator::default();
    let started = tokio::time::Instant::now();
    loop {
        let elapsed = started.elapsed();
        let wall = WALL_MS + elapsed.as_millis() as i64;
        if !coordinator.due(2, groups, |_| TIMES, Default::default(), wall).fences.is_empty() {
            return elapsed;
        }
        tokio::time::advance(Duration::from_millis(250)).await;
    }
}

/// Regression (issue 28, the chaos copier with `--group-protocol consumer`): every new leader
/// gave every member a full session, so under leaders changing more often than once per
/// session a member that died without leaving was never fenced and its partitions waited for
/// it. A member last heard from long ago now gets the grace (two heartbeat intervals).
#[tokio::test(start_paused = true)]
async fn a_member_silent_for_a_session_gets_only_the_grace_from_a_new_leader() {
    let fenced = fenced_after(&group(WALL_MS - 60_000)).await;
    assert_eq!(fenced, Duration::from_millis(10_000));
}

#[tokio::test(start_paused = true)]
async fn a_member_heard_recently_keeps_what_is_left_of_its_session() {
    let fenced = fenced_after(&group(WALL_MS - 5_000)).await;
    assert_eq!(fenced, Duration::from_millis(40_000));
}

#[tokio::test(start_paused = true)]
async fn a_member_never_recorded_gets_a_full_session() {
    let fenced = fenced_after(&group(0)).await;
    assert_eq!(fenced, Duration::from_millis(45_000));
}

/// The leader records what it heard once the log's record is `CONSUMER_LIVENESS_RECORD_MS`
/// old, and not again while that entry is on its way.
#[tokio::test(start_paused = true)]
async fn liveness_is_recorded_when_stale_and_once() {
    let groups = group(WALL_MS);
    let coordinator = ConsumerCoordinator::default();
    assert!(coordinator.due(1, &groups, |_| TIMES, Default::default(), WALL_MS).liveness.is_none());
    let heard = WALL_MS + CONSUMER_LIVENESS_RECORD_MS - 1;
    coordinator.heartbeat("g", "m", 45_000, RevocationTimer::Keep, heard);
    assert!(
        coordinator.due(1, &groups, |_| TIMES, Default::default(), heard).liveness.is_none(),
        "not stale yet"
    );
    let heard = WALL_MS + CONSUMER_LIVENESS_RECORD_MS;
    coordinator.heartbeat("g", "m", 45_000, RevocationTimer::Keep, heard);
    let liveness =
        coordinator.due(1, &groups, |_| TIMES, Default::default(), heard).liveness.expect("recorded");
    assert_eq!(liveness.members.len(), 1);
    assert_eq!(liveness.members[0].seen_ms, heard);
    assert!(
        coordinator.due(1, &groups, |_| TIMES, Default::default(), heard).liveness.is_none(),
        "already proposed"
    );
}
