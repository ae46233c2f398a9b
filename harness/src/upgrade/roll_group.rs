//! The rolling upgrade's consumer group: one librdkafka member of a classic group reads the
//! queue topic under read_committed and commits what it has processed every second
//! (OffsetCommit through the group coordinator, which moves with the Raft leader during the
//! roll), while a watcher outside the group asks the committed offsets (OffsetFetch) every
//! half second. The checks: no committed offset ever goes backwards, as the member's own
//! successful commits and as the watcher sees them; and the group ends where the member was.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::kafka::client_config;

/// The group's id.
pub const ROLL_GROUP: &str = "upgrade-roll-group";
/// How often the member commits, and the watcher looks.
const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
const WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// Bounds one OffsetFetch of the watcher.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the group saw, for the report and the checks.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GroupFigures {
    pub records_processed: u64,
    pub commits_acknowledged: u64,
    pub commit_failures: u64,
    pub watcher_reads: u64,
    pub watcher_failures: u64,
    /// Offsets that went backwards: "who partition from → to".
    pub went_backwards: Vec<String>,
    /// The last offsets the member committed, by partition.
    pub last_committed: BTreeMap<i32, i64>,
    /// The offsets the watcher read last, by partition.
    pub last_watched: BTreeMap<i32, i64>,
}

/// The running member and watcher.
pub struct RollGroup {
    stop_member: Arc<AtomicBool>,
    stop_watcher: Arc<AtomicBool>,
    figures: Arc<Mutex<GroupFigures>>,
    member: JoinHandle<()>,
    watcher: JoinHandle<()>,
}

impl RollGroup {
    pub fn start(bootstrap: &str, topic: &str, partitions: i32) -> RollGroup {
        let (stop_member, stop_watcher) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let figures = Arc::new(Mutex::new(GroupFigures::default()));
        let (b, t, s, f) = (bootstrap.to_string(), topic.to_string(), stop_member.clone(), figures.clone());
        let member = std::thread::spawn(move || member(&b, &t, &s, &f));
        let (b, t, s, f) = (bootstrap.to_string(), topic.to_string(), stop_watcher.clone(), figures.clone());
        let watcher = std::thread::spawn(move || watcher(&b, &t, partitions, &s, &f));
        RollGroup { stop_member, stop_watcher, figures, member, watcher }
    }

    /// Stops the member (it commits a last time and leaves), then the watcher, which reads the
    /// group's offsets once more; returns the figures.
    pub fn stop(self) -> GroupFigures {
        self.stop_member.store(true, Ordering::SeqCst);
        let _ = self.member.join();
        self.stop_watcher.store(true, Ordering::SeqCst);
        let _ = self.watcher.join();
        let figures = self.figures.lock().expect("group figures").clone();
        figures
    }
}

fn with<T>(figures: &Mutex<GroupFigures>, f: impl FnOnce(&mut GroupFigures) -> T) -> T {
    f(&mut figures.lock().expect("group figures"))
}

/// Records `next` for `partition` in `seen`, and a regression when it is below the last one.
fn advance(seen: &mut BTreeMap<i32, i64>, backwards: &mut Vec<String>, who: &str, partition: i32, next: i64) {
    let last = seen.entry(partition).or_insert(next);
    if next < *last {
        backwards.push(format!("{who} partition {partition}: {last} → {next}"));
    }
    *last = next;
}

fn member(bootstrap: &str, topic: &str, stop: &AtomicBool, figures: &Mutex<GroupFigures>) {
    let consumer: BaseConsumer = match client_config(bootstrap)
        .set("group.id", ROLL_GROUP)
        .set("client.id", "upgrade-roll-member")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .create()
    {
        Ok(c) => c,
        Err(_) => return with(figures, |f| f.commit_failures += 1),
    };
    if consumer.subscribe(&[topic]).is_err() {
        return with(figures, |f| f.commit_failures += 1);
    }
    let mut processed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut last_commit = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            processed.insert(m.partition(), m.offset() + 1);
            with(figures, |f| f.records_processed += 1);
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL && !processed.is_empty() {
            commit(&consumer, topic, &processed, figures);
            last_commit = Instant::now();
        }
    }
    if !processed.is_empty() {
        commit(&consumer, topic, &processed, figures);
    }
    consumer.unsubscribe();
}

/// A synchronous commit of `processed` (the next offset to read, per partition) for the
/// partitions the member still owns.
fn commit(
    consumer: &BaseConsumer,
    topic: &str,
    processed: &BTreeMap<i32, i64>,
    figures: &Mutex<GroupFigures>,
) {
    let owned = consumer.assignment().unwrap_or_default();
    let mut tpl = TopicPartitionList::new();
    for (p, offset) in processed {
        if owned.find_partition(topic, *p).is_some() {
            let _ = tpl.add_partition_offset(topic, *p, Offset::Offset(*offset));
        }
    }
    if tpl.count() == 0 {
        return;
    }
    let result = consumer.commit(&tpl, CommitMode::Sync);
    with(figures, |f| match result {
        Ok(()) => {
            f.commits_acknowledged += 1;
            for (p, offset) in processed.iter().filter(|(p, _)| owned.find_partition(topic, **p).is_some()) {
                let (seen, backwards) = (&mut f.last_committed, &mut f.went_backwards);
                advance(seen, backwards, "member's commit", *p, *offset);
            }
        }
        Err(_) => f.commit_failures += 1,
    });
}

fn watcher(bootstrap: &str, topic: &str, partitions: i32, stop: &AtomicBool, figures: &Mutex<GroupFigures>) {
    let Ok(consumer) = client_config(bootstrap)
        .set("group.id", ROLL_GROUP)
        .set("client.id", "upgrade-roll-watcher")
        .set("enable.auto.commit", "false")
        .create::<BaseConsumer>()
    else {
        return with(figures, |f| f.watcher_failures += 1);
    };
    let mut wanted = TopicPartitionList::new();
    for p in 0..partitions {
        wanted.add_partition(topic, p);
    }
    loop {
        // Once stopped (after the member's last commit), one more look.
        let stopping = stop.load(Ordering::SeqCst);
        match consumer.committed_offsets(wanted.clone(), FETCH_TIMEOUT) {
            Ok(committed) => with(figures, |f| {
                f.watcher_reads += 1;
                for e in committed.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        let (seen, backwards) = (&mut f.last_watched, &mut f.went_backwards);
                        advance(seen, backwards, "watcher", e.partition(), o);
                    }
                }
            }),
            Err(_) => with(figures, |f| f.watcher_failures += 1),
        }
        if stopping {
            return;
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
}
