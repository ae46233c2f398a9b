//! Consumer groups with the Java client (kafka-clients 4.x) and Kafka's own group tool, on a
//! three-node cluster (issue #4, acceptance item 2).
//!
//! Three `GroupMember` processes (harness/java) with the cooperative-sticky assignor join one
//! group over a 6-partition topic: each partition is owned by exactly one member. 20,000
//! records are produced (Java producer) and consumed, each member committing after processing
//! every poll; one member closes (LeaveGroup) and its partitions move to the other two within
//! the session timeout; 10,000 more are produced. Every one of the 30,000 is consumed exactly
//! once, and `kafka-consumer-groups.sh --describe` then shows lag 0 on every partition.
//! The same runs with KIP-848's protocol. Three consumer-protocol members also consume 100,000
//! records through two kill -9s of the Raft leader: none lost, no assignment changed, the
//! commit stall printed. Another scenario checks the tool's CURRENT-OFFSET, LOG-END-OFFSET and
//! LAG columns against a group that committed a known part of each partition, with a member
//! and without, and its `--list` and `--state`. And online migration: a running classic group
//! upgraded by a consumer-protocol member after a leader kill, and downgraded when it leaves.
//!
//! Needs `ONELOG_JAVA_CLASSPATH` (scripts/test.sh sets it); without it the tests fail.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::java::{self, Event, JavaProcess};
use harness::kafka::create_topics;
use harness::{Cluster, ClusterOptions};

const COOPERATIVE_STICKY: &str = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(90);
/// Pause between two looks at the members' events.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

#[test]
fn three_java_members_share_partitions_cooperatively_and_consume_exactly_once() {
    on_three_nodes(|c| group_scenario_as(c, Protocol::Classic));
}

/// Which group protocol the Java members speak.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    /// JoinGroup/SyncGroup with the cooperative-sticky assignor.
    Classic,
    /// ConsumerGroupHeartbeat: the broker's assignor; the session timeout is the broker's.
    Consumer,
}

/// The same with KIP-848's protocol (`group.protocol=consumer`, issue 28): the broker assigns
/// (uniform), a member's close is a heartbeat with epoch -1 and its partitions move at once.
#[test]
fn three_java_members_with_the_consumer_protocol_consume_exactly_once() {
    on_three_nodes(|c| group_scenario_as(c, Protocol::Consumer));
}

/// Issue 28's acceptance: three consumer-protocol members consume 100,000 records with
/// commitSync while the Raft leader is killed -9 twice (each victim restarted before the next
/// kill), the producer still writing at each kill. Nothing is lost, duplicates are counted
/// (goal 0), no member's assignment changes because of a kill (the group's epochs and
/// assignments are log entries, so the new leader carries them on), and the time from each
/// kill to the first commit after it is printed.
#[test]
fn three_consumer_protocol_members_ride_through_two_leader_kills() {
    on_three_nodes(leader_kill_scenario);
}

/// Online migration (issue 28, around-spec §4): two classic members consume; the Raft leader
/// is killed -9 under them; a consumer-protocol member joins and the running group upgrades to
/// a consumer group, the classic members served inside it, all three sharing the partitions;
/// the consumer-protocol member closes and the group downgrades back to a classic group of the
/// two. The new leader knows the classic members from the log but not their subscriptions, so
/// the join first starts a classic rebalance and is answered COORDINATOR_LOAD_IN_PROGRESS
/// until the members rejoined. Kafka's groups tool shows the type each time, and every record
/// is consumed exactly once across both conversions. (The compat matrix's `online_migration`
/// upgrades a group its leader knows in full.)
#[test]
fn a_running_classic_group_upgrades_and_downgrades_online_after_a_leader_kill() {
    on_three_nodes(migration_scenario);
}

#[test]
fn consumer_groups_tool_shows_positions_and_lag() {
    on_three_nodes(describe_scenario);
}

/// Runs `scenario` on a fresh three-node cluster; fails first if the Java drivers are missing.
fn on_three_nodes(scenario: fn(&mut Cluster) -> Result<()>) {
    java::classpath().expect("the Java scenario drivers");
    let options = ClusterOptions::new(3).config("group.initial.rebalance.delay.ms", 0);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster);
    cluster.unwrap_or_dump(result);
}

