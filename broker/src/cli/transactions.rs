//! `onelog admin transactions list | describe | abort`: ListTransactions and
//! DescribeTransactions, and the abort of an open transaction as `kafka-transactions.sh abort`
//! does it: DescribeProducers on the transaction's partitions finds the producer's epoch,
//! coordinator epoch and the transaction's first offset on each, then WriteTxnMarkers with
//! `transaction_result = false` (KIP-664) aborts it. onelog ends the whole transaction in one
//! log entry (`handlers::write_txn_markers`), so every partition answers the same.

use anyhow::{bail, Result};
use clap::Subcommand;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeTransactionsRequest, ListTransactionsRequest, TopicName,
    TransactionalId, WriteTxnMarkersRequest,
};
use serde_json::{json, Value};

use super::kafka::{check, Kafka};
use super::table::{Report, Table};

#[derive(Debug, Clone, Subcommand)]
pub enum TxnCommand {
    /// Every transactional id with its producer and state.
    List,
    /// State, producer, timeout, start time and partitions of each transactional id.
    Describe {
        #[arg(required = true)]
        transactional_ids: Vec<String>,
    },
    /// Abort the open transaction of a transactional id (DescribeProducers, WriteTxnMarkers).
    Abort { transactional_id: String },
}

pub async fn run(bootstrap: &[String], command: &TxnCommand) -> Result<Report> {
    let mut kafka = Kafka::leader(bootstrap).await?;
    match command {
        TxnCommand::List => list(&mut kafka).await,
        TxnCommand::Describe { transactional_ids } => {
            let mut table = Table::new(&[
                "TRANSACTIONAL ID",
                "STATE",
                "PRODUCER ID",
                "EPOCH",
                "TIMEOUT MS",
                "START TIME MS",
                "PARTITIONS",
            ]);
            let mut json = Vec::new();
            for id in transactional_ids {
                let state = describe(&mut kafka, id).await?;
                let partitions = partitions(&state);
                let names: Vec<String> = partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect();
                table.row(vec![
                    id.clone(),
                    state.transaction_state.to_string(),
                    state.producer_id.0.to_string(),
                    state.producer_epoch.to_string(),
                    state.transaction_timeout_ms.to_string(),
                    state.transaction_start_time_ms.to_string(),
                    super::table::id_list(&names),
                ]);
                json.push(json!({
                    "transactional_id": id,
                    "state": state.transaction_state.to_string(),
                    "producer_id": state.producer_id.0,
                    "producer_epoch": state.producer_epoch,
                    "transaction_timeout_ms": state.transaction_timeout_ms,
                    "transaction_start_time_ms": state.transaction_start_time_ms,
                    "partitions": partitions.iter().map(|(t, p)| json!({ "topic": t, "partition": p })).collect::<Vec<_>>(),
                }));
            }
            Ok(Report::new(table.render(), json!({ "transactions": json })))
        }
        TxnCommand::Abort { transactional_id } => abort(&mut kafka, transactional_id).await,
    }
}

async fn list(kafka: &mut Kafka) -> Result<Report> {
    let response = kafka.request(1, &ListTransactionsRequest::default()).await?;
    check(response.error_code, || "ListTransactions".to_string())?;
    let mut listed = response.transaction_states;
    listed.sort_by(|a, b| a.transactional_id.0.cmp(&b.transactional_id.0));
    let mut table = Table::new(&["TRANSACTIONAL ID", "PRODUCER ID", "STATE"]);
    let mut json = Vec::new();
    for t in &listed {
        let (id, state) = (t.transactional_id.0.to_string(), t.transaction_state.to_string());
        table.row(vec![id.clone(), t.producer_id.0.to_string(), state.clone()]);
        json.push(json!({ "transactional_id": id, "producer_id": t.producer_id.0, "state": state }));
    }
    Ok(Report::new(table.render(), json!({ "transactions": json })))
}

async fn describe(kafka: &mut Kafka, id: &str) -> Result<TransactionState> {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(id.to_string().into())]);
    let response = kafka.request(0, &request).await?;
    let Some(state) = response.transaction_states.into_iter().next() else {
        bail!("DescribeTransactions answered nothing for {id:?}")
    };
    check(state.error_code, || format!("transactional id {id:?}"))?;
    Ok(state)
}

