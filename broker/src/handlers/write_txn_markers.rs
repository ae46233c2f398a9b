//! WriteTxnMarkers (key 27), v1: what `kafka-transactions.sh abort` (Admin.abortTransaction)
//! sends to a partition's leader to abort a hanging transaction.
//!
//! In Kafka the coordinator sends these markers to every partition of a transaction, and the
//! admin tool sends one itself to end a transaction the coordinator lost track of. onelog has
//! no coordinator and no marker protocol (DESIGN §1): a transaction's markers are written by the
//! one entry that ends it, so a transaction cannot be torn. The only consistent meaning of an
//! abort marker is therefore to abort the producer's whole open transaction through the log: one
//! `AbortTxns` op with reason `BrokerAbort::Admin`, which writes the abort markers into every
//! partition the transaction wrote and bumps the epoch; the producer's next EndTxn(commit) gets
//! the abortable error of any broker abort (`onelog_state::txn_errors`). Per partition:
//! - a node not leading the partition's Raft group answers NOT_LEADER_OR_FOLLOWER, and the
//!   admin client looks the leader up again;
//! - a partition holding a transaction another Raft group coordinates (issue 32) asks that
//!   group's leader to abort it (`onelog.version` 9; below it, such a marker changes nothing
//!   and is answered NONE); an unreachable coordinator is NOT_LEADER_OR_FOLLOWER, which the
//!   admin client retries;
//! - a commit marker (transaction_result = true) is refused with INVALID_REQUEST: only the
//!   producer's own EndTxn commits, and the admin client never sends one;
//! - a marker epoch older than the producer's gets INVALID_PRODUCER_EPOCH, as from Kafka's
//!   partition leader: the transaction the tool saw has ended;
//! - a producer with no transaction open on the partition gets NONE: nothing to abort, as Kafka
//!   writing a marker that changes nothing there;
//! - the coordinator epoch is not checked: there is no coordinator (DescribeProducers shows -1).
//!
//! Like Kafka's marker, the abort applies to whatever transaction the producer has open at that
//! epoch when the entry applies; a transaction that ended in between is left alone.
//!
//! Access: CLUSTER CLUSTER_ACTION, checked by the pipeline (`handlers::HANDLERS`): refused,
//! every partition is answered CLUSTER_AUTHORIZATION_FAILED and nothing is aborted.

use std::collections::BTreeMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};

use onelog_state::features::{ONELOG_VERSION, ONELOG_VERSION_PARTICIPANT_MESSAGES};
use onelog_state::txns::{BrokerAbort, ProducerIdEpoch};

use super::util::producer;
use super::HandlerResult;
use crate::coord::txn::views::{self, AbortTarget};
use crate::coord::xgroup::ask;
use crate::ctx::{Ctx, SharedCtx};
use crate::errors::{propose_error_code, Addressed};
use crate::raft::transport::xgroup::{XAnswer, XMessage};

pub const KEY: ApiKey = ApiKey::WriteTxnMarkers;
/// KIP-896 removed v0 in Kafka 4.0; v1 is the flexible version every admin client sends.
pub const VERSIONS: (i16, i16) = (1, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

/// What one requested partition comes to before the abort is proposed.
enum Decided {
    Code(i16),
    /// Abort the transaction in this Raft group (the partition's, which coordinates it).
    Abort(u32, String, ProducerIdEpoch),
    /// Ask Raft group `coordinator`, which coordinates the producer, to abort it.
    Remote(u32, ProducerIdEpoch),
}

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::WriteTxnMarkers(body) = req.body else { anyhow::bail!("not a WriteTxnMarkers body") };
    let decided = decide(&ctx, &body);
    let aborted = abort(&ctx, &decided).await;
    let remote = abort_remote(&ctx, &decided).await;
    let codes = decided.into_iter().map(|d| match d {
        Decided::Code(code) => code,
        Decided::Abort(group, ..) => aborted.get(&group).copied().unwrap_or(error_code::NONE),
        Decided::Remote(_, id) => remote.get(&id.producer_id).copied().unwrap_or(error_code::NONE),
    });
    Ok(Some(ResponseKind::WriteTxnMarkers(response(&body, codes))))
}