const TOPIC: &str = "java-grouped";
const GROUP: &str = "java-three-members";
const PARTITIONS: i32 = 6;
const FIRST_BATCH: u64 = 20_000;
const SECOND_BATCH: u64 = 10_000;

fn group_scenario_as(cluster: &mut Cluster, protocol: Protocol) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, TOPIC, PARTITIONS)?;
    let started = Instant::now();
    let mut members = (0..3)
        .map(|i| member_as(protocol, &bootstrap, GROUP, TOPIC, &format!("member-{i}"), &[]))
        .collect::<Result<Vec<_>>>()?;
    wait_until(&mut members, "three members own every partition", |m| owners_ok(m, 3))?;
    println!("group formed: {:?} after {:?}", assignments(&members), started.elapsed());

    let started = Instant::now();
    produce(&bootstrap, TOPIC, 0, FIRST_BATCH, None)?;
    wait_until(&mut members, "20,000 processed", |m| processed(m).len() as u64 == FIRST_BATCH)?;
    println!("{FIRST_BATCH} produced and consumed by three members in {:?}", started.elapsed());

    // member-2 closes: LeaveGroup (classic) or a leaving heartbeat (consumer), and its
    // partitions are handed over.
    let leaver = members.pop().context("three members")?;
    let closed_at = Instant::now();
    let left_events = leaver.stop(Duration::from_secs(30))?;
    let closed = closed_at.elapsed();
    wait_until(&mut members, "two members own every partition", |m| owners_ok(m, 2))?;
    let moved = members
        .iter()
        .filter_map(|m| m.last("assignment"))
        .map(|e| e.at.saturating_duration_since(closed_at))
        .max()
        .unwrap_or_default();
    println!(
        "member-2 closed in {closed:?}; partitions moved {:?} within {moved:?} of the close",
        assignments(&members)
    );
    ensure!(moved < SESSION_TIMEOUT, "partitions moved after {moved:?}, session timeout {SESSION_TIMEOUT:?}");

    produce(&bootstrap, TOPIC, FIRST_BATCH, SECOND_BATCH, None)?;
    let total = FIRST_BATCH + SECOND_BATCH;
    let left_ids: BTreeSet<u64> = processed_ids(&left_events).into_iter().collect();
    wait_until(&mut members, "30,000 processed", |m| processed(m).union(&left_ids).count() as u64 == total)?;
    let mut all_events = vec![left_events];
    for m in members {
        all_events.push(m.stop(Duration::from_secs(30))?);
    }
    check_exactly_once(&all_events, total)?;

    // Every commit landed: the tool sees each partition's position at its log end.
    let rows = describe(&bootstrap, GROUP, false)?;
    let ends: i64 = rows.iter().map(|r| cell(r, "LOG-END-OFFSET")).sum::<Result<_>>()?;
    for row in &rows {
        ensure!(cell(row, "LAG")? == 0 && row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"], "{row:?}");
    }
    ensure!(rows.len() == PARTITIONS as usize && ends == total as i64, "describe: {rows:?}");
    println!("kafka-consumer-groups --describe: 6 partitions, log ends sum to {ends}, lag 0 on each");
    Ok(())
}

const KILL_TOPIC: &str = "java-leader-kill";
const KILL_GROUP: &str = "java-consumers-through-kills";
const KILL_RECORDS: u64 = 100_000;
/// Records processed before the first and the second kill.
const KILL_AT: [u64; 2] = [30_000, 65_000];
/// The producer's pace, records per second: it is still writing at each kill, so the members
/// have records to process and commit after it. Regression: unpaced, the producer wrote all
/// 100,000 records before the second kill, the members had processed and committed them all
/// by the time it fell, and the wait for a commit after the kill ran out at 300 s (CI, and
/// about one local run in six).
const KILL_PRODUCE_RATE: u64 = 8_000;
const KILL_TIMEOUT: Duration = Duration::from_secs(300);

