//! The transaction tooling APIs behind `kafka-transactions.sh` (ListTransactions,
//! DescribeTransactions, DescribeProducers) against a three-node cluster.
//!
//! A librdkafka transactional producer commits one transaction, then opens another on two
//! partitions; raw requests
//! then see it from every angle: listed as Ongoing by the leader and by no follower (the admin
//! client merges every broker's list), described with its partitions and start time, and its
//! producer on each partition with the transaction's first offset there, on the leader and on
//! a follower (each replica answers DescribeProducers, as Kafka's do). After the commit the
//! transaction is CompleteCommit with no partitions, and the producer has no open transaction.
//! Bad input: an unknown transactional id, an unknown partition and topic.
//!
//! WriteTxnMarkers (what `kafka-transactions.sh abort` sends; harness/tests/java_transactions.rs
//! runs the tool) on the committed transaction: nothing is open, so an abort marker aborts
//! nothing; a commit marker, an older epoch, an unknown partition and a follower are refused
//! per partition, and the transaction stays CompleteCommit.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{describe_transactions, open_after_commit, TXN_CALL_TIMEOUT as TXN_TIMEOUT};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::{
    INVALID_PRODUCER_EPOCH, INVALID_REQUEST, NONE, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER,
    TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::ProducerState;
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::list_transactions_response::ListTransactionsResponse;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ListTransactionsRequest, ProducerId, TopicName,
    WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::Producer;

const TOPIC: &str = "tooling";
const TXN_ID: &str = "tooling-txn";
/// How long a replica may take to apply what the leader acknowledged.
const APPLY_TIMEOUT: Duration = Duration::from_secs(10);

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

async fn list(
    client: &mut RawClient,
    states: &[&str],
    producer_ids: &[i64],
    duration_ms: i64,
) -> Result<ListTransactionsResponse> {
    let request = ListTransactionsRequest::default()
        .with_state_filters(states.iter().map(|s| str_bytes(s)).collect())
        .with_producer_id_filters(producer_ids.iter().map(|p| ProducerId(*p)).collect())
        .with_duration_filter(duration_ms);
    let version = client.version::<ListTransactionsRequest>(1)?;
    client.request(version, &request).await
}

/// (transactional id, producer id, state) of every listed transaction.
fn listed(response: &ListTransactionsResponse) -> Vec<(String, i64, String)> {
    response
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.producer_id.0, t.transaction_state.to_string()))
        .collect()
}

/// (topic, partition) of every partition a description lists.
fn described_partitions(d: &Described) -> Vec<(String, i32)> {
    d.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p))).collect()
}

async fn describe_producers(
    client: &mut RawClient,
    asked: &[(&str, &[i32])],
) -> Result<DescribeProducersResponse> {
    let topics = asked
        .iter()
        .map(|(topic, partitions)| {
            TopicRequest::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partition_indexes(partitions.to_vec())
        })
        .collect();
    let version = client.version::<DescribeProducersRequest>(0)?;
    client.request(version, &DescribeProducersRequest::default().with_topics(topics)).await
}

/// (error code, active producers) of one partition of a DescribeProducers response.
fn producers_of(
    response: &DescribeProducersResponse,
    topic: &str,
    partition: i32,
) -> Result<(i16, Vec<ProducerState>)> {
    let p = response
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .with_context(|| format!("no answer for {topic}/{partition}"))?;
    Ok((p.error_code, p.active_producers.clone()))
}

