//! `onelog admin topics list | describe`: topics from Metadata, and each partition's log start
//! offset, last stable offset and high watermark from ListOffsets (earliest; latest read
//! committed; latest read uncommitted), as `kafka-topics.sh` and `kafka-get-offsets.sh` show.

use std::collections::BTreeMap;

use anyhow::Result;
use clap::Subcommand;
use kafka_compat::error_code;
use kafka_compat::isolation_level::{READ_COMMITTED, READ_UNCOMMITTED};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, MetadataResponse, TopicName};
use serde_json::{json, Value};

use super::kafka::{check, Kafka};
use super::table::{Report, Table};

#[derive(Debug, Clone, Subcommand)]
pub enum TopicCommand {
    /// Every topic with its partition count.
    List,
    /// Partitions with leader, replicas and offsets (all topics when none is named).
    Describe {
        /// Topic names.
        topics: Vec<String>,
    },
}

/// ListOffsets' special timestamps (KIP-79): the log start offset and the end of the log.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// A partition's offset, or the Kafka error code it was answered with.
pub type Offset = Result<i64, i16>;

/// One ListOffsets at `timestamp` and `isolation` for `partitions`, by (topic, partition).
pub async fn list_offsets(
    kafka: &mut Kafka,
    partitions: &[(String, i32)],
    timestamp: i64,
    isolation: i8,
) -> Result<BTreeMap<(String, i32), Offset>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(timestamp))
                .collect();
            ListOffsetsTopic::default()
                .with_name(TopicName(topic.to_string().into()))
                .with_partitions(partitions)
        })
        .collect();
    // replica_id -1: a client, not a follower replica.
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(topics);
    let response = kafka.request(7, &request).await?;
    let mut offsets = BTreeMap::new();
    for topic in response.topics {
        for p in topic.partitions {
            let offset = if p.error_code == error_code::NONE { Ok(p.offset) } else { Err(p.error_code) };
            offsets.insert((topic.name.0.to_string(), p.partition_index), offset);
        }
    }
    Ok(offsets)
}

/// An offset as a table cell: the number, or the error's name.
pub fn offset_cell(offset: Option<&Offset>) -> String {
    match offset {
        Some(Ok(o)) => o.to_string(),
        Some(Err(code)) => error_code::name(*code),
        None => "-".to_string(),
    }
}

/// An offset as JSON: the number, or null (the error is in the partition's `error`).
pub fn offset_json(offset: Option<&Offset>) -> Value {
    match offset {
        Some(Ok(o)) => json!(o),
        _ => Value::Null,
    }
}

fn topic_name(topic: &kafka_protocol::messages::metadata_response::MetadataResponseTopic) -> String {
    topic.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()
}

pub async fn run(bootstrap: &[String], command: &TopicCommand) -> Result<Report> {
    let mut kafka = Kafka::leader(bootstrap).await?;
    match command {
        TopicCommand::List => Ok(list(&kafka.metadata(None).await?)),
        TopicCommand::Describe { topics } => {
            let asked = (!topics.is_empty()).then(|| topics.clone());
            let metadata = kafka.metadata(asked).await?;
            describe(&mut kafka, &metadata).await
        }
    }
}

fn list(metadata: &MetadataResponse) -> Report {
    let mut topics: Vec<_> = metadata.topics.iter().collect();
    topics.sort_by_key(|t| topic_name(t));
    let mut table = Table::new(&["TOPIC", "PARTITIONS", "INTERNAL", "TOPIC ID"]);
    let mut json = Vec::new();
    for t in topics {
        let (name, id) = (topic_name(t), t.topic_id.simple().to_string());
        table.row(vec![name.clone(), t.partitions.len().to_string(), t.is_internal.to_string(), id.clone()]);
        json.push(json!({ "topic": name, "topic_id": id, "partitions": t.partitions.len(), "internal": t.is_internal }));
    }
    Report::new(table.render(), json!({ "topics": json }))
}

async fn describe(kafka: &mut Kafka, metadata: &MetadataResponse) -> Result<Report> {
    let mut partitions = Vec::new();
    for t in &metadata.topics {
        check(t.error_code, || format!("topic {:?}", topic_name(t)))?;
        for p in &t.partitions {
            partitions.push((topic_name(t), p.partition_index, p));
        }
    }
    partitions.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let keys: Vec<(String, i32)> = partitions.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
    let start = list_offsets(kafka, &keys, EARLIEST, READ_UNCOMMITTED).await?;
    let lso = list_offsets(kafka, &keys, LATEST, READ_COMMITTED).await?;
    let hw = list_offsets(kafka, &keys, LATEST, READ_UNCOMMITTED).await?;
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "LOG START",
        "LAST STABLE",
        "HIGH WATERMARK",
    ]);
    let mut json = Vec::new();
    for (key, (topic, partition, p)) in keys.iter().zip(&partitions) {
        let replicas: Vec<i32> = p.replica_nodes.iter().map(|r| r.0).collect();
        let offsets = [start.get(key), lso.get(key), hw.get(key)];
        let error = offsets
            .iter()
            .find_map(|o| o.and_then(|o| o.err()))
            .or((p.error_code != 0).then_some(p.error_code));
        table.row(vec![
            topic.clone(),
            partition.to_string(),
            p.leader_id.0.to_string(),
            super::table::id_list(&replicas),
            offset_cell(offsets[0]),
            offset_cell(offsets[1]),
            offset_cell(offsets[2]),
        ]);
        json.push(json!({
            "topic": topic,
            "partition": partition,
            "leader": p.leader_id.0,
            "replicas": replicas,
            "log_start_offset": offset_json(offsets[0]),
            "last_stable_offset": offset_json(offsets[1]),
            "high_watermark": offset_json(offsets[2]),
            "error": error.map(error_code::name),
        }));
    }
    Ok(Report::new(table.render(), json!({ "partitions": json })))
}