fn leader_kill_scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, KILL_TOPIC, PARTITIONS)?;
    let mut members = (0..3)
        .map(|i| {
            member_as(Protocol::Consumer, &bootstrap, KILL_GROUP, KILL_TOPIC, &format!("member-{i}"), &[])
        })
        .collect::<Result<Vec<_>>>()?;
    wait_until(&mut members, "three members own every partition", |m| owners_ok(m, 3))?;
    let formed = assignments(&members);
    let formed_at = Instant::now();
    println!("group formed: {formed:?}");
    let producer_bootstrap = bootstrap.clone();
    let producer = std::thread::spawn(move || {
        produce_paced(&producer_bootstrap, KILL_TOPIC, KILL_RECORDS, KILL_PRODUCE_RATE)
    });
    let mut to_first_commit = Vec::new();
    let mut kills = Vec::new();
    for at in KILL_AT {
        wait_processed(&mut members, at)?;
        let victim = cluster.leader()?;
        let killed_at = Instant::now();
        cluster.kill9(victim)?;
        let (new_leader, election) = cluster.wait_for_leader(Duration::from_secs(30))?;
        let commit = wait_for_commit_after(&mut members, killed_at)?;
        println!("killed leader {victim} at {at} processed; node {new_leader} leads after {election:?}; first commit {commit:?} after the kill");
        to_first_commit.push(commit);
        kills.push(killed_at);
        cluster.start_node(victim)?;
    }
    producer.join().map_err(|_| anyhow::anyhow!("the producer thread panicked"))??;
    wait_processed(&mut members, KILL_RECORDS)?;
    // Kafka's group tool describes the live consumer group (ConsumerGroupDescribe): one owner
    // per partition, the three members.
    let rows = describe(&bootstrap, KILL_GROUP, true)?;
    let owners: BTreeSet<&str> =
        rows.iter().filter_map(|r| r.get("CONSUMER-ID").map(String::as_str)).collect();
    ensure!(rows.len() == PARTITIONS as usize && owners.len() == 3 && !owners.contains("-"), "{rows:?}");
    let changed: Vec<String> = members
        .iter()
        .zip(&formed)
        .filter_map(|(m, formed)| {
            let later = m.with_events(|events| {
                events
                    .iter()
                    .filter(|e| e.kind() == "assignment" && e.at > formed_at)
                    .map(assigned)
                    .collect::<Vec<_>>()
            });
            later.iter().any(|a| a != formed).then(|| format!("{formed:?} -> {later:?}"))
        })
        .collect();
    let mut all_events = Vec::new();
    for m in members {
        all_events.push(m.stop(Duration::from_secs(30))?);
    }
    // Once empty, the tool deletes the group and its offsets (DeleteGroups).
    let out = java::consumer_groups(&bootstrap, &["--delete", "--group", KILL_GROUP])?;
    ensure!(out.stdout.contains("was successful"), "--delete: {} {}", out.stdout, out.stderr);
    let listed = java::consumer_groups(&bootstrap, &["--list"])?;
    ensure!(!listed.stdout.lines().any(|l| l.trim() == KILL_GROUP), "still listed: {}", listed.stdout);
    let duplicated = count_duplicates(&all_events, KILL_RECORDS)?;
    let stalls: Vec<Duration> = kills
        .iter()
        .enumerate()
        .map(|(i, k)| commit_stall(&all_events, *k, kills.get(i + 1).copied()))
        .collect();
    println!(
        "first commit after each kill: {to_first_commit:?}; longest pause between two commits around \
         each kill: {stalls:?}; duplicates {duplicated} (goal 0)"
    );
    ensure!(changed.is_empty(), "assignments changed across the leader kills: {changed:?}");
    Ok(())
}

const MIGRATION_TOPIC: &str = "java-migrating";
const MIGRATION_GROUP: &str = "java-migrating-group";
const MIGRATION_BATCH: u64 = 10_000;

