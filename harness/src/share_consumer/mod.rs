//! A small KIP-932 share-group consumer on [`RawClient`], for the harness (issue 29's chaos
//! workload, and any test that wants share-group traffic it can see on the wire).
//!
//! - Membership (`heartbeat`): a task with its own connection heartbeats at the interval the
//!   broker answers; the assignment it receives is what the consumer fetches.
//! - The share session (KIP-932's ShareFetch sessions): one connection to the Raft leader
//!   (`leader`), epoch 0 opens the session, each request advances it, -1 closes it. The
//!   broker binds the session to the connection, so a lost connection, a NOT_LEADER_OR_FOLLOWER
//!   answer (a new leader released every lock), SHARE_SESSION_NOT_FOUND or
//!   INVALID_SHARE_SESSION_EPOCH ends it: the records it held are gone and their pending
//!   acknowledgements are dropped unsent; the next `poll` opens a new one.
//! - Records (`wire`): only offsets inside the AcquiredRecords ranges are handed to the caller
//!   with their delivery counts; acquired offsets without a record are acknowledged as gaps.
//! - Acknowledgements: the caller chooses each record's type (`acknowledge`); they go out with
//!   the next ShareFetch (piggybacked) or with ShareAcknowledge (`commit`, and for partitions no
//!   longer assigned).
//!
//! Everything a checker needs to judge the broker is reported as [`Event`]s with times from
//! the config's clock: successful heartbeats, ends of sessions, fetches whose acquisitions are
//! unknown, and each acknowledgement with its outcome (applied, refused, unknown).

mod heartbeat;
mod leader;
mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use kafka_compat::error_code::{
    GROUP_AUTHORIZATION_FAILED, INVALID_RECORD_STATE, INVALID_REQUEST, INVALID_SHARE_SESSION_EPOCH,
    NOT_LEADER_OR_FOLLOWER, SHARE_SESSION_NOT_FOUND, UNSUPPORTED_VERSION,
};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse};
use serde::Serialize;

pub use heartbeat::Membership;
pub use leader::{connect_leader, find_leader, set_group_configs, share_lag, Leader};

use crate::raw_client::RawClient;

/// The time of an event, as the caller measures a run (e.g. from its start).
pub type Clock = Arc<dyn Fn() -> Duration + Send + Sync>;
type Events = Arc<Mutex<Vec<Event>>>;

/// KIP-932's share-session epoch that closes the session.
const FINAL_EPOCH: i32 = -1;
/// A ShareFetch may take its MaxWaitMs and this much more before the connection is given up.
const FETCH_TIMEOUT_EXTRA: Duration = Duration::from_secs(5);
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Top-level codes returned before any acknowledgement is looked at (Kafka 4.4's order,
/// `share_common::check` and the session step): the acknowledgements were not applied.
const REFUSED_BEFORE_ACKS: [i16; 5] = [
    SHARE_SESSION_NOT_FOUND,
    INVALID_SHARE_SESSION_EPOCH,
    INVALID_REQUEST,
    GROUP_AUTHORIZATION_FAILED,
    UNSUPPORTED_VERSION,
];

#[derive(Clone)]
pub struct ShareConsumerConfig {
    pub bootstrap: Vec<SocketAddr>,
    pub group: String,
    pub topic: String,
    /// The member's own id (a UUID's text, as KIP-932 clients choose it).
    pub member_id: String,
    pub max_wait_ms: i32,
    /// MaxRecords and BatchSize of each ShareFetch.
    pub max_records: i32,
    pub clock: Clock,
    /// A deliberately broken client (the checker's self-test): it hands out every record of
    /// the returned batches, not only the acquired ones.
    pub keep_unacquired: bool,
}

impl ShareConsumerConfig {
    /// A new member of `group` reading `topic`, with a fresh id and a clock from now.
    pub fn new(bootstrap: &str, group: &str, topic: &str) -> Result<Self> {
        let bootstrap = bootstrap
            .split(',')
            .map(|a| a.trim().parse().with_context(|| format!("bootstrap address {a:?}")))
            .collect::<Result<Vec<SocketAddr>>>()?;
        let start = Instant::now();
        Ok(ShareConsumerConfig {
            bootstrap,
            group: group.to_string(),
            topic: topic.to_string(),
            member_id: uuid::Uuid::new_v4().to_string(),
            max_wait_ms: 500,
            max_records: 100,
            clock: Arc::new(move || start.elapsed()),
            keep_unacquired: false,
        })
    }
}

/// KIP-932's acknowledge types (0 Gap, 1 Accept, 2 Release, 3 Reject).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum AckType {
    Gap,
    Accept,
    Release,
    Reject,
}

