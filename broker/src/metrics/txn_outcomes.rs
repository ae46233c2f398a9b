//! `onelog_transactions_total{outcome}`: each transaction counted once, when an applied entry
//! moves it from open (`Ongoing`) to decided. Every node applies the same entries, so every node
//! counts the same; a retried EndTxn, an empty transaction, or a broker abort of one that had
//! ended already changes no state and is not counted.

use onelog_state::command::{Command, Op};
use onelog_state::txns::TxnState;
use onelog_state::BrokerState;

use super::METRICS;

/// The transactional ids `command` may end a transaction of, among those open in `state`:
/// read before the command is applied.
pub fn open_before(state: &BrokerState, command: &Command) -> Vec<String> {
    let mut ids = Vec::new();
    for op in &command.ops {
        match op {
            Op::EndTxn(end) => ids.push(end.transactional_id.as_str()),
            // A new instance's InitProducerId aborts the old one's open transaction.
            Op::InitTxnProducer(init) => ids.push(init.transactional_id.as_str()),
            Op::AbortTxns(abort) => ids.extend(abort.transactions.iter().map(|(id, _)| id.as_str())),
            _ => {}
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter()
        .filter(|id| state.txns.by_id.get(*id).is_some_and(|m| m.state == TxnState::Ongoing))
        .map(str::to_string)
        .collect()
}

/// Counts the transactions of `open` that `state`, after the command, shows decided.
pub fn count_ended(state: &BrokerState, open: &[String]) {
    for id in open {
        match state.txns.by_id.get(id).map(|m| m.state) {
            Some(TxnState::CompleteCommit) => METRICS.transaction_ended(true),
            Some(TxnState::CompleteAbort) => METRICS.transaction_ended(false),
            _ => {}
        }
    }
}
