//! ListTransactions (key 66), v0–v1: every transactional id with its producer id and state,
//! filtered by state, producer id and (v1, KIP-664) how long the transaction has been running.
//!
//! Kafka's admin client (`Admin.listTransactions`, behind `kafka-transactions.sh list` and
//! `find-hanging`) sends this to every broker and fails as a whole if any broker answers an
//! error other than COORDINATOR_LOAD_IN_PROGRESS, which it retries. The leader coordinates
//! every transaction, so it lists them all from its applied state (plus what this term's
//! adds opened, see `coord::txn::views`); a follower answers NONE with an empty list, which keeps the
//! merge complete and free of duplicates. With no leader known the answer is
//! COORDINATOR_LOAD_IN_PROGRESS, so the client asks again rather than take a partial list.
//! v2's transactional id pattern (a Java regular expression) is not served.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ApiKey, ListTransactionsResponse, ProducerId, RequestKind, ResponseKind, TransactionalId,
};

use super::util::str_bytes;
use super::HandlerResult;
use crate::coord::txn::views;
use crate::ctx::SharedCtx;
use crate::security::authz::{op, rt, Subject};

pub const KEY: ApiKey = ApiKey::ListTransactions;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::ListTransactions(body) = req.body else { anyhow::bail!("not a ListTransactions body") };
    let filter = ctx.txns.list_filter(
        body.state_filters.iter().map(|s| s.to_string()).collect(),
        body.producer_id_filters.iter().map(|p| p.0).collect(),
        body.duration_filter,
    );
    let response = ListTransactionsResponse::default()
        .with_unknown_state_filters(filter.unknown_states().into_iter().map(str_bytes).collect());
    let leader = ctx.leader_id();
    if leader.is_none() {
        let response = response.with_error_code(error_code::COORDINATOR_LOAD_IN_PROGRESS);
        return Ok(Some(ResponseKind::ListTransactions(response)));
    }
    // Kafka's admin client asks every broker: each lists the ids of the groups it leads.
    let views = ctx.lanes().filter(|lane| lane.txns.leads()).flat_map(|lane| lane.txns.view(views::all));
    let listed = views
        .filter(|view| filter.accepts(view))
        // KafkaApis: only the transactional ids the principal may DESCRIBE.
        .filter(|view| {
            ctx.authorizer.allowed(&who, rt::TRANSACTIONAL_ID, &view.transactional_id, op::DESCRIBE)
        })
        .map(|view| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(view.transactional_id)))
                .with_producer_id(ProducerId(view.producer_id))
                .with_transaction_state(str_bytes(view.state.kafka_name()))
        })
        .collect();
    let response = response.with_error_code(error_code::NONE).with_transaction_states(listed);
    Ok(Some(ResponseKind::ListTransactions(response)))
}