/// One decision per requested partition, in request order, each by the Raft group holding the
/// partition: where this node leads it, from that group's applied state.
fn decide(ctx: &Ctx, body: &WriteTxnMarkersRequest) -> Vec<Decided> {
    let mut decided = Vec::new();
    for marker in &body.markers {
        let id = producer(marker.producer_id, marker.producer_epoch);
        for topic in &marker.topics {
            let group = ctx.topic_group(&topic.name.0);
            let lane = ctx.lane(group).filter(|lane| lane.leadership.is_leader());
            for &partition in &topic.partition_indexes {
                decided.push(match lane {
                    None => Decided::Code(error_code::NOT_LEADER_OR_FOLLOWER),
                    Some(_) if marker.transaction_result => Decided::Code(error_code::INVALID_REQUEST),
                    Some(lane) => {
                        let found =
                            lane.applied.state(|s| views::abort_target(s, id, &topic.name.0, partition));
                        target(group, id, found)
                    }
                });
            }
        }
    }
    decided
}

/// The one mapping from an abort target of marker `marker` to the partition's answer.
fn target(group: u32, marker: ProducerIdEpoch, target: AbortTarget) -> Decided {
    match target {
        AbortTarget::Open(transactional_id, id) => Decided::Abort(group, transactional_id, id),
        AbortTarget::Remote { coordinator } => Decided::Remote(coordinator, marker),
        AbortTarget::NothingOpen => Decided::Code(error_code::NONE),
        AbortTarget::StaleEpoch { .. } => Decided::Code(error_code::INVALID_PRODUCER_EPOCH),
        AbortTarget::UnknownPartition => Decided::Code(error_code::UNKNOWN_TOPIC_OR_PARTITION),
    }
}

/// Proposes, in each group, one `AbortTxns` op for every transaction named there; returns the
/// code of each group's partitions that named one.
async fn abort(ctx: &Ctx, decided: &[Decided]) -> BTreeMap<u32, i16> {
    let mut by_group: BTreeMap<u32, Vec<(String, ProducerIdEpoch)>> = BTreeMap::new();
    for d in decided {
        if let Decided::Abort(group, tid, id) = d {
            let transactions = by_group.entry(*group).or_default();
            if !transactions.iter().any(|(t, _)| t == tid) {
                transactions.push((tid.clone(), *id));
            }
        }
    }
    let mut codes = BTreeMap::new();
    for (group, transactions) in by_group {
        let Some(lane) = ctx.lane(group) else { continue };
        tracing::info!(group, transactions = ?transactions, "aborting transactions by WriteTxnMarkers (admin)");
        let code = match lane.txns.abort(BrokerAbort::Admin, transactions).await {
            Ok(()) => error_code::NONE,
            Err(e) => {
                tracing::warn!(error = %e, "WriteTxnMarkers abort not committed");
                propose_error_code(&e, Addressed::MarkerPartitionLeader)
            }
        };
        codes.insert(group, code);
    }
    codes
}

/// Asks the coordinating group of each remote producer named to abort its transaction, once
/// per producer (`onelog.version` 9); returns each producer id's code.
async fn abort_remote(ctx: &Ctx, decided: &[Decided]) -> BTreeMap<i64, i16> {
    let mut asked = BTreeMap::new();
    let level = ctx.applied.state(|s| s.features.level(ONELOG_VERSION));
    for d in decided {
        let Decided::Remote(coordinator, producer) = d else { continue };
        if asked.contains_key(&producer.producer_id) {
            continue;
        }
        let code = if level < ONELOG_VERSION_PARTICIPANT_MESSAGES {
            error_code::NONE
        } else {
            let message = XMessage::AdminAbort { coordinator: *coordinator, producer: *producer };
            match ask(ctx, *coordinator, message).await {
                Ok(XAnswer::Aborted(code)) => code,
                Ok(_) | Err(_) => error_code::NOT_LEADER_OR_FOLLOWER,
            }
        };
        asked.insert(producer.producer_id, code);
    }
    asked
}

/// One result per requested marker, topic and partition, in request order.
fn response(body: &WriteTxnMarkersRequest, mut codes: impl Iterator<Item = i16>) -> WriteTxnMarkersResponse {
    let markers = body
        .markers
        .iter()
        .map(|marker| {
            let topics = marker
                .topics
                .iter()
                .map(|topic| {
                    let partitions = topic
                        .partition_indexes
                        .iter()
                        .map(|&index| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(index)
                                .with_error_code(codes.next().unwrap_or(error_code::UNKNOWN_SERVER_ERROR))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(topic.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default().with_producer_id(marker.producer_id).with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// The whole request refused with `code` on every partition of every marker
/// (`WriteTxnMarkersRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::WriteTxnMarkers(body) = body else {
        return ResponseKind::WriteTxnMarkers(Default::default());
    };
    ResponseKind::WriteTxnMarkers(response(body, std::iter::repeat(code)))
}
