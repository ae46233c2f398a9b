//! Regression: ListOffsets v1–v3 responses failed to encode (the leader epoch was set, a field
//! that exists only from v4) and the connection was closed, so kafkajs and aiokafka could not
//! consume from a partition without a committed offset, seek, or reset. Every advertised
//! version must answer earliest and latest.

use anyhow::{ensure, Context, Result};
use harness::atomic::{send_atomic, Slice};
use harness::raw_ops::{create_topics_ok, topic_name};
use harness::{Broker, BrokerOptions, RawClient};
use kafka_compat::isolation_level::READ_COMMITTED;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::ListOffsetsRequest;

const TOPIC: &str = "offsets-by-version";
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
/// ListOffsets versions onelog advertises (v0 is not).
const VERSIONS: std::ops::RangeInclusive<i16> = 1..=8;
/// v2 adds the isolation level, v4 the leader epoch (KIP-320).
const ISOLATION_FROM_VERSION: i16 = 2;
const LEADER_EPOCH_FROM_VERSION: i16 = 4;

#[tokio::test(flavor = "multi_thread")]
async fn every_advertised_list_offsets_version_answers_earliest_and_latest() {
    let mut broker = Broker::start(BrokerOptions::default()).expect("starting onelog");
    let result = scenario(&mut broker).await;
    broker.unwrap_or_dump(result);
}

async fn scenario(broker: &mut Broker) -> Result<()> {
    let mut client = RawClient::connect_negotiated(broker.addr()).await?;
    create_topics_ok(&mut client, &[(TOPIC, 1)]).await?;
    for key in [b"a", b"b", b"c"] {
        send_atomic(&mut client, &[Slice { topic: TOPIC, key, value: b"v" }]).await?;
    }
    for version in VERSIONS {
        for (timestamp, expected) in [(EARLIEST, 0), (LATEST, 3)] {
            let mut request = ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![
                ListOffsetsTopic::default().with_name(topic_name(TOPIC)).with_partitions(vec![
                    ListOffsetsPartition::default().with_partition_index(0).with_timestamp(timestamp),
                ]),
            ]);
            if version >= ISOLATION_FROM_VERSION {
                request = request.with_isolation_level(READ_COMMITTED);
            }
            // A fresh connection per request: a broken response closes it.
            let mut client = RawClient::connect(broker.addr()).await?;
            let response = client
                .request(version, &request)
                .await
                .with_context(|| format!("ListOffsets v{version} timestamp {timestamp}"))?;
            let p = &response.topics[0].partitions[0];
            ensure!(p.error_code == 0, "v{version} timestamp {timestamp}: error {}", p.error_code);
            ensure!(
                p.offset == expected,
                "v{version} timestamp {timestamp}: offset {} not {expected}",
                p.offset
            );
            let epoch_ok =
                if version >= LEADER_EPOCH_FROM_VERSION { p.leader_epoch >= 1 } else { p.leader_epoch == -1 };
            ensure!(epoch_ok, "v{version}: leader epoch {}", p.leader_epoch);
        }
        println!("ListOffsets v{version}: earliest 0, latest 3");
    }
    Ok(())
}