fn partitions(state: &TransactionState) -> Vec<(String, i32)> {
    let mut partitions: Vec<(String, i32)> =
        state.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p))).collect();
    partitions.sort();
    partitions
}

/// One partition of the open transaction, as DescribeProducers shows its producer there.
struct OpenPartition {
    topic: String,
    partition: i32,
    producer_epoch: i16,
    coordinator_epoch: i32,
    start_offset: i64,
}

/// The partitions where `producer_id` has a transaction open, from DescribeProducers.
async fn open_partitions(
    kafka: &mut Kafka,
    producer_id: i64,
    partitions: &[(String, i32)],
) -> Result<Vec<OpenPartition>> {
    let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            TopicRequest::default().with_name(TopicName(t.to_string().into())).with_partition_indexes(ps)
        })
        .collect();
    let response = kafka.request(0, &DescribeProducersRequest::default().with_topics(topics)).await?;
    let mut open = Vec::new();
    for t in response.topics {
        for p in t.partitions {
            check(p.error_code, || format!("DescribeProducers on {}-{}", t.name.0, p.partition_index))?;
            let producer = p
                .active_producers
                .iter()
                .find(|s| s.producer_id.0 == producer_id && s.current_txn_start_offset >= 0);
            if let Some(s) = producer {
                open.push(OpenPartition {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                    producer_epoch: i16::try_from(s.producer_epoch).unwrap_or(i16::MAX),
                    coordinator_epoch: s.coordinator_epoch,
                    start_offset: s.current_txn_start_offset,
                });
            }
        }
    }
    Ok(open)
}

async fn abort(kafka: &mut Kafka, id: &str) -> Result<Report> {
    let state = describe(kafka, id).await?;
    let producer_id = state.producer_id.0;
    let open = open_partitions(kafka, producer_id, &partitions(&state)).await?;
    if open.is_empty() {
        bail!(
            "transactional id {id:?} has no open transaction (state {}, producer {producer_id})",
            state.transaction_state
        );
    }
    // Kafka's tool sends one marker per partition, each with that partition's epochs.
    let markers = open
        .iter()
        .map(|o| {
            let topic = WritableTxnMarkerTopic::default()
                .with_name(TopicName(o.topic.clone().into()))
                .with_partition_indexes(vec![o.partition]);
            WritableTxnMarker::default()
                .with_producer_id(state.producer_id)
                .with_producer_epoch(o.producer_epoch)
                .with_transaction_result(false)
                .with_topics(vec![topic])
                .with_coordinator_epoch(o.coordinator_epoch)
        })
        .collect();
    let response = kafka.request(1, &WriteTxnMarkersRequest::default().with_markers(markers)).await?;
    let mut codes = std::collections::BTreeMap::new();
    for m in &response.markers {
        for t in &m.topics {
            for p in &t.partitions {
                codes.insert((t.name.0.to_string(), p.partition_index), p.error_code);
            }
        }
    }
    let mut table = Table::new(&["TOPIC", "PARTITION", "START OFFSET", "RESULT"]);
    let mut json: Vec<Value> = Vec::new();
    let mut failed = Vec::new();
    for o in &open {
        let code =
            codes.get(&(o.topic.clone(), o.partition)).copied().unwrap_or(error_code::UNKNOWN_SERVER_ERROR);
        if code != error_code::NONE {
            failed.push(format!("{}-{}: {}", o.topic, o.partition, error_code::name(code)));
        }
        table.row(vec![
            o.topic.clone(),
            o.partition.to_string(),
            o.start_offset.to_string(),
            error_code::name(code),
        ]);
        json.push(json!({ "topic": o.topic, "partition": o.partition, "start_offset": o.start_offset, "error": error_code::name(code) }));
    }
    if !failed.is_empty() {
        bail!("aborting the transaction of {id:?} (producer {producer_id}): {}", failed.join(", "));
    }
    let text =
        format!("aborted the open transaction of {id:?} (producer {producer_id})\n\n{}", table.render());
    Ok(Report::new(text, json!({ "transactional_id": id, "producer_id": producer_id, "partitions": json })))
}
