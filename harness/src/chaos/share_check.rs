//! The share-group checker (issue 29): from what the producers were told and what the share
//! consumers saw, every way a KIP-932 share group could have broken its promises.
//!
//! A record's delivery count is its version: the broker raises it by one with each
//! acquisition, in log order, and keeps it through releases, lock expiry and leader changes.
//! So the deliveries of one offset, ordered by count, are its acquisitions in log order, and
//! most rules need no clock:
//!
//! - **delivery count out of range**: a count below 1 or above the group's
//!   `share.delivery.count.limit`;
//! - **delivery count repeated**: two deliveries of one offset with the same count;
//! - **delivery count order**: a delivery answered before another was asked for, with a count
//!   not below the later one's;
//! - **delivery count skipped**: a count missing (the first one not 1, or a jump of more than
//!   one) with no ShareFetch whose acquisitions are unknown (no answer, or
//!   NOT_LEADER_OR_FOLLOWER after the leader may have proposed) in flight between the
//!   deliveries around it;
//! - **redelivered after accept** / **redelivered after reject**: a delivery with a higher count
//!   than one its holder accepted (or rejected) with an applied acknowledgement;
//! - **accepted twice**: two applied Accepts of one offset;
//! - **lock overlap**: two members (or one, twice) holding one record under a live lock. For
//!   consecutive deliveries A then B of an offset (by count), a violation iff all of:
//!   A and B were answered by the same leader epoch (a new leader releases every lock before
//!   its first acquisition); B was answered before A's lock could expire (B.received +
//!   250 ms < A.sent + A's lock: the broker's deadline is its clock at acquisition + the lock,
//!   after A.sent on the same machine's clock); A's holder sent no acknowledgement of A that
//!   was not refused before B.received; A's holder's session did not end (closed, replaced,
//!   connection lost, crash; taken from the last answer on that connection, since the broker
//!   may have seen the close first) between A.sent and B.received; and A's holder cannot have
//!   been fenced meanwhile (its successful heartbeats cover [A.sent, B.received]: each one
//!   re-arms its session from when it was processed, so a heartbeat answered at r and sent at
//!   s keeps it alive over [r, s + session timeout − 1 s]);
//! - **lost**: an acknowledged value never delivered, or a delivered value whose last delivery
//!   ended without an accept or reject (applied or of unknown outcome) below the delivery limit
//!   and never came back after the drain (released, its lock expired or its session ended),
//!   unless enough ShareFetches of unknown outcome were in flight after it for deliveries
//!   nobody saw to have taken it to the limit (counted as archived unseen);
//! - **share totals**: the leader's running totals of the group after the drain (accepted,
//!   archived, redelivered, from `/metrics`) outside what the consumers' history allows;
//! - **phantom** (a value no producer sent), **duplicate** (a value at two offsets),
//!   **inconsistent offset** (one offset, two values);
//! - with a read_committed group: **aborted delivered** (a value of an aborted transaction)
//!   and **open transaction delivered** (a value delivered before its writer asked to commit).
//!
//! Every value of a committed (acknowledged) write ends accepted, rejected, or archived after
//! exactly `limit` deliveries; a write of unknown outcome may be delivered or not. Pure, so its
//! unit tests (`share_check_tests.rs`) feed it each violation by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use super::checker::Violations;
use super::history::{Outcome, Snapshot};
use super::share_history::{ShareAck, ShareDelivery, ShareSnapshot};
use crate::share_consumer::{AckOutcome, AckType};

/// What the checker judges by: the group's configs.
#[derive(Debug, Clone, Copy)]
pub struct ShareRules {
    pub delivery_count_limit: i16,
    pub session_timeout: Duration,
    pub read_committed: bool,
}

/// The broker's lock deadline comes from its wall clock, the history's times from the
/// harness's monotonic clock on the same machine: a lock is taken as possibly expired this
/// much before A.sent + lock.
const CLOCK_SLACK: Duration = Duration::from_millis(250);
/// The leader looks for passed member sessions every 250 ms (`limits::
/// GROUP_SESSION_CHECK_INTERVAL_MS`); a heartbeat keeps its member alive for the session
/// timeout less this.
const FENCE_SLACK: Duration = Duration::from_secs(1);