fn migration_scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, MIGRATION_TOPIC, PARTITIONS)?;
    let classic = |i: usize| {
        member_as(
            Protocol::Classic,
            &bootstrap,
            MIGRATION_GROUP,
            MIGRATION_TOPIC,
            &format!("classic-{i}"),
            &[],
        )
    };
    let mut members = vec![classic(0)?, classic(1)?];
    wait_until(&mut members, "two classic members own every partition", |m| owners_ok(m, 2))?;
    ensure!(group_type(&bootstrap, MIGRATION_GROUP)? == "Classic", "a classic group first");
    produce(&bootstrap, MIGRATION_TOPIC, 0, MIGRATION_BATCH, None)?;
    wait_until(&mut members, "the first batch processed", |m| processed(m).len() as u64 == MIGRATION_BATCH)?;
    let victim = cluster.leader()?;
    cluster.kill9(victim)?;
    let (leader, election) = cluster.wait_for_leader(Duration::from_secs(30))?;
    cluster.start_node(victim)?;
    println!("killed leader {victim}; node {leader} leads after {election:?}");

    // Upgrade: a consumer-protocol member joins the running classic group.
    let joined_at = Instant::now();
    let id = "consumer-0";
    members.push(member_as(Protocol::Consumer, &bootstrap, MIGRATION_GROUP, MIGRATION_TOPIC, id, &[])?);
    wait_until(&mut members, "three members own every partition", |m| owners_ok(m, 3))?;
    let upgraded = joined_at.elapsed();
    ensure!(group_type(&bootstrap, MIGRATION_GROUP)? == "Consumer", "upgraded to a consumer group");
    // The adopted group's subscriptions were unknown: the join waited for them.
    let serving = cluster.leader()?;
    let log = std::fs::read_to_string(cluster.log_path(serving))?;
    ensure!(log.contains("COORDINATOR_LOAD_IN_PROGRESS"), "the join never waited for the classic members");
    println!("upgraded: {:?} within {upgraded:?} of the join", assignments(&members));
    produce(&bootstrap, MIGRATION_TOPIC, MIGRATION_BATCH, MIGRATION_BATCH, None)?;
    wait_until(&mut members, "two batches processed", |m| processed(m).len() as u64 == 2 * MIGRATION_BATCH)?;

    // Downgrade: the consumer-protocol member closes; the classic members take everything back.
    let leaver = members.pop().context("three members")?;
    let left_at = Instant::now();
    let left_events = leaver.stop(Duration::from_secs(30))?;
    wait_until(&mut members, "the classic members own every partition", |m| owners_ok(m, 2))?;
    let downgraded = left_at.elapsed();
    ensure!(group_type(&bootstrap, MIGRATION_GROUP)? == "Classic", "downgraded to a classic group");
    println!("downgraded: {:?} within {downgraded:?} of the close", assignments(&members));
    produce(&bootstrap, MIGRATION_TOPIC, 2 * MIGRATION_BATCH, MIGRATION_BATCH, None)?;
    let left_ids: BTreeSet<u64> = processed_ids(&left_events).into_iter().collect();
    let total = 3 * MIGRATION_BATCH;
    wait_until(&mut members, "three batches processed", |m| {
        processed(m).union(&left_ids).count() as u64 == total
    })?;
    let mut all_events = vec![left_events];
    for m in members {
        all_events.push(m.stop(Duration::from_secs(30))?);
    }
    check_exactly_once(&all_events, total)
}

/// The group's type as Kafka's groups tool lists it (`kafka-groups.sh --list`).
fn group_type(bootstrap: &str, group: &str) -> Result<String> {
    let out = java::tool("org.apache.kafka.tools.GroupsCommand", bootstrap, &["--list"])?;
    let rows = java::table(&out.stdout, "GROUP");
    let row = rows.iter().find(|r| r.get("GROUP").map(String::as_str) == Some(group));
    row.and_then(|r| r.get("TYPE").cloned()).with_context(|| format!("{group} not listed: {}", out.stdout))
}