impl AckType {
    fn wire(self) -> i8 {
        match self {
            AckType::Gap => 0,
            AckType::Accept => 1,
            AckType::Release => 2,
            AckType::Reject => 3,
        }
    }
}

/// One acknowledgement of a held record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ack {
    pub offset: i64,
    /// The delivery it settles.
    pub delivery_count: i16,
    pub kind: AckType,
}

/// A record this member holds under an acquisition lock.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub partition: i32,
    pub offset: i64,
    pub delivery_count: i16,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub transactional: bool,
}

/// One ShareFetch answered.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    pub sent: Duration,
    pub received: Duration,
    /// The leader epoch (Raft term) of the answering leader, -1 if no partition said.
    pub leader_epoch: i32,
    /// AcquisitionLockTimeoutMs: how long the records are locked to this member.
    pub lock_ms: i32,
    pub deliveries: Vec<Delivery>,
    /// Acquired offsets without a record, acknowledged as gaps.
    pub gaps: usize,
}

/// What became of sent acknowledgements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum AckOutcome {
    Applied,
    /// Refused with this code before or while applying: not applied (all or nothing per
    /// partition).
    Refused(i16),
    /// No answer, or an answer that cannot tell (the leader lost its leadership after
    /// proposing them).
    Unknown,
}

/// What the consumer saw that a checker needs.
#[derive(Debug, Clone, Serialize)]
pub enum Event {
    /// A heartbeat the broker accepted (its session deadline re-armed between the two).
    Heartbeat { sent: Duration, received: Duration },
    /// The member's share session ended, or may have: from `at` on (the last answer on its
    /// connection), the broker may release what it held.
    SessionEnded { at: Duration, why: &'static str },
    /// A ShareFetch whose acquisitions are unknown: sent, and no answer came, or a partition
    /// answered NOT_LEADER_OR_FOLLOWER after the leader may have proposed them.
    FetchUnknown { sent: Duration, ended: Duration },
    /// Acknowledgements sent, and their outcome.
    Acked { partition: i32, acks: Vec<Ack>, sent: Duration, ended: Duration, outcome: AckOutcome },
    /// Acknowledgements dropped unsent: their session ended, so the broker released the records.
    AcksDropped { partition: i32, acks: Vec<Ack>, at: Duration },
}

/// The connection to the leader and the share session on it.
struct Session {
    client: RawClient,
    leader: Leader,
    /// The epoch the next request carries: 0 until a ShareFetch opened the session.
    epoch: i32,
    /// The partitions the session fetches.
    partitions: BTreeSet<i32>,
    fetch_version: i16,
    ack_version: i16,
    /// When the last answer on this connection came: the broker may have closed it (and
    /// released what the session held) any time after.
    last_answer: Duration,
}

pub struct ShareConsumer {
    config: ShareConsumerConfig,
    membership: Arc<Mutex<Membership>>,
    events: Events,
    heartbeat: tokio::task::JoinHandle<()>,
    session: Option<Session>,
    /// Records held: (partition, offset) → delivery count.
    held: BTreeMap<(i32, i64), i16>,
    /// Acknowledgements not yet sent, per partition.
    pending: BTreeMap<i32, Vec<Ack>>,
}

impl ShareConsumer {
    /// Joins the group (the heartbeat task starts on the current tokio runtime).
    pub fn start(config: ShareConsumerConfig) -> ShareConsumer {
        let membership = Arc::new(Mutex::new(Membership::default()));
        let events: Events = Arc::default();
        let heartbeat = tokio::spawn(heartbeat::run(config.clone(), membership.clone(), events.clone()));
        ShareConsumer {
            config,
            membership,
            events,
            heartbeat,
            session: None,
            held: BTreeMap::new(),
            pending: BTreeMap::new(),
        }
    }