/// The run's figures.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ShareCounts {
    /// Values the producers were told are written (acknowledged, or in a committed
    /// transaction); of unknown outcome; in aborted transactions.
    pub values_acknowledged: usize,
    pub values_unknown: usize,
    pub values_aborted: usize,
    pub deliveries: usize,
    pub records_delivered: usize,
    /// Deliveries with a count above 1.
    pub redeliveries: usize,
    /// Values' fates: accepted (applied), accepted (outcome unknown), rejected, archived at
    /// the delivery limit, lost.
    pub accepted: usize,
    pub accepted_unknown: usize,
    pub rejected: usize,
    pub archived: usize,
    /// Last seen below the limit and never again, with enough ShareFetches of unknown outcome
    /// after it for deliveries nobody saw to have taken it to the limit.
    pub archived_unseen: usize,
    pub lost: usize,
    /// Accept and Reject acknowledgements sent, applied or of unknown outcome.
    pub accept_acks_applied: usize,
    pub accept_acks_unknown: usize,
    pub reject_acks_applied: usize,
    pub reject_acks_unknown: usize,
    /// The leader's totals after the drain.
    pub broker: Option<BrokerTotals>,
    /// Release acknowledgements applied.
    pub released: usize,
    /// Deliveries whose lock ended with no acknowledgement applied or in doubt (expired,
    /// session ended, leader changed, acknowledgement refused).
    pub unacknowledged: usize,
    pub refused_acks: usize,
    pub dropped_acks: usize,
    pub gaps: usize,
    pub unknown_fetches: usize,
    pub session_ends: usize,
    pub instances: usize,
    pub crashes: usize,
    /// Leader epochs that answered deliveries.
    pub leader_epochs: usize,
    /// Consecutive deliveries of one offset by how the first one's lock may have ended before
    /// the second (the lock rule; "held" pairs are lock overlaps).
    pub lock_ends: BTreeMap<String, usize>,
    /// The group's lag after the drain (DescribeShareGroupOffsets), summed over partitions.
    pub final_lag: Option<i64>,
    /// From the producers' stop to every acknowledged value settled.
    pub drained_ms: Option<u128>,
}

/// What the rules look up.
struct Index<'a> {
    share: &'a ShareSnapshot,
    outcome_of: BTreeMap<&'a str, Outcome>,
    /// (partition, offset) → deliveries by (count, received).
    by_offset: BTreeMap<(i32, i64), Vec<&'a ShareDelivery>>,
    /// (partition, offset, delivery count) → acknowledgements of that delivery.
    acks: BTreeMap<(i32, i64, i16), Vec<&'a ShareAck>>,
    session_ends: BTreeMap<&'a str, Vec<Duration>>,
}

impl<'a> Index<'a> {
    fn new(history: &'a Snapshot, share: &'a ShareSnapshot) -> Self {
        let outcome_of = history
            .txns
            .iter()
            .flat_map(|t| t.values.iter().map(move |(_, v)| (v.as_str(), t.outcome)))
            .collect();
        let mut by_offset: BTreeMap<(i32, i64), Vec<&ShareDelivery>> = BTreeMap::new();
        for d in &share.deliveries {
            by_offset.entry((d.partition, d.offset)).or_default().push(d);
        }
        for ds in by_offset.values_mut() {
            ds.sort_by_key(|d| (d.delivery_count, d.received));
        }
        let mut acks: BTreeMap<(i32, i64, i16), Vec<&ShareAck>> = BTreeMap::new();
        for a in &share.acks {
            acks.entry((a.partition, a.offset, a.delivery_count)).or_default().push(a);
        }
        let mut session_ends: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
        for e in &share.session_ends {
            session_ends.entry(e.member.as_str()).or_default().push(e.at);
        }
        Index { share, outcome_of, by_offset, acks, session_ends }
    }

