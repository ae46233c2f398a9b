//! Regression (issue 14): writes do not need the leader's read lease, and reads do not fail
//! when it lapses without an election.
//!
//! The leader refused Produce with NOT_LEADER_OR_FOLLOWER whenever it had been descheduled for
//! about 100 ms (its lease then lapses until a quorum round confirms it), although no election
//! happened; on two busy cores that was 20 refusals in a millisecond, and librdkafka's retries
//! of a non-idempotent producer stored records out of order. Raft already orders writes and a
//! deposed leader's entry never commits, so only what the leader answers from its own state
//! needs the lease. Reads were refused the same way (a steady Fetch in hostile_frames failed
//! with error 6 on a loaded machine): a read that finds the lease lapsed now confirms the
//! leadership with one quorum round (ReadIndex) and is served; a deposed leader fails that
//! round (cluster_failover's SIGSTOP case).
//!
//! A test-only flag (`ONELOG_FAULT_FLAGS=lease.lapsed`) makes the lease never hold on any node
//! of a three-node cluster; the leader must log that it read the flag (a binary built without
//! `fault-injection` ignores it, and the test would test nothing). Then: Produce outside a transaction (acks=all), OffsetCommit and
//! CreateTopics succeed on the leader; Fetch, ListOffsets and OffsetFetch are served after a
//! quorum round; a transactional Produce, answered from its committed entry since issue 17,
//! is not refused for the lease either (it meets the transaction checks).

use anyhow::{ensure, Result};
use harness::batch::{encode_batch, TestRecord};
use harness::process::log_lines_with;
use harness::raw_ops::{
    create_topics_ok, fetch_request, fetch_results, produce, produce_results, produce_transactional,
    topic_name, BatchFor, FETCH_VERSION_CAP,
};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::error_code::INVALID_PRODUCER_ID_MAPPING;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    FetchRequest, GroupId, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "lease";

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_reads_are_served_when_the_lease_lapses_without_an_election() {
    let mut options = ClusterOptions::new(3);
    options.env.push(("ONELOG_FAULT_FLAGS".to_string(), "lease.lapsed".to_string()));
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let mut client = RawClient::connect_negotiated(cluster.kafka_addr(leader)).await?;
    // CreateTopics: a controller write, answered once applied.
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;

    // Produce, acks=all, outside a transaction: answered from its committed entry.
    let records: Vec<TestRecord> = (0..10).map(|i| TestRecord::new(format!("k{i}"), "v", 0)).collect();
    let batch = BatchFor { topic: TOPIC.into(), partition: 0, records: encode_batch(&records)? };
    for round in 0..3 {
        let results = produce_results(&produce(&mut client, -1, std::slice::from_ref(&batch)).await?);
        ensure!(results.len() == 1, "{results:?}");
        let (_, _, code, base_offset) = &results[0];
        ensure!(*code == 0, "produce {round} without the lease: error {code}");
        ensure!(*base_offset == round * 10, "produce {round}: base offset {base_offset}");
    }
    println!("3 produce requests (acks=all) accepted by leader {leader} without a lease");

    // OffsetCommit of a simple consumer: answered from its committed entry.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("lease-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(topic_name(TOPIC)).with_partitions(
            vec![OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(7)],
        )]);
    let committed = client.request(8, &commit).await?;
    let code = committed.topics[0].partitions[0].error_code;
    ensure!(code == 0, "offset commit without the lease: error {code}");

    // Reads: the lapsed lease is made up for by a quorum round per request.
    let version = client.version::<FetchRequest>(FETCH_VERSION_CAP)?;
    let fetched = fetch_results(&client.request(version, &fetch_request(&[(TOPIC, 0, 0)], 1 << 20)).await?);
    ensure!(fetched[0].error_code == 0, "fetch without the lease: error {}", fetched[0].error_code);
    ensure!(fetched[0].high_watermark == 30, "fetch: high watermark {}", fetched[0].high_watermark);
    let list = ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![
        ListOffsetsTopic::default().with_name(topic_name(TOPIC)).with_partitions(vec![
            ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1),
        ]),
    ]);
    let listed = client.request(5, &list).await?;
    let (code, offset) = (listed.topics[0].partitions[0].error_code, listed.topics[0].partitions[0].offset);
    ensure!(code == 0 && offset == 30, "list offsets without the lease: error {code}, offset {offset}");
    let offset_fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("lease-group")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partition_indexes(vec![0])]));
    let fetched_offsets = client.request(5, &offset_fetch).await?;
    let committed = fetched_offsets.topics[0].partitions[0].committed_offset;
    ensure!(
        fetched_offsets.error_code == 0 && committed == 7,
        "offset fetch without the lease: error {}, offset {committed}",
        fetched_offsets.error_code
    );
    println!("fetch, list offsets and offset fetch served after a quorum round");

    // Since issue 17 a transactional batch too is answered from its committed entry, so it
    // needs no lease either: it reaches the transaction checks, which refuse this made-up
    // producer id (INVALID_PRODUCER_ID_MAPPING) instead of the lease refusing it.
    let mut txn_records = encode_batch(&records)?.to_vec();
    set_transactional(&mut txn_records);
    let txn_batch = BatchFor { topic: TOPIC.into(), partition: 0, records: txn_records.into() };
    let results = produce_results(&produce_transactional(&mut client, -1, "lease-txn", &[txn_batch]).await?);
    ensure!(
        results[0].2 == INVALID_PRODUCER_ID_MAPPING,
        "transactional produce without the lease: {results:?}, expected the transaction's own refusal"
    );
    println!("a transactional produce without the lease reaches the transaction checks");

    // The leader that served all this ran with the lease switched off.
    let active =
        log_lines_with(&cluster.log_path(leader), &["fault injection active: flags", "lease.lapsed"])?;
    ensure!(
        !active.is_empty(),
        "leader {leader} never logged 'fault injection active: flags lease.lapsed': is ONELOG_BIN \
         built with --features fault-injection (scripts/test.sh)?"
    );
    Ok(())
}

/// Sets the transactional bit (attributes bit 4) of a v2 record batch, a producer id, epoch 0
/// and sequence 0, so the broker takes it for a transaction's first batch; the CRC (over
/// attributes onward) is recomputed.
fn set_transactional(batch: &mut [u8]) {
    const ATTRIBUTES: usize = 21;
    const PRODUCER_ID: usize = 43;
    const PRODUCER_EPOCH: usize = 51;
    const BASE_SEQUENCE: usize = 53;
    batch[ATTRIBUTES + 1] |= 0x10;
    batch[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&1i64.to_be_bytes());
    batch[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&0i16.to_be_bytes());
    batch[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}