    pub fn member_id(&self) -> &str {
        &self.config.member_id
    }

    /// The partitions assigned, as the last heartbeat said.
    pub fn assignment(&self) -> BTreeSet<i32> {
        self.membership.lock().expect("membership").assignment.clone()
    }

    /// The events since the last call.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().expect("events"))
    }

    fn now(&self) -> Duration {
        (self.config.clock)()
    }

    fn event(&self, event: Event) {
        self.events.lock().expect("events").push(event);
    }

    /// Queues the acknowledgement of a held record; false if this member does not hold it
    /// (any more: its session ended).
    pub fn acknowledge(&mut self, partition: i32, offset: i64, kind: AckType) -> bool {
        let Some(delivery_count) = self.held.remove(&(partition, offset)) else { return false };
        self.pending.entry(partition).or_default().push(Ack { offset, delivery_count, kind });
        true
    }

    /// The next ShareFetch: opens a session if there is none, carries the pending
    /// acknowledgements of assigned partitions, and returns the records acquired.
    pub async fn poll(&mut self) -> Result<Fetched> {
        let assigned = self.assignment();
        if self.pending.keys().any(|p| !assigned.contains(p)) {
            // Revoked partitions' acknowledgements go by ShareAcknowledge: listing a
            // partition in a ShareFetch adds it to the session.
            self.commit().await?;
        }
        self.connect().await?;
        let s = self.session.as_mut().expect("connected above");
        let opening = s.epoch == 0;
        let mut partitions: BTreeMap<i32, Vec<Ack>> = assigned.iter().map(|p| (*p, Vec::new())).collect();
        if !opening {
            for (p, acks) in partitions.iter_mut() {
                *acks = self.pending.remove(p).unwrap_or_default();
            }
        }
        let forget: Vec<i32> =
            if opening { Vec::new() } else { s.partitions.difference(&assigned).copied().collect() };
        let request = wire::fetch_request(&self.config, s.epoch, s.leader.topic_id, &partitions, &forget);
        let limit = Duration::from_millis(self.config.max_wait_ms.max(0) as u64) + FETCH_TIMEOUT_EXTRA;
        let sent = (self.config.clock)();
        let answer = tokio::time::timeout(limit, s.client.request(s.fetch_version, &request)).await;
        partitions.retain(|_, acks| !acks.is_empty());
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(self.lost(sent, partitions, e)),
            Err(_) => return Err(self.lost(sent, partitions, anyhow!("ShareFetch: no answer in {limit:?}"))),
        };
        s.last_answer = (self.config.clock)();
        if answer.error_code != 0 {
            return Err(self.refused(sent, partitions, answer.error_code, "ShareFetch"));
        }
        s.epoch = next_epoch(s.epoch);
        s.partitions = assigned;
        Ok(self.take_fetch(sent, answer, partitions))
    }

    /// Reads an answered ShareFetch: the records held, gaps queued, the outcome of the
    /// acknowledgements it carried, and the session's end if the leader moved.
    fn take_fetch(
        &mut self,
        sent: Duration,
        answer: ShareFetchResponse,
        acked: BTreeMap<i32, Vec<Ack>>,
    ) -> Fetched {
        let received = self.now();
        let topic_id = self.session.as_ref().map(|s| s.leader.topic_id);
        let mut fetched = Fetched {
            sent,
            received,
            leader_epoch: -1,
            lock_ms: answer.acquisition_lock_timeout_ms,
            ..Fetched::default()
        };
        let (mut ack_codes, mut unknown) = (BTreeMap::new(), false);
        let ours = answer.responses.iter().filter(|t| Some(t.topic_id) == topic_id);
        for p in ours.flat_map(|t| &t.partitions) {
            ack_codes.insert(p.partition_index, p.acknowledge_error_code);
            if p.error_code == NOT_LEADER_OR_FOLLOWER {
                unknown = true;
            }
            if p.error_code != 0 {
                continue;
            }
            fetched.leader_epoch = fetched.leader_epoch.max(p.current_leader.leader_epoch);
            match wire::deliveries(p, self.config.keep_unacquired) {
                Ok(records) => self.hold(&mut fetched, p.partition_index, records),
                // Acquired but unreadable: the locks run out.
                Err(_) => unknown = true,
            }
        }
        for (partition, acks) in acked {
            let outcome = ack_outcome(ack_codes.get(&partition).copied());
            self.event(Event::Acked { partition, acks, sent, ended: received, outcome });
        }
        if unknown {
            self.event(Event::FetchUnknown { sent, ended: received });
            self.end_session(true, "the leader moved");
        }
        fetched
    }

    /// Holds the acquired records and queues the gaps' acknowledgements (records outside the
    /// acquired ranges, which only the broken client hands out, are not this member's to
    /// acknowledge).
    fn hold(&mut self, fetched: &mut Fetched, partition: i32, records: wire::PartitionRecords) {
        for d in &records.acquired {
            self.held.insert((d.partition, d.offset), d.delivery_count);
        }
        fetched.deliveries.extend(records.acquired);
        fetched.deliveries.extend(records.unacquired);
        fetched.gaps += records.gaps.len();
        let gaps = records.gaps.into_iter();
        let queued = gaps.map(|(offset, delivery_count)| Ack { offset, delivery_count, kind: AckType::Gap });
        self.pending.entry(partition).or_default().extend(queued);
    }

    /// Sends the pending acknowledgements with ShareAcknowledge now.
    pub async fn commit(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some(s) = self.session.as_mut().filter(|s| s.epoch > 0) else {
            self.drop_pending();
            return Ok(());
        };
        let acks = std::mem::take(&mut self.pending);
        let request = wire::ack_request(&self.config, s.epoch, s.leader.topic_id, &acks);
        let sent = (self.config.clock)();
        let answer = tokio::time::timeout(ACK_TIMEOUT, s.client.request(s.ack_version, &request)).await;
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(self.lost(sent, acks, e)),
            Err(_) => {
                return Err(self.lost(sent, acks, anyhow!("ShareAcknowledge: no answer in {ACK_TIMEOUT:?}")))
            }
        };
        s.last_answer = (self.config.clock)();
        if answer.error_code != 0 {
            return Err(self.refused(sent, acks, answer.error_code, "ShareAcknowledge"));
        }
        s.epoch = next_epoch(s.epoch);
        let codes: BTreeMap<i32, i16> = answer
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        let ended = self.now();
        for (partition, acks) in acks {
            let outcome = ack_outcome(codes.get(&partition).copied());
            self.event(Event::Acked { partition, acks, sent, ended, outcome });
        }
        if codes.values().any(|c| *c == NOT_LEADER_OR_FOLLOWER) {
            self.end_session(true, "the leader moved");
        }
        Ok(())
    }

    /// Closes the share session (ShareAcknowledge at epoch -1 with the pending
    /// acknowledgements: the broker releases the rest) and leaves the group; returns the
    /// events not taken yet.
    pub async fn close(mut self) -> Vec<Event> {
        if let Some(s) = self.session.as_mut().filter(|s| s.epoch > 0) {
            let acks = std::mem::take(&mut self.pending);
            let request = wire::ack_request(&self.config, FINAL_EPOCH, s.leader.topic_id, &acks);
            let sent = (self.config.clock)();
            let answer = tokio::time::timeout(ACK_TIMEOUT, s.client.request(s.ack_version, &request)).await;
            let ended = self.now();
            let code = |p: i32| match &answer {
                Ok(Ok(a)) if a.error_code != 0 => Some(a.error_code),
                Ok(Ok(a)) => a
                    .responses
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .find(|x| x.partition_index == p)
                    .map(|x| x.error_code),
                _ => None,
            };
            let outcomes: Vec<(i32, AckOutcome)> = acks.keys().map(|p| (*p, ack_outcome(code(*p)))).collect();
            for ((partition, acks), (_, outcome)) in acks.into_iter().zip(outcomes) {
                self.event(Event::Acked { partition, acks, sent, ended, outcome });
            }
        }
        self.end_session(true, "closed");
        self.heartbeat.abort();
        heartbeat::leave(&self.config).await;
        self.take_events()
    }

    /// A crash: the connection dropped, no close, no leave (the broker releases what the
    /// session held when it sees the connection close, and fences the member later); returns
    /// the events not taken yet.
    pub fn crash(mut self) -> Vec<Event> {
        self.heartbeat.abort();
        self.end_session(true, "crashed");
        self.take_events()
    }

    async fn connect(&mut self) -> Result<()> {
        if self.session.is_some() {
            return Ok(());
        }
        let (client, leader) = connect_leader(&self.config.bootstrap, &self.config.topic).await?;
        let fetch_version = client.version::<ShareFetchRequest>(2)?;
        let ack_version = client.version::<ShareAcknowledgeRequest>(2)?;
        let last_answer = self.now();
        let partitions = BTreeSet::new();
        self.session =
            Some(Session { client, leader, epoch: 0, partitions, fetch_version, ack_version, last_answer });
        Ok(())
    }

    /// The connection failed with `acks` in flight: their outcome and the fetch's are
    /// unknown, and the session is gone with the connection.
    fn lost(&mut self, sent: Duration, acks: BTreeMap<i32, Vec<Ack>>, e: anyhow::Error) -> anyhow::Error {
        let ended = self.now();
        self.event(Event::FetchUnknown { sent, ended });
        for (partition, acks) in acks {
            self.event(Event::Acked { partition, acks, sent, ended, outcome: AckOutcome::Unknown });
        }
        self.end_session(true, "connection lost");
        e
    }

    /// A request refused as a whole with `code`.
    fn refused(
        &mut self,
        sent: Duration,
        acks: BTreeMap<i32, Vec<Ack>>,
        code: i16,
        api: &str,
    ) -> anyhow::Error {
        let ended = self.now();
        let outcome =
            if REFUSED_BEFORE_ACKS.contains(&code) { AckOutcome::Refused(code) } else { AckOutcome::Unknown };
        for (partition, acks) in acks {
            self.event(Event::Acked { partition, acks, sent, ended, outcome });
        }
        let session_error = [SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH].contains(&code);
        self.end_session(!session_error, "session refused");
        anyhow!("{api}: error {code} ({})", kafka_compat::error_code::name(code))
    }

    /// The session ended (or may have): what it held is the broker's to release, so the held
    /// records and their pending acknowledgements are dropped. `disconnect` closes the
    /// connection too (the next session starts with a fresh look for the leader).
    fn end_session(&mut self, disconnect: bool, why: &'static str) {
        let Some(at) = self.session.as_ref().map(|s| s.last_answer) else { return };
        self.event(Event::SessionEnded { at, why });
        self.held.clear();
        self.drop_pending();
        if disconnect {
            self.session = None;
        } else if let Some(s) = self.session.as_mut() {
            s.epoch = 0;
            s.partitions.clear();
        }
    }

    fn drop_pending(&mut self) {
        let at = self.now();
        for (partition, acks) in std::mem::take(&mut self.pending) {
            self.event(Event::AcksDropped { partition, acks, at });
        }
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

fn ack_outcome(code: Option<i16>) -> AckOutcome {
    match code {
        Some(0) => AckOutcome::Applied,
        // The partition's acknowledgements failed as a whole when applied (or were refused
        // before): Kafka's all-or-nothing.
        Some(c) if c == INVALID_RECORD_STATE || c == INVALID_REQUEST => AckOutcome::Refused(c),
        _ => AckOutcome::Unknown,
    }
}

/// Kafka's `ShareRequestMetadata.nextEpoch`: wraps to 1, never to 0 or -1.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// Waits until the member has joined (a heartbeat answered) or `wait` passed.
pub async fn joined(consumer: &ShareConsumer, wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    while consumer.membership.lock().expect("membership").epoch == 0 {
        if Instant::now() > deadline {
            bail!("member {} not joined after {wait:?}", consumer.member_id());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
