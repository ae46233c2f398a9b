//! What a share-group chaos run's consumers saw (issue 29), beside the producers' transactions
//! in [`super::history::History`]: every delivery with its delivery count, times and the
//! answering leader's epoch; every acknowledgement sent with its outcome; every end of a share
//! session; every successful heartbeat; every ShareFetch whose acquisitions are unknown; and
//! when each transactional value's commit began. The checker (`share_check`) reads a
//! [`ShareSnapshot`] once the run is over.
//!
//! Members are named by consumer instance (`c<slot>.<n>`), not by their UUIDs, so a report's
//! examples read at once. Times are the run's (`History::now`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::share_consumer::{AckOutcome, AckType, Event};

/// One record handed to a member.
#[derive(Debug, Clone, Serialize)]
pub struct ShareDelivery {
    pub member: String,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
    pub delivery_count: i16,
    /// The ShareFetch's request was sent and its answer received: the acquisition was
    /// applied in between.
    pub sent: Duration,
    pub received: Duration,
    /// The answering leader's epoch (its Raft term); -1 if unknown.
    pub leader_epoch: i32,
    /// The acquisition lock the answer announced (ms).
    pub lock_ms: i64,
}

/// One acknowledgement of one delivered record, as sent.
#[derive(Debug, Clone, Serialize)]
pub struct ShareAck {
    pub member: String,
    pub partition: i32,
    pub offset: i64,
    /// The delivery it settles.
    pub delivery_count: i16,
    pub kind: AckType,
    pub sent: Duration,
    pub ended: Duration,
    pub outcome: AckOutcome,
}

/// A moment from which a member's locks may have been released without an acknowledgement:
/// its share session ended (closed, replaced, its connection lost or dropped, a crash).
#[derive(Debug, Clone, Serialize)]
pub struct SessionEnd {
    pub member: String,
    pub at: Duration,
    pub why: String,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct ShareSnapshot {
    pub deliveries: Vec<ShareDelivery>,
    pub acks: Vec<ShareAck>,
    pub session_ends: Vec<SessionEnd>,
    /// Successful heartbeats per member: (sent, received).
    pub heartbeats: BTreeMap<String, Vec<(Duration, Duration)>>,
    /// ShareFetches whose acquisitions are unknown: (sent, ended).
    pub unknown_fetches: Vec<(Duration, Duration)>,
    /// When the writer asked to commit each transactional value's transaction.
    pub commit_began: BTreeMap<String, Duration>,
    /// Acquired offsets without a record, acknowledged as gaps.
    pub gaps: usize,
    /// Acknowledgements dropped unsent because their session had ended.
    pub dropped_acks: usize,
    pub instances: usize,
    pub crashes: usize,
}

/// Per value, whether its fate is known to the consumers (the drain's progress): accepted or
/// rejected (applied or maybe), or delivered at the delivery limit.
#[derive(Default)]
struct Progress {
    settled: BTreeSet<String>,
    /// (partition, offset) → value, to settle a value from an acknowledgement.
    values: BTreeMap<(i32, i64), String>,
    last_delivery: Duration,
}

/// The shared, append-only record of the consumers.
#[derive(Clone, Default)]
pub struct ShareHistory {
    inner: Arc<Mutex<(ShareSnapshot, Progress)>>,
}

impl ShareHistory {
    fn with<T>(&self, f: impl FnOnce(&mut ShareSnapshot, &mut Progress) -> T) -> T {
        let mut inner = self.inner.lock().expect("share history lock");
        let (snapshot, progress) = &mut *inner;
        f(snapshot, progress)
    }

    /// Deliveries; those at `limit` settle their values (they are accepted, rejected or
    /// archived, whatever happens next).
    pub fn deliveries(&self, deliveries: Vec<ShareDelivery>, limit: i16) {
        self.with(|s, p| {
            for d in &deliveries {
                p.values.insert((d.partition, d.offset), d.value.clone());
                p.last_delivery = p.last_delivery.max(d.received);
                if d.delivery_count >= limit {
                    p.settled.insert(d.value.clone());
                }
            }
            s.deliveries.extend(deliveries);
        });
    }

    /// One consumer instance's events.
    pub fn events(&self, member: &str, events: Vec<Event>) {
        self.with(|s, p| {
            for e in events {
                record(s, p, member, e);
            }
        });
    }

    pub fn commit_began(&self, values: &[(i32, String)], at: Duration) {
        self.with(|s, _| s.commit_began.extend(values.iter().map(|(_, v)| (v.clone(), at))));
    }

    pub fn gaps(&self, n: usize) {
        self.with(|s, _| s.gaps += n);
    }

    pub fn instance(&self, crashed: bool) {
        self.with(|s, _| {
            s.instances += 1;
            s.crashes += usize::from(crashed);
        });
    }

    /// How many of `values` the consumers have not settled yet, and the last delivery's time.
    pub fn unsettled(&self, values: &[String]) -> (usize, Duration) {
        self.with(|_, p| (values.iter().filter(|v| !p.settled.contains(*v)).count(), p.last_delivery))
    }

    pub fn snapshot(&self) -> ShareSnapshot {
        self.with(|s, _| s.clone())
    }
}

fn record(s: &mut ShareSnapshot, p: &mut Progress, member: &str, event: Event) {
    match event {
        Event::Heartbeat { sent, received } => {
            s.heartbeats.entry(member.to_string()).or_default().push((sent, received))
        }
        Event::SessionEnded { at, why } => {
            s.session_ends.push(SessionEnd { member: member.to_string(), at, why: why.to_string() })
        }
        Event::FetchUnknown { sent, ended } => s.unknown_fetches.push((sent, ended)),
        Event::AcksDropped { acks, .. } => s.dropped_acks += acks.len(),
        Event::Acked { partition, acks, sent, ended, outcome } => {
            // Gaps settle no record anyone was handed.
            for a in acks.into_iter().filter(|a| a.kind != AckType::Gap) {
                let settles = matches!(a.kind, AckType::Accept | AckType::Reject)
                    && !matches!(outcome, AckOutcome::Refused(_));
                if let Some(value) = p.values.get(&(partition, a.offset)).filter(|_| settles) {
                    p.settled.insert(value.clone());
                }
                s.acks.push(ShareAck {
                    member: member.to_string(),
                    partition,
                    offset: a.offset,
                    delivery_count: a.delivery_count,
                    kind: a.kind,
                    sent,
                    ended,
                    outcome,
                });
            }
        }
    }
}