/// Asks until `producer_id` on `TOPIC`/`partition` has `txn_start_offset` as its current
/// transaction start: a replica shows a write once it applied it, which may follow the ack.
async fn wait_producer(
    client: &mut RawClient,
    partition: i32,
    producer_id: i64,
    txn_start_offset: i64,
) -> Result<ProducerState> {
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        let partitions = [partition];
        let response = describe_producers(client, &[(TOPIC, &partitions)]).await?;
        let (code, producers) = producers_of(&response, TOPIC, partition)?;
        ensure!(code == NONE, "{TOPIC}/{partition}: DescribeProducers error {code}");
        let found = producers.iter().find(|p| p.producer_id.0 == producer_id);
        if let Some(p) = found.filter(|p| p.current_txn_start_offset == txn_start_offset) {
            return Ok(p.clone());
        }
        if Instant::now() > deadline {
            bail!("{TOPIC}/{partition}: producer {producer_id} with txn start {txn_start_offset} not shown: {producers:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tooling_apis_show_an_open_then_committed_transaction() {
    let mut cluster = Cluster::start_with(ClusterOptions::new(3)).expect("starting cluster");
    let result = open_then_committed(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn open_then_committed(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let follower = cluster.followers()?[0];
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 2)]).await?;
    let mut at_leader = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    let mut at_follower = RawClient::connect_negotiated(cluster.kafka_addr(follower)).await?;

    // Phase 1: a transaction open on both partitions, after a committed one on partition 0
    // (its record and marker), so the open one starts past offset 0 there.
    let (producer, [first_0, first_1]) = open_after_commit(&bootstrap, TOPIC, TXN_ID).await?;
    ensure!(first_0 == 2, "the open transaction starts at {first_0} on partition 0");

    let described = describe_transactions(&mut at_leader, &[TXN_ID, "no-such-txn"]).await?;
    ensure!(described.len() == 2, "{described:?}");
    let open = &described[0];
    ensure!(open.error_code == NONE && open.transaction_state.as_str() == "Ongoing", "{open:?}");
    ensure!(open.transaction_timeout_ms == 60_000 && open.transaction_start_time_ms > 0, "{open:?}");
    let partitions = described_partitions(open);
    ensure!(partitions == vec![(TOPIC.to_owned(), 0), (TOPIC.to_owned(), 1)], "partitions {partitions:?}");
    ensure!(described[1].error_code == TRANSACTIONAL_ID_NOT_FOUND, "unknown id: {:?}", described[1]);
    let pid = open.producer_id.0;
    println!("described: {open:?}");
    let at_follower_described = describe_transactions(&mut at_follower, &[TXN_ID]).await?;
    ensure!(at_follower_described[0].error_code == NOT_COORDINATOR, "{at_follower_described:?}");

    let everything = list(&mut at_leader, &[], &[], -1).await?;
    ensure!(everything.error_code == NONE, "{everything:?}");
    ensure!(listed(&everything) == vec![(TXN_ID.to_owned(), pid, "Ongoing".to_owned())], "{everything:?}");
    // The admin client merges every broker's list: followers add nothing.
    for id in cluster.followers()? {
        let mut client = RawClient::connect_negotiated(cluster.kafka_addr(id)).await?;
        let response = list(&mut client, &[], &[], -1).await?;
        ensure!(response.error_code == NONE && listed(&response).is_empty(), "node {id}: {response:?}");
    }
    check_list_filters(&mut at_leader, pid).await?;

    for (client, who) in [(&mut at_leader, "leader"), (&mut at_follower, "follower")] {
        for (partition, first) in [(0, first_0), (1, first_1)] {
            let p = wait_producer(client, partition, pid, first).await.with_context(|| who.to_owned())?;
            ensure!(p.producer_epoch == i32::from(open.producer_epoch), "{who}: {p:?}");
            ensure!(p.last_sequence >= 0 && p.last_timestamp > 0, "{who}: {p:?}");
            println!("{who} {TOPIC}/{partition}: {p:?}");
        }
    }
    let unknown = describe_producers(&mut at_leader, &[(TOPIC, &[9]), ("no-such-topic", &[0])]).await?;
    for (topic, partition) in [(TOPIC, 9), ("no-such-topic", 0)] {
        let (code, _) = producers_of(&unknown, topic, partition)?;
        ensure!(code == UNKNOWN_TOPIC_OR_PARTITION, "{topic}/{partition}: error {code}");
    }

    // Phase 2: committed.
    producer.commit_transaction(TXN_TIMEOUT).context("commit")?;
    let described = describe_transactions(&mut at_leader, &[TXN_ID]).await?;
    let done = &described[0];
    ensure!(done.error_code == NONE && done.transaction_state.as_str() == "CompleteCommit", "{done:?}");
    ensure!(done.topics.is_empty() && done.transaction_start_time_ms == -1, "{done:?}");
    let committed = list(&mut at_leader, &["CompleteCommit"], &[], -1).await?;
    ensure!(
        listed(&committed) == vec![(TXN_ID.to_owned(), pid, "CompleteCommit".to_owned())],
        "{committed:?}"
    );
    for (client, who) in [(&mut at_leader, "leader"), (&mut at_follower, "follower")] {
        for partition in [0, 1] {
            wait_producer(client, partition, pid, -1).await.with_context(|| format!("{who} after commit"))?;
        }
    }

    // Phase 3: WriteTxnMarkers with nothing open.
    let epoch = done.producer_epoch;
    let marker = |commit: bool, epoch: i16| (pid, epoch, commit);
    let codes = write_markers(&mut at_leader, marker(false, epoch), &[(TOPIC, 0), (TOPIC, 9)]).await?;
    ensure!(codes == [NONE, UNKNOWN_TOPIC_OR_PARTITION], "abort marker with nothing open: {codes:?}");
    let codes = write_markers(&mut at_leader, marker(true, epoch), &[(TOPIC, 0)]).await?;
    ensure!(codes == [INVALID_REQUEST], "commit marker: {codes:?}");
    let codes = write_markers(&mut at_leader, marker(false, epoch - 1), &[(TOPIC, 0)]).await?;
    ensure!(codes == [INVALID_PRODUCER_EPOCH], "older epoch: {codes:?}");
    let codes = write_markers(&mut at_follower, marker(false, epoch), &[(TOPIC, 0)]).await?;
    ensure!(codes == [NOT_LEADER_OR_FOLLOWER], "at a follower: {codes:?}");
    let described = describe_transactions(&mut at_leader, &[TXN_ID]).await?;
    ensure!(described[0].transaction_state.as_str() == "CompleteCommit", "{:?}", described[0]);
    ensure!(described[0].producer_epoch == epoch, "no abort bumped the epoch: {:?}", described[0]);
    Ok(())
}

/// One WriteTxnMarkers request of one marker (producer id, epoch, commit) for `partitions`; the
/// error code of each, in order.
async fn write_markers(
    client: &mut RawClient,
    (producer_id, producer_epoch, commit): (i64, i16, bool),
    partitions: &[(&str, i32)],
) -> Result<Vec<i16>> {
    let topics = partitions
        .iter()
        .map(|(topic, p)| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partition_indexes(vec![*p])
        })
        .collect();
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_transaction_result(commit)
        .with_coordinator_epoch(0)
        .with_topics(topics);
    let version = client.version::<WriteTxnMarkersRequest>(1)?;
    let response =
        client.request(version, &WriteTxnMarkersRequest::default().with_markers(vec![marker])).await?;
    ensure!(response.markers.len() == 1 && response.markers[0].producer_id.0 == producer_id, "{response:?}");
    let answered = response.markers[0].topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t, p)));
    let mut codes = Vec::new();
    for ((topic, partition), (t, p)) in partitions.iter().zip(answered) {
        ensure!(t.name.0.as_str() == *topic && p.partition_index == *partition, "{response:?}");
        codes.push(p.error_code);
    }
    ensure!(codes.len() == partitions.len(), "{response:?}");
    Ok(codes)
}

/// ListTransactions' filters on the leader while the transaction of `pid` is open.
async fn check_list_filters(client: &mut RawClient, pid: i64) -> Result<()> {
    let ongoing = vec![(TXN_ID.to_owned(), pid, "Ongoing".to_owned())];
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cases: [(&[&str], &[i64], i64, bool); 6] = [
        (&["Ongoing"], &[], -1, true),
        (&["CompleteCommit", "Empty"], &[], -1, false),
        (&[], &[pid], -1, true),
        (&[], &[pid + 1], -1, false),
        (&[], &[], 1, true),
        (&[], &[], 3_600_000, false),
    ];
    for (states, pids, duration_ms, expected) in cases {
        let response = list(client, states, pids, duration_ms).await?;
        let want = if expected { ongoing.clone() } else { Vec::new() };
        ensure!(listed(&response) == want, "filters {states:?} {pids:?} {duration_ms}: {response:?}");
    }
    let bogus = list(client, &["Bogus"], &[], -1).await?;
    let unknown: Vec<String> = bogus.unknown_state_filters.iter().map(|s| s.to_string()).collect();
    ensure!(unknown == vec!["Bogus".to_owned()] && listed(&bogus).is_empty(), "{bogus:?}");
    Ok(())
}
