//! DescribeTransactions (key 65), v0: per transactional id its state, producer id and
//! epoch, timeout, the start of the open transaction and the partitions it holds.
//!
//! Served by the leader, which coordinates every transaction, from its applied state plus
//! what this term's AddPartitionsToTxn recorded (`coord::txn::views`); a follower answers
//! NOT_COORDINATOR, on which Kafka's admin client finds the coordinator again. An unknown
//! (or expired) id is TRANSACTIONAL_ID_NOT_FOUND, an empty one INVALID_REQUEST, as in Kafka.
//! Partitions of `__consumer_offsets` (AddOffsetsToTxn) are not listed: onelog has no such
//! topic.

use std::collections::HashMap;

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsResponse, ProducerId, RequestKind, ResponseKind, TransactionalId,
};

use super::util::{str_bytes, topic_name};
use super::HandlerResult;
use onelog_state::txns::Transactions;

use crate::coord::txn::memory::Added;
use crate::coord::txn::views::TxnView;
use crate::ctx::SharedCtx;
use crate::security::authz::{code, op, rt, Subject};

pub const KEY: ApiKey = ApiKey::DescribeTransactions;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeTransactions(body) = req.body else {
        anyhow::bail!("not a DescribeTransactions body")
    };
    // KafkaApis: DESCRIBE on each transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    let ids = body.transactional_ids.iter().map(|id| id.0.as_str());
    let described = ctx.authorizer.allowed_each(&who, rt::TRANSACTIONAL_ID, ids, op::DESCRIBE);
    // Each id by the coordinator of its Raft group, where this node leads that group.
    let states = body
        .transactional_ids
        .into_iter()
        .zip(&described)
        .map(|(id, described)| match ctx.txn_coordinator(&id.0) {
            _ if !described => TransactionState::default()
                .with_transactional_id(id)
                .with_error_code(code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            Ok(txns) if txns.leads() => txns.view(|txns, added| describe(txns, added, id)),
            _ => TransactionState::default()
                .with_transactional_id(id)
                .with_error_code(error_code::NOT_COORDINATOR),
        })
        .collect();
    let response = DescribeTransactionsResponse::default().with_transaction_states(states);
    Ok(Some(ResponseKind::DescribeTransactions(response)))
}

fn describe(txns: &Transactions, added: &HashMap<String, Added>, id: TransactionalId) -> TransactionState {
    let state = TransactionState::default().with_transactional_id(id.clone());
    if id.0.is_empty() {
        return state.with_error_code(error_code::INVALID_REQUEST);
    }
    let Some(meta) = txns.by_id.get(id.0.as_str()) else {
        return state.with_error_code(error_code::TRANSACTIONAL_ID_NOT_FOUND);
    };
    let view = TxnView::of(&id.0, meta, added.get(id.0.as_str()));
    let mut topics: Vec<TopicData> = Vec::new();
    for (topic, partition) in view.partitions {
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == topic => t.partitions.push(partition),
            _ => topics
                .push(TopicData::default().with_topic(topic_name(topic)).with_partitions(vec![partition])),
        }
    }
    state
        .with_error_code(error_code::NONE)
        .with_transaction_state(str_bytes(view.state.kafka_name()))
        .with_transaction_timeout_ms(view.timeout_ms)
        .with_transaction_start_time_ms(view.start_ms)
        .with_producer_id(ProducerId(view.producer_id))
        .with_producer_epoch(view.producer_epoch)
        .with_topics(topics)
}
