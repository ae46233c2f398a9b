//! The share checker sees each violation it names on a crafted history, and nothing in a
//! clean one that exercises every allowed path (release and redelivery, the delivery limit, a
//! crash's release, lock expiry, a leader change, a delivery nobody saw).

use std::time::Duration;

use super::*;
use crate::chaos::history::Txn;
use crate::chaos::share_history::SessionEnd;

const LIMIT: i16 = 3;
const LOCK_MS: i64 = 15_000;
const RULES: ShareRules = ShareRules {
    delivery_count_limit: LIMIT,
    session_timeout: Duration::from_secs(45),
    read_committed: true,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn txn(values: &[&str], outcome: Outcome) -> Txn {
    Txn {
        writer: "w".into(),
        values: values.iter().map(|v| (0, v.to_string())).collect(),
        outcome,
        deliberate_abort: false,
        started: Duration::ZERO,
        ended: Duration::ZERO,
    }
}

/// A delivery of `value` at offset `offset` of partition 0, fetched over [at, at + 10 ms].
fn delivery(member: &str, offset: i64, value: &str, count: i16, at: u64, epoch: i32) -> ShareDelivery {
    ShareDelivery {
        member: member.into(),
        partition: 0,
        offset,
        value: value.into(),
        delivery_count: count,
        sent: ms(at),
        received: ms(at + 10),
        leader_epoch: epoch,
        lock_ms: LOCK_MS,
    }
}

fn ack(member: &str, offset: i64, count: i16, kind: AckType, at: u64, outcome: AckOutcome) -> ShareAck {
    ShareAck {
        member: member.into(),
        partition: 0,
        offset,
        delivery_count: count,
        kind,
        sent: ms(at),
        ended: ms(at + 10),
        outcome,
    }
}

/// Members m1 and m2 heartbeating every 5 s for 100 s: never fenceable.
fn alive(share: &mut ShareSnapshot) {
    for m in ["m1", "m2"] {
        share.heartbeats.insert(m.into(), (0..20u64).map(|i| (ms(i * 5_000), ms(i * 5_000 + 5))).collect());
    }
}

/// Records `d`, and its holder's Accept at `accept` (sent time, outcome) if any.
fn deliver(s: &mut ShareSnapshot, d: ShareDelivery, accept: Option<(u64, AckOutcome)>) {
    if let Some((at, outcome)) = accept {
        s.acks.push(ack(&d.member, d.offset, d.delivery_count, AckType::Accept, at, outcome));
    }
    s.deliveries.push(d);
}

fn kinds(v: &Violations) -> Vec<(&str, usize)> {
    v.counts.iter().map(|(k, n)| (k.as_str(), *n)).collect()
}

const APPLIED: AckOutcome = AckOutcome::Applied;

#[test]
fn a_clean_history_has_no_violations() {
    let history = Snapshot {
        txns: vec![
            txn(&["a", "b", "c", "d", "e", "f", "g", "h"], Outcome::Committed),
            txn(&["x"], Outcome::Aborted),
            txn(&["u"], Outcome::Unknown),
        ],
        ..Default::default()
    };
    let mut s = ShareSnapshot::default();
    alive(&mut s);
    s.commit_began.insert("a".into(), ms(0));
    // a: accepted at once.
    s.deliveries.push(delivery("m1", 0, "a", 1, 100, 5));
    s.acks.push(ack("m1", 0, 1, AckType::Accept, 200, APPLIED));
    // b: released by m1, redelivered to m2 at once, accepted with an unknown outcome.
    s.deliveries.push(delivery("m1", 1, "b", 1, 100, 5));
    s.acks.push(ack("m1", 1, 1, AckType::Release, 200, APPLIED));
    s.deliveries.push(delivery("m2", 1, "b", 2, 300, 5));
    s.acks.push(ack("m2", 1, 2, AckType::Accept, 400, AckOutcome::Unknown));
    // c: released at every delivery up to the limit: archived.
    for count in 1..=LIMIT {
        let at = 1_000 * u64::try_from(count).unwrap();
        s.deliveries.push(delivery("m1", 2, "c", count, at, 5));
        s.acks.push(ack("m1", 2, count, AckType::Release, at + 100, APPLIED));
    }
    // d: rejected.
    s.deliveries.push(delivery("m2", 3, "d", 1, 100, 5));
    s.acks.push(ack("m2", 3, 1, AckType::Reject, 200, APPLIED));
    // e: m1 crashed holding it (its session ended): m2 may take it at once.
    s.deliveries.push(delivery("m1", 4, "e", 1, 100, 5));
    s.session_ends.push(SessionEnd { member: "m1".into(), at: ms(150), why: "crashed".into() });
    s.deliveries.push(delivery("m2", 4, "e", 2, 500, 5));
    s.acks.push(ack("m2", 4, 2, AckType::Accept, 600, APPLIED));
    // f: m1 never acknowledged it, its lock expired, m2 took it after.
    s.deliveries.push(delivery("m1", 5, "f", 1, 20_000, 5));
    s.deliveries.push(delivery("m2", 5, "f", 2, 35_100, 5));
    s.acks.push(ack("m2", 5, 2, AckType::Accept, 35_200, APPLIED));
    // g: a new leader (epoch 6) released m1's lock.
    s.deliveries.push(delivery("m1", 6, "g", 1, 40_000, 5));
    s.deliveries.push(delivery("m2", 6, "g", 2, 41_000, 6));
    s.acks.push(ack("m2", 6, 2, AckType::Accept, 41_100, APPLIED));
    // h: its first delivery's answer never came (an unknown fetch): seen first at count 2.
    s.unknown_fetches.push((ms(50_000), ms(55_000)));
    s.deliveries.push(delivery("m1", 7, "h", 2, 70_000, 6));
    s.acks.push(ack("m1", 7, 2, AckType::Accept, 70_100, APPLIED));
    // u: of unknown outcome, delivered; x: aborted, never delivered.
    s.deliveries.push(delivery("m2", 8, "u", 1, 80_000, 6));
    s.acks.push(ack("m2", 8, 1, AckType::Accept, 80_100, APPLIED));

    let (v, counts) = check_share(&history, &s, &RULES, None);
    assert_eq!(v.total(), 0, "{v:#?}");
    let fates = (counts.accepted, counts.accepted_unknown, counts.rejected, counts.archived, counts.lost);
    // u, of unknown outcome, is in the log: its fate counts too.
    assert_eq!(fates, (6, 1, 1, 1, 0), "{counts:#?}");
    assert_eq!((counts.values_acknowledged, counts.values_aborted, counts.values_unknown), (8, 1, 1));
    assert_eq!((counts.redeliveries, counts.released), (7, 4));
    let ends: Vec<(&str, usize)> = counts.lock_ends.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    assert_eq!(
        ends,
        vec![("acknowledged", 3), ("lock expired", 1), ("new leader", 1), ("session ended", 1)],
        "b, c twice; f; g; e"
    );
}

/// One violation per kind, each on an offset of its own.
#[test]
fn each_violation_is_named() {
    let values = ["range", "rep", "order", "skip", "acc", "rej", "twice", "lock", "lost1", "lost2"];
    let mut txns = vec![txn(&values, Outcome::Committed), txn(&["ab"], Outcome::Aborted)];
    txns.push(txn(&["open", "dup", "inc"], Outcome::Committed));
    let history = Snapshot { txns, ..Default::default() };
    let mut s = ShareSnapshot::default();
    alive(&mut s);
    // Out of range: a fourth delivery with a limit of 3, the first three unseen (their
    // fetches' answers lost).
    s.unknown_fetches.push((ms(40_000), ms(41_000)));
    deliver(&mut s, delivery("m1", 0, "range", LIMIT + 1, 50_000, 5), Some((50_100, APPLIED)));
    // Repeated: count 1 twice.
    deliver(&mut s, delivery("m1", 1, "rep", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m2", 1, "rep", 1, 300, 5), Some((400, AckOutcome::Unknown)));
    // Order: count 2 answered, then count 1 asked for.
    deliver(&mut s, delivery("m1", 2, "order", 2, 16_000, 5), Some((16_100, APPLIED)));
    deliver(&mut s, delivery("m2", 2, "order", 1, 17_000, 5), None);
    // Skipped: count 1, then count 3, nothing unknown in flight (the lock had expired).
    deliver(&mut s, delivery("m1", 3, "skip", 1, 100, 5), None);
    deliver(&mut s, delivery("m2", 3, "skip", 3, 20_000, 5), Some((20_100, APPLIED)));
    // Redelivered after an applied accept (and after an applied reject).
    deliver(&mut s, delivery("m1", 4, "acc", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m2", 4, "acc", 2, 20_000, 5), Some((20_100, AckOutcome::Unknown)));
    deliver(&mut s, delivery("m1", 5, "rej", 1, 100, 5), None);
    s.acks.push(ack("m1", 5, 1, AckType::Reject, 200, APPLIED));
    deliver(&mut s, delivery("m2", 5, "rej", 2, 20_000, 5), Some((20_100, APPLIED)));
    // Accepted twice (m1's accept unknown until m2's count 2 came back: also after accept).
    deliver(&mut s, delivery("m1", 6, "twice", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m2", 6, "twice", 2, 20_000, 5), Some((20_100, APPLIED)));
    // Lock overlap: m1 holds it (no acknowledgement, session alive), m2 gets count 2 in the
    // same epoch 1 s later.
    deliver(&mut s, delivery("m1", 7, "lock", 1, 100, 5), None);
    deliver(&mut s, delivery("m2", 7, "lock", 2, 1_100, 5), Some((1_200, APPLIED)));
    // Lost: released below the limit and never back; acknowledged and never delivered (lost2).
    deliver(&mut s, delivery("m1", 8, "lost1", 1, 100, 5), None);
    s.acks.push(ack("m1", 8, 1, AckType::Release, 200, APPLIED));
    // Aborted delivered; open transaction delivered; phantom; duplicate; inconsistent offset.
    deliver(&mut s, delivery("m1", 9, "ab", 1, 100, 5), Some((200, APPLIED)));
    s.commit_began.insert("open".into(), ms(5_000));
    deliver(&mut s, delivery("m1", 10, "open", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m1", 11, "ghost", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m1", 12, "dup", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m1", 13, "dup", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m1", 14, "inc", 1, 100, 5), Some((200, APPLIED)));
    deliver(&mut s, delivery("m2", 14, "inc2", 2, 20_000, 5), Some((20_100, AckOutcome::Unknown)));

    let (v, counts) = check_share(&history, &s, &RULES, None);
    assert_eq!(
        kinds(&v),
        vec![
            ("aborted delivered", 1),
            ("accepted twice", 1),
            ("delivery count order", 1),
            ("delivery count out of range", 1),
            ("delivery count repeated", 1),
            ("delivery count skipped", 1),
            ("duplicate", 1),
            ("inconsistent offset", 1),
            ("lock overlap", 1),
            ("lost", 2),
            ("open transaction delivered", 1),
            ("phantom", 2),                  // "ghost", and "inc2" at the inconsistent offset
            ("redelivered after accept", 3), // acc, twice, inc
            ("redelivered after reject", 1),
        ],
        "{v:#?}"
    );
    assert_eq!(counts.lost, 2);
}

/// The lock rule's exceptions, each alone: an acknowledgement sent (even of unknown outcome),
/// the holder's session ending, a heartbeat gap long enough for a fence, a new leader epoch;
/// and a refused acknowledgement is no exception.
#[test]
fn a_lock_ends_only_by_what_can_end_it() {
    let history = Snapshot { txns: vec![txn(&["v"], Outcome::Committed)], ..Default::default() };
    let overlap =
        |s: &ShareSnapshot| check_share(&history, s, &RULES, None).0.counts.get("lock overlap").copied();
    let base = || {
        let mut s = ShareSnapshot::default();
        alive(&mut s);
        s.deliveries.push(delivery("m1", 0, "v", 1, 100, 5));
        s.deliveries.push(delivery("m2", 0, "v", 2, 2_000, 5));
        s.acks.push(ack("m2", 0, 2, AckType::Accept, 2_100, APPLIED));
        s
    };
    assert_eq!(overlap(&base()), Some(1));
    let mut released = base();
    released.acks.push(ack("m1", 0, 1, AckType::Release, 1_000, AckOutcome::Unknown));
    assert_eq!(overlap(&released), None, "a release in doubt may have been applied");
    let mut refused = base();
    refused.acks.push(ack("m1", 0, 1, AckType::Release, 1_000, AckOutcome::Refused(121)));
    assert_eq!(overlap(&refused), Some(1), "a refused release leaves the lock");
    let mut ended = base();
    ended.session_ends.push(SessionEnd { member: "m1".into(), at: ms(1_500), why: "connection lost".into() });
    assert_eq!(overlap(&ended), None);
    let mut silent = base();
    silent.heartbeats.insert("m1".into(), vec![(ms(0), ms(5)), (ms(60_000), ms(60_005))]);
    // m1's last heartbeat keeps it alive until 44 s: still alive at 2 s.
    assert_eq!(overlap(&silent), Some(1));
    silent.heartbeats.insert("m1".into(), vec![(ms(0), ms(5))]);
    silent.deliveries[0] = delivery("m1", 0, "v", 1, 43_000, 5);
    silent.deliveries[1] = delivery("m2", 0, "v", 2, 45_000, 5);
    assert_eq!(overlap(&silent), None, "m1 may have been fenced at 44 s");
    let mut moved = base();
    moved.deliveries[1].leader_epoch = 6;
    assert_eq!(overlap(&moved), None, "a new leader released every lock");
}

/// A value last seen below the limit is archived by deliveries nobody saw when enough fetches
/// of unknown outcome were in flight after its release, and lost when none was; the leader's
/// totals must lie within what the history allows.
#[test]
fn unseen_deliveries_and_the_leaders_totals() {
    let history = Snapshot { txns: vec![txn(&["p"], Outcome::Committed)], ..Default::default() };
    let mut s = ShareSnapshot::default();
    alive(&mut s);
    s.deliveries.push(delivery("m1", 0, "p", LIMIT - 1, 100, 5));
    s.acks.push(ack("m1", 0, LIMIT - 1, AckType::Release, 200, APPLIED));
    s.unknown_fetches.push((ms(50), ms(150)));
    let (v, counts) = check_share(&history, &s, &RULES, None);
    assert_eq!(
        (kinds(&v), counts.archived_unseen),
        (vec![("lost", 1)], 0),
        "a fetch ended before the release"
    );
    s.unknown_fetches.push((ms(300), ms(400)));
    let (v, counts) = check_share(&history, &s, &RULES, None);
    assert_eq!((v.total(), counts.archived_unseen), (0, 1), "{v:#?}");

    let totals = |accepted, archived, redelivered| BrokerTotals { accepted, archived, redelivered };
    let (v, _) = check_share(&history, &s, &RULES, Some(&totals(0, 1, 1)));
    assert_eq!(v.total(), 0, "the leader archived it after a third delivery: {v:#?}");
    let (v, _) = check_share(&history, &s, &RULES, Some(&totals(1, 0, 0)));
    assert_eq!(kinds(&v), vec![("share totals", 2)], "an accept nobody sent, a redelivery missing: {v:#?}");
}