    /// The acknowledgements of delivery `d` by its holder that may have been applied.
    fn acks_of(&self, d: &ShareDelivery) -> impl Iterator<Item = &&'a ShareAck> + '_ {
        let member = d.member.clone();
        let acks = self.acks.get(&(d.partition, d.offset, d.delivery_count)).into_iter().flatten();
        acks.filter(move |a| a.member == member && !matches!(a.outcome, AckOutcome::Refused(_)))
    }

    fn session_ended(&self, member: &str, from: Duration, to: Duration) -> bool {
        self.session_ends.get(member).is_some_and(|ends| ends.iter().any(|at| from <= *at && *at <= to))
    }

    /// A ShareFetch whose acquisitions are unknown was in flight between `from` and `to`.
    fn unknown_between(&self, from: Duration, to: Duration) -> bool {
        self.share.unknown_fetches.iter().any(|(sent, ended)| *sent < to && *ended > from)
    }
}

/// The share group's running totals, from the leader's `/metrics` after the drain
/// (`share_group_records_*`: Kafka's share-partition totals summed over the group).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BrokerTotals {
    pub accepted: u64,
    /// Rejected, or archived at the delivery count limit.
    pub archived: u64,
    /// Deliveries after a record's first.
    pub redelivered: u64,
}

/// Checks a share run; with the leader's totals when it could tell them.
pub fn check_share(
    history: &Snapshot,
    share: &ShareSnapshot,
    rules: &ShareRules,
    broker: Option<&BrokerTotals>,
) -> (Violations, ShareCounts) {
    let ix = Index::new(history, share);
    let mut v = Violations::default();
    let mut lock_ends = BTreeMap::new();
    check_values(&ix, rules, &mut v);
    for ds in ix.by_offset.values() {
        check_counts(&ix, rules, ds, &mut v);
        check_pairs(&ix, rules, ds, (&mut v, &mut lock_ends));
    }
    let mut counts = fates(&ix, history, rules, &mut v);
    tally(&ix, &mut counts);
    counts.lock_ends = lock_ends;
    if let Some(broker) = broker {
        check_totals(&counts, broker, &mut v);
    }
    counts.broker = broker.copied();
    (v, counts)
}

/// Phantom, duplicate, inconsistent offset, aborted and open-transaction deliveries.
fn check_values(ix: &Index, rules: &ShareRules, v: &mut Violations) {
    let mut offsets_of: BTreeMap<&str, BTreeSet<(i32, i64)>> = BTreeMap::new();
    for ((partition, offset), ds) in &ix.by_offset {
        let values: BTreeSet<&str> = ds.iter().map(|d| d.value.as_str()).collect();
        if values.len() > 1 {
            v.add("inconsistent offset", format!("{partition}/{offset}: {values:?}"));
        }
        for value in values {
            offsets_of.entry(value).or_default().insert((*partition, *offset));
        }
    }
    for (value, offsets) in &offsets_of {
        if offsets.len() > 1 {
            v.add("duplicate", format!("{value:?} at {offsets:?}"));
        }
        match ix.outcome_of.get(value) {
            None => v.add("phantom", format!("{value:?} at {offsets:?} was never sent")),
            Some(Outcome::Aborted) if rules.read_committed => {
                v.add("aborted delivered", format!("{value:?} of an aborted transaction at {offsets:?}"))
            }
            _ => {}
        }
    }
    if !rules.read_committed {
        return;
    }
    for d in &ix.share.deliveries {
        if let Some(began) = ix.share.commit_began.get(&d.value).filter(|began| d.received < **began) {
            v.add(
                "open transaction delivered",
                format!(
                    "{:?} at {}/{} to {} at {:?}, its commit began at {began:?}",
                    d.value, d.partition, d.offset, d.member, d.received
                ),
            );
        }
    }
}

fn describe(d: &ShareDelivery) -> String {
    format!(
        "{}/{} ({:?}) count {} to {} [{:.3}s, {:.3}s] epoch {}",
        d.partition,
        d.offset,
        d.value,
        d.delivery_count,
        d.member,
        d.sent.as_secs_f64(),
        d.received.as_secs_f64(),
        d.leader_epoch
    )
}

