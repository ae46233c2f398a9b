//! The one way a node stops on a fault: a failed invariant, a storage error, a stopped Raft
//! core or proposer. It logs one clear line and exits with code 70 (EX_SOFTWARE), so a
//! supervisor restarts it and a replica takes over; it never leaves a poisoned lock behind
//! for request handlers to trip over.
//!
//! `std::process::exit` runs no destructors and releases no locks on the way: nothing can
//! observe the state the fault left behind. Ordinary shutdowns (SIGTERM, removal from the
//! membership) do not come here.

use std::fmt::Display;

/// The process exit code of a node stopped on a fault.
pub const EXIT_CODE: i32 = 70;

/// Stops the node: `what` failed because of `error`.
pub fn stop(what: &str, error: &dyn Display) -> ! {
    tracing::error!(error = %error, "{what}; exiting");
    std::process::exit(EXIT_CODE)
}

/// Stops the node on a broken invariant (a bug): the state may no longer be trusted.
pub fn invariant(message: &str) -> ! {
    stop("invariant failed", &message)
}