fn wait_processed(members: &mut [JavaProcess], n: u64) -> Result<()> {
    let deadline = Instant::now() + KILL_TIMEOUT;
    while (processed(members).len() as u64) < n {
        for m in members.iter_mut() {
            m.check_running()?;
        }
        ensure!(
            Instant::now() < deadline,
            "{n} not processed within {KILL_TIMEOUT:?}: {}",
            processed(members).len()
        );
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(())
}

/// How long after `killed_at` the first `committed` event of any member came.
fn wait_for_commit_after(members: &mut [JavaProcess], killed_at: Instant) -> Result<Duration> {
    loop {
        let first = members
            .iter()
            .filter_map(|m| {
                m.with_events(|e| {
                    e.iter().find(|e| e.kind() == "committed" && e.at > killed_at).map(|e| e.at)
                })
            })
            .min();
        if let Some(at) = first {
            return Ok(at - killed_at);
        }
        for m in members.iter_mut() {
            m.check_running()?;
        }
        ensure!(killed_at.elapsed() < KILL_TIMEOUT, "no commit within {KILL_TIMEOUT:?} of the kill");
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The longest pause between two consecutive commits (any member) spanning or following
/// `killed_at`, up to 30 s after it or the next kill (`until`), whichever is first: how long
/// the kill held commits up. A commit answered by the old leader just before it died may be
/// reported just after, so the first commit after the kill alone would understate it.
fn commit_stall(members: &[Vec<Event>], killed_at: Instant, until: Option<Instant>) -> Duration {
    let mut times: Vec<Instant> =
        members.iter().flatten().filter(|e| e.kind() == "committed").map(|e| e.at).collect();
    times.sort();
    let window_end = killed_at + Duration::from_secs(30);
    // A pause that ends after the next kill is that kill's.
    let before_next = |at: Instant| until.map_or(true, |next| at <= next);
    times
        .windows(2)
        .filter(|w| w[1] > killed_at && w[0] < window_end && before_next(w[1]))
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default()
}

/// The partitions of one `assignment` event.
fn assigned(event: &Event) -> BTreeSet<i64> {
    event.value["partitions"].as_array().into_iter().flatten().filter_map(|v| v.as_i64()).collect()
}

/// Every id in 0..total processed at least once (none lost), no commit failed; returns how
/// many ids were processed more than once.
fn count_duplicates(members: &[Vec<Event>], total: u64) -> Result<usize> {
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    for events in members {
        for id in processed_ids(events) {
            *seen.entry(id).or_default() += 1;
        }
        let closed = events.iter().rev().find(|e| e.kind() == "closed").context("no closed event")?;
        ensure!(closed.value["commit_failures"] == 0, "a member's commit failed: {:?}", closed.value);
    }
    ensure!(
        seen.len() as u64 == total && seen.keys().all(|id| *id < total),
        "distinct {} of {total}",
        seen.len()
    );
    Ok(seen.values().filter(|n| **n > 1).count())
}

/// Every id in 0..total processed exactly once across the members, and no commit failed.
fn check_exactly_once(members: &[Vec<Event>], total: u64) -> Result<()> {
    let duplicated = count_duplicates(members, total)?;
    let per_member: Vec<usize> = members.iter().map(|e| processed_ids(e).len()).collect();
    println!("processed per member {per_member:?}; duplicated {duplicated}");
    ensure!(duplicated == 0, "{duplicated} records processed more than once");
    Ok(())
}

const LAG_TOPIC: &str = "java-lagging";
const LAG_GROUP: &str = "java-lag-check";
/// Records produced to partitions 0, 1 and 2.
const LAG_COUNTS: [i64; 3] = [50, 80, 120];
/// What the member processes and commits of each partition.
const LAG_CONSUMED: i64 = 30;

fn describe_scenario(cluster: &mut Cluster) -> Result<()> {
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, LAG_TOPIC, LAG_COUNTS.len() as i32)?;
    let mut next_id = 0;
    for (partition, n) in LAG_COUNTS.iter().enumerate() {
        produce(&bootstrap, LAG_TOPIC, next_id, *n as u64, Some(partition as i32))?;
        next_id += *n as u64;
    }
    let max = format!("--max-per-partition={LAG_CONSUMED}");
    let mut members = vec![member(&bootstrap, LAG_GROUP, LAG_TOPIC, "lag-member", &[&max])?];
    let want: BTreeMap<i64, i64> = (0..LAG_COUNTS.len() as i64).map(|p| (p, LAG_CONSUMED)).collect();
    wait_until(&mut members, "30 committed per partition", |m| m[0].with_events(committed) == want)?;

    let listed = java::consumer_groups(&bootstrap, &["--list"])?;
    println!("--list:\n{}", listed.stdout.trim_end());
    ensure!(listed.stdout.lines().any(|l| l.trim() == LAG_GROUP), "--list: {}", listed.stdout);

    let state = java::consumer_groups(&bootstrap, &["--describe", "--state", "--group", LAG_GROUP])?;
    println!("--describe --state:\n{}", state.stdout.trim_end());
    let state_rows = java::table(&state.stdout, "GROUP");
    ensure!(state_rows.len() == 1, "--state: {}", state.stdout);
    let s = &state_rows[0];
    ensure!(s["STATE"] == "Stable" && s["#MEMBERS"] == "1", "--state: {s:?}");
    ensure!(s["ASSIGNMENT-STRATEGY"] == "cooperative-sticky", "--state: {s:?}");

    let rows = describe(&bootstrap, LAG_GROUP, true)?;
    check_lag_rows(&rows, |r| {
        r["CLIENT-ID"] == "lag-member"
            && r["CONSUMER-ID"].starts_with("lag-member-")
            && r["HOST"] == "/127.0.0.1"
    })?;

    members.pop().context("one member")?.stop(Duration::from_secs(30))?;
    let rows = describe(&bootstrap, LAG_GROUP, false)?;
    check_lag_rows(&rows, |r| r["CONSUMER-ID"] == "-" && r["CLIENT-ID"] == "-")
}

/// One row per partition with CURRENT-OFFSET 30, LOG-END-OFFSET as produced, LAG the difference.
fn check_lag_rows(
    rows: &[BTreeMap<String, String>],
    owner_ok: impl Fn(&BTreeMap<String, String>) -> bool,
) -> Result<()> {
    ensure!(rows.len() == LAG_COUNTS.len(), "rows: {rows:?}");
    for row in rows {
        let partition = cell(row, "PARTITION")? as usize;
        let end = *LAG_COUNTS.get(partition).context("partition")?;
        let (current, log_end, lag) =
            (cell(row, "CURRENT-OFFSET")?, cell(row, "LOG-END-OFFSET")?, cell(row, "LAG")?);
        ensure!(row["TOPIC"] == LAG_TOPIC, "{row:?}");
        ensure!(
            (current, log_end, lag) == (LAG_CONSUMED, end, end - LAG_CONSUMED),
            "partition {partition}: {row:?}"
        );
        ensure!(owner_ok(row), "partition {partition} owner: {row:?}");
    }
    Ok(())
}

/// `kafka-consumer-groups.sh --describe --group`: its rows sorted by partition, printed. The
/// tool says on stderr when the group has no member; `members` is whether one is expected.
fn describe(bootstrap: &str, group: &str, members: bool) -> Result<Vec<BTreeMap<String, String>>> {
    let out = java::consumer_groups(bootstrap, &["--describe", "--group", group])?;
    println!("--describe --group {group}:\n{}", out.stdout.trim_end());
    let no_members = out.stderr.contains(&format!("Consumer group '{group}' has no active members."));
    ensure!(no_members != members, "members expected: {members}; stderr: {}", out.stderr);
    let mut rows = java::table(&out.stdout, "GROUP");
    rows.sort_by_key(|r| r.get("PARTITION").and_then(|p| p.parse::<i64>().ok()));
    Ok(rows)
}

fn cell(row: &BTreeMap<String, String>, column: &str) -> Result<i64> {
    let value = row.get(column).with_context(|| format!("no {column} in {row:?}"))?;
    value.parse().with_context(|| format!("{column} = {value:?} in {row:?}"))
}

fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(create_topics(bootstrap, &[(topic, partitions)]))
}

/// The Java producer: ids `from..from + count` as keys and values.
fn produce(bootstrap: &str, topic: &str, from: u64, count: u64, partition: Option<i32>) -> Result<()> {
    let mut args = vec![
        bootstrap.to_string(),
        format!("--topic={topic}"),
        format!("--from={from}"),
        format!("--count={count}"),
    ];
    args.extend(partition.map(|p| format!("--partition={p}")));
    let summary = java::run("Produce", &args)?;
    ensure!(summary["acked"] == count, "Produce: {summary}");
    Ok(())
}

/// Produces ids 0..`count` at `rate` records per second (`Produce --rate`), keyed.
fn produce_paced(bootstrap: &str, topic: &str, count: u64, rate: u64) -> Result<()> {
    let args = [
        bootstrap.to_string(),
        format!("--topic={topic}"),
        format!("--count={count}"),
        format!("--rate={rate}"),
    ];
    let summary = java::run("Produce", &args)?;
    ensure!(summary["acked"] == count, "Produce: {summary}");
    Ok(())
}

/// A `GroupMember` with the cooperative-sticky assignor and a 10 s session.
fn member(bootstrap: &str, group: &str, topic: &str, client_id: &str, extra: &[&str]) -> Result<JavaProcess> {
    member_as(Protocol::Classic, bootstrap, group, topic, client_id, extra)
}

fn member_as(
    protocol: Protocol,
    bootstrap: &str,
    group: &str,
    topic: &str,
    client_id: &str,
    extra: &[&str],
) -> Result<JavaProcess> {
    let mut args = vec![
        bootstrap.to_string(),
        format!("--topic={topic}"),
        format!("--group={group}"),
        format!("client.id={client_id}"),
    ];
    match protocol {
        Protocol::Classic => args.extend([
            format!("partition.assignment.strategy={COOPERATIVE_STICKY}"),
            format!("session.timeout.ms={}", SESSION_TIMEOUT.as_millis()),
            "heartbeat.interval.ms=1000".to_string(),
        ]),
        // The Java client refuses the classic settings with this protocol.
        Protocol::Consumer => args.push("group.protocol=consumer".to_string()),
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    JavaProcess::spawn("GroupMember", &args)
}

fn wait_until(members: &mut [JavaProcess], what: &str, ok: impl Fn(&[JavaProcess]) -> bool) -> Result<()> {
    let deadline = Instant::now() + TIMEOUT;
    while !ok(members) {
        for m in members.iter_mut() {
            m.check_running()?;
        }
        if Instant::now() > deadline {
            bail!(
                "timed out waiting for {what}: assignments {:?}, processed {}",
                assignments(members),
                processed(members).len()
            );
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(())
}

/// Each member's partitions, from its last assignment event.
fn assignments(members: &[JavaProcess]) -> Vec<BTreeSet<i64>> {
    members.iter().map(|m| m.last("assignment").map(|e| assigned(&e)).unwrap_or_default()).collect()
}

/// Every partition owned by exactly one of `n` members, each owning some.
fn owners_ok(members: &[JavaProcess], n: usize) -> bool {
    let owned = assignments(members);
    let total: usize = owned.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i64> = owned.iter().flatten().copied().collect();
    owned.len() == n
        && owned.iter().all(|a| !a.is_empty())
        && total == PARTITIONS as usize
        && union.len() == total
}

/// Distinct ids processed by the running members.
fn processed(members: &[JavaProcess]) -> BTreeSet<u64> {
    members.iter().flat_map(|m| m.with_events(processed_ids)).collect()
}

fn processed_ids(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.kind() == "processed")
        .flat_map(|e| e.value["ids"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_u64())
        .collect()
}

/// Partition → last committed offset, from a member's committed events.
fn committed(events: &[Event]) -> BTreeMap<i64, i64> {
    let mut offsets = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind() == "committed") {
        for (p, o) in e.value["offsets"].as_object().into_iter().flatten() {
            offsets.insert(p.parse().unwrap_or(-1), o.as_i64().unwrap_or(-1));
        }
    }
    offsets
}