/// One offset's counts: in range, never repeated, rising with time, none skipped unseen.
fn check_counts(ix: &Index, rules: &ShareRules, ds: &[&ShareDelivery], v: &mut Violations) {
    for d in ds {
        if d.delivery_count < 1 || d.delivery_count > rules.delivery_count_limit {
            v.add(
                "delivery count out of range",
                format!("{} (limit {})", describe(d), rules.delivery_count_limit),
            );
        }
    }
    for pair in ds.windows(2) {
        if pair[0].delivery_count == pair[1].delivery_count {
            v.add("delivery count repeated", format!("{} and {}", describe(pair[0]), describe(pair[1])));
        }
    }
    for a in ds {
        // Equal counts are "repeated" above.
        for b in ds.iter().filter(|b| a.received < b.sent && a.delivery_count > b.delivery_count) {
            v.add(
                "delivery count order",
                format!("{} answered before {} was asked", describe(a), describe(b)),
            );
        }
    }
    let (mut count, mut since) = (0i16, Duration::ZERO);
    for d in ds {
        if d.delivery_count > count + 1 && !ix.unknown_between(since, d.received) {
            v.add(
                "delivery count skipped",
                format!("{} after count {count}, no ShareFetch of unknown outcome in between", describe(d)),
            );
        }
        if d.delivery_count > count {
            (count, since) = (d.delivery_count, d.sent);
        }
    }
}

/// Consecutive deliveries of one offset: nothing after an applied accept or reject, no two
/// live locks, no second applied accept.
fn check_pairs(
    ix: &Index,
    rules: &ShareRules,
    ds: &[&ShareDelivery],
    (v, lock_ends): (&mut Violations, &mut BTreeMap<String, usize>),
) {
    for pair in ds.windows(2).filter(|p| p[0].delivery_count < p[1].delivery_count) {
        let (a, b) = (pair[0], pair[1]);
        for ack in ix.acks_of(a).filter(|x| x.outcome == AckOutcome::Applied) {
            match ack.kind {
                AckType::Accept => {
                    v.add("redelivered after accept", format!("{} after {}", describe(b), describe(a)))
                }
                AckType::Reject => {
                    v.add("redelivered after reject", format!("{} after {}", describe(b), describe(a)))
                }
                AckType::Release | AckType::Gap => {}
            }
        }
        let end = lock_end(ix, rules, a, b);
        *lock_ends.entry(end.name().to_string()).or_default() += 1;
        if end == LockEnd::Held {
            let until = lock_until(a).as_secs_f64();
            v.add(
                "lock overlap",
                format!("{} while {} held it, its lock until {until:.3}s", describe(b), describe(a)),
            );
        }
    }
    let accepts = ds
        .iter()
        .flat_map(|d| ix.acks_of(d))
        .filter(|a| a.kind == AckType::Accept && a.outcome == AckOutcome::Applied);
    let accepts: Vec<&&ShareAck> = accepts.collect();
    if accepts.len() > 1 {
        let by: Vec<String> =
            accepts.iter().map(|a| format!("{} (count {})", a.member, a.delivery_count)).collect();
        v.add(
            "accepted twice",
            format!("{}/{} ({:?}) by {by:?}", ds[0].partition, ds[0].offset, ds[0].value),
        );
    }
}

/// How A's lock ended before B's acquisition, by the module header's lock rule; `Held` is a
/// violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockEnd {
    /// B was answered before A was asked for: a count order violation, not this one.
    OutOfOrder,
    NewLeader,
    Expired,
    Acknowledged,
    SessionEnded,
    MaybeFenced,
    Held,
}

impl LockEnd {
    fn name(self) -> &'static str {
        match self {
            LockEnd::OutOfOrder => "out of order",
            LockEnd::NewLeader => "new leader",
            LockEnd::Expired => "lock expired",
            LockEnd::Acknowledged => "acknowledged",
            LockEnd::SessionEnded => "session ended",
            LockEnd::MaybeFenced => "maybe fenced",
            LockEnd::Held => "held (violation)",
        }
    }
}

