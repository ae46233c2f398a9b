//! The chaos checker's own test bugs (issue 14: "the checker is not blind"), compiled only
//! into the `fault-injection` build: a deliberately broken leader that answers writes once
//! stamped, before their entry commits, so that a leader crash loses writes its clients were
//! told about, which the checker must then report. `ONELOG_FAULT_FLAGS` switches them on:
//!
//! - `bug.ack-before-commit`: every non-transactional produce;
//! - `bug.ack-txn-before-commit`: transactional writes to a transaction already open in the
//!   committed state, what onelog did before issue 17 (a new leader aborted every open
//!   transaction then; with that abort gone, a crash commits a transaction without a write
//!   its client was told about: lost, torn).
//!
//! The pure entry builder knows nothing of them: [`build_entry_in_flight`] builds the entry as
//! `onelog_state::entry::build_entry_in_flight` does, then answers the chosen proposals as stamped
//! (`Entry::answer_as_stamped`). A release build calls the pure builder directly.

use onelog_state::command::LeaderStamp;
use onelog_state::entry::{self, Entry, EntryOptions, InFlight, Proposal};
use onelog_state::BrokerState;

use crate::fault;

/// `entry::build_entry_in_flight`, with the test bugs `ONELOG_FAULT_FLAGS` switches on applied.
pub fn build_entry_in_flight(
    state: &BrokerState,
    in_flight: &mut InFlight,
    stamp: LeaderStamp,
    options: &EntryOptions,
    proposals: Vec<Proposal>,
) -> Entry {
    let ack_before_commit = fault::flag("bug.ack-before-commit");
    let ack_txn_before_commit = fault::flag("bug.ack-txn-before-commit");
    let early: Vec<bool> = proposals
        .iter()
        .map(|proposal| match proposal {
            // A cross-group write is answered once its registration is applied too.
            Proposal::Op(_) | Proposal::ProduceRemote(_) => false,
            Proposal::Produce(_) => ack_before_commit,
            Proposal::ProduceTransactional(appends) => {
                ack_txn_before_commit && entry::writes_open_txn(state, appends)
            }
        })
        .collect();
    let mut built = entry::build_entry_in_flight(state, in_flight, stamp, options, proposals);
    built.answer_as_stamped(state, &early);
    built
}