/// The module header's lock rule: what may have ended A's lock before B was acquired.
fn lock_end(ix: &Index, rules: &ShareRules, a: &ShareDelivery, b: &ShareDelivery) -> LockEnd {
    if b.received <= a.sent {
        return LockEnd::OutOfOrder;
    }
    if a.leader_epoch < 0 || a.leader_epoch != b.leader_epoch {
        return LockEnd::NewLeader;
    }
    if b.received + CLOCK_SLACK >= lock_until(a) {
        return LockEnd::Expired;
    }
    if ix.acks_of(a).any(|ack| ack.sent < b.received) {
        return LockEnd::Acknowledged;
    }
    if ix.session_ended(&a.member, a.sent, b.received) {
        return LockEnd::SessionEnded;
    }
    if possibly_fenced(ix.share.heartbeats.get(&a.member), a.sent, b.received, rules.session_timeout) {
        return LockEnd::MaybeFenced;
    }
    LockEnd::Held
}

/// The earliest A's lock can expire: the broker's deadline is its clock after A.sent plus the
/// lock.
fn lock_until(a: &ShareDelivery) -> Duration {
    a.sent + Duration::from_millis(u64::try_from(a.lock_ms).unwrap_or(0))
}

/// Whether the member's heartbeats leave a moment in [from, to] at which the broker may have
/// fenced it (`heartbeats`: (sent, received), in order).
fn possibly_fenced(
    heartbeats: Option<&Vec<(Duration, Duration)>>,
    from: Duration,
    to: Duration,
    session: Duration,
) -> bool {
    let keeps = session.saturating_sub(FENCE_SLACK);
    let mut alive_until = from;
    for (sent, received) in heartbeats.into_iter().flatten() {
        if *received > alive_until {
            return true;
        }
        alive_until = alive_until.max(*sent + keeps);
        if alive_until > to {
            return false;
        }
    }
    true
}

/// Every value's fate: each value delivered (whatever its write's outcome: it is in the log)
/// and each acknowledged value never delivered; lost values are violations.
fn fates(ix: &Index, history: &Snapshot, rules: &ShareRules, v: &mut Violations) -> ShareCounts {
    let mut counts = ShareCounts::default();
    // Each value's latest delivery (highest count, then latest answer).
    let mut last_of: BTreeMap<&str, &ShareDelivery> = BTreeMap::new();
    for d in &ix.share.deliveries {
        let later = |l: &&ShareDelivery| (d.delivery_count, d.received) > (l.delivery_count, l.received);
        if last_of.get(d.value.as_str()).map_or(true, later) {
            last_of.insert(d.value.as_str(), d);
        }
    }
    for last in last_of.values() {
        fate(ix, rules, last, &mut counts, v);
    }
    for t in &history.txns {
        let n = t.values.len();
        match t.outcome {
            Outcome::Committed => counts.values_acknowledged += n,
            Outcome::Unknown => counts.values_unknown += n,
            Outcome::Aborted => counts.values_aborted += n,
        }
        if t.outcome != Outcome::Committed {
            continue;
        }
        for (partition, value) in t.values.iter().filter(|(_, value)| !last_of.contains_key(value.as_str())) {
            counts.lost += 1;
            let (writer, ended) = (&t.writer, t.ended);
            v.add("lost", format!("{value:?} (partition {partition}, acknowledged by {writer} at {ended:?}) never delivered"));
        }
    }
    counts
}

fn fate(ix: &Index, rules: &ShareRules, last: &ShareDelivery, counts: &mut ShareCounts, v: &mut Violations) {
    let acks: Vec<&&ShareAck> = ix.acks_of(last).collect();
    let with = |kind: AckType, outcome: Option<AckOutcome>| {
        acks.iter().any(|a| a.kind == kind && outcome.map_or(true, |o| a.outcome == o))
    };
    if with(AckType::Accept, Some(AckOutcome::Applied)) {
        counts.accepted += 1;
    } else if with(AckType::Accept, None) {
        counts.accepted_unknown += 1;
    } else if with(AckType::Reject, None) {
        counts.rejected += 1;
    } else if last.delivery_count >= rules.delivery_count_limit {
        counts.archived += 1;
    } else if last.delivery_count.saturating_add(unseen(ix, last, &acks)) >= rules.delivery_count_limit {
        counts.archived_unseen += 1;
    } else {
        counts.lost += 1;
        let how = if with(AckType::Release, None) { "released" } else { "not acknowledged" };
        v.add("lost", format!("{} then {how}, never delivered again", describe(last)));
    }
}

/// How many deliveries of a record nobody saw may have followed `last`: one per ShareFetch
/// of unknown outcome in flight after the record could be acquired again (its release was
/// sent, or else `last` was asked for). Each of them takes a record at most once.
fn unseen(ix: &Index, last: &ShareDelivery, acks: &[&&ShareAck]) -> i16 {
    let released = acks.iter().filter(|a| a.kind == AckType::Release).map(|a| a.sent).min();
    let from = released.unwrap_or(last.sent);
    let n = ix.share.unknown_fetches.iter().filter(|(_, ended)| *ended > from).count();
    i16::try_from(n).unwrap_or(i16::MAX)
}

/// The leader's running totals of the group against what the consumers saw: the records it
/// counts accepted lie between the Accepts applied and those applied or in doubt; those it
/// counts archived (rejected, or at the limit) between what the consumers saw rejected or
/// delivered at the limit and that plus every fate in doubt; and it redelivered at least what
/// the consumers saw redelivered.
fn check_totals(counts: &ShareCounts, broker: &BrokerTotals, v: &mut Violations) {
    let accepted = (counts.accept_acks_applied, counts.accept_acks_applied + counts.accept_acks_unknown);
    let archived_low = counts.reject_acks_applied + counts.archived;
    let in_doubt = counts.reject_acks_unknown + counts.archived_unseen + counts.accepted_unknown;
    let archived = (archived_low, archived_low + in_doubt);
    let redelivered = (counts.redeliveries, usize::MAX);
    for (name, total, (low, high)) in [
        ("accepted", broker.accepted, accepted),
        ("archived", broker.archived, archived),
        ("redelivered", broker.redelivered, redelivered),
    ] {
        let total = usize::try_from(total).unwrap_or(usize::MAX);
        if total < low || total > high {
            let high = if high == usize::MAX { "-".to_string() } else { high.to_string() };
            let why =
                format!("the leader counts {total} records {name}, the consumers' history {low}..={high}");
            v.add("share totals", why);
        }
    }
}

/// The figures of the deliveries and acknowledgements themselves.
fn tally(ix: &Index, counts: &mut ShareCounts) {
    let s = ix.share;
    counts.deliveries = s.deliveries.len();
    counts.records_delivered = ix.by_offset.len();
    counts.redeliveries = s.deliveries.iter().filter(|d| d.delivery_count > 1).count();
    counts.released =
        s.acks.iter().filter(|a| a.kind == AckType::Release && a.outcome == AckOutcome::Applied).count();
    counts.refused_acks = s.acks.iter().filter(|a| matches!(a.outcome, AckOutcome::Refused(_))).count();
    let acks = |kind: AckType, outcome: AckOutcome| {
        s.acks.iter().filter(|a| a.kind == kind && a.outcome == outcome).count()
    };
    counts.accept_acks_applied = acks(AckType::Accept, AckOutcome::Applied);
    counts.accept_acks_unknown = acks(AckType::Accept, AckOutcome::Unknown);
    counts.reject_acks_applied = acks(AckType::Reject, AckOutcome::Applied);
    counts.reject_acks_unknown = acks(AckType::Reject, AckOutcome::Unknown);
    counts.unacknowledged = s.deliveries.iter().filter(|d| ix.acks_of(d).next().is_none()).count();
    counts.dropped_acks = s.dropped_acks;
    counts.gaps = s.gaps;
    counts.unknown_fetches = s.unknown_fetches.len();
    counts.session_ends = s.session_ends.len();
    counts.instances = s.instances;
    counts.crashes = s.crashes;
    counts.leader_epochs = s.deliveries.iter().map(|d| d.leader_epoch).collect::<BTreeSet<_>>().len();
}

#[cfg(test)]
#[path = "share_check_tests.rs"]
mod tests;
