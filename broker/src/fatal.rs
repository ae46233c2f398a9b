//! The one way a node stops on a fault: a failed invariant, a storage error, a stopped Raft
//! core or proposer. From the first call on, the node answers nothing (`is_stopping`: the
//! Kafka listener closes every connection instead of reading or answering a request, the
//! admin API answers 503); it logs
//! one clear line and exits with code 70 (EX_SOFTWARE), so a supervisor restarts it and a
//! replica takes over. It never leaves a poisoned lock behind for request handlers to trip
//! over, and never serves from the state the fault froze.
//!
//! `std::process::exit` runs no destructors and releases no locks on the way: nothing can
//! observe the state the fault left behind. It is not instant, though: it runs the calling
//! thread's thread-local destructors and the C library's exit handlers, and a second caller
//! waits forever for the first. A node was seen answering Metadata from frozen state for
//! 20 minutes after its "exiting" line. So a watchdog thread, started before anything that
//! could block (the log line included: stderr may be a full pipe), ends the process with
//! `_exit` after `FATAL_EXIT_WATCHDOG_MS` whatever the orderly path is doing.
//! Ordinary shutdowns (SIGTERM, removal from the membership) do not come here.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::limits;

/// The process exit code of a node stopped on a fault.
pub const EXIT_CODE: i32 = 70;

/// Set once by the first `stop`; never cleared (only a restart does).
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Whether the node is stopping on a fault: nothing may be served from here on.
pub fn is_stopping() -> bool {
    STOPPING.load(Ordering::Acquire)
}

/// Stops the node: `what` failed because of `error`.
pub fn stop(what: &str, error: &dyn Display) -> ! {
    if !STOPPING.swap(true, Ordering::AcqRel) {
        start_watchdog();
    }
    tracing::error!(error = %error, "{what}; exiting");
    // Test builds: stands in for the orderly exit hanging after its line, as it was seen to.
    crate::fault::block_point("fatal-exit-hangs");
    std::process::exit(EXIT_CODE)
}

/// Stops the node on a broken invariant (a bug): the state may no longer be trusted.
pub fn invariant(message: &str) -> ! {
    stop("invariant failed", &message)
}

/// Ends the process after `FATAL_EXIT_WATCHDOG_MS` unless the orderly exit got there first.
fn start_watchdog() {
    let spawned = std::thread::Builder::new().name("fatal-exit-watchdog".into()).spawn(|| {
        std::thread::sleep(Duration::from_millis(limits::FATAL_EXIT_WATCHDOG_MS));
        hard_exit()
    });
    if spawned.is_err() {
        // No thread to wait on our behalf (out of memory or threads): do not risk the wait.
        hard_exit();
    }
}

fn hard_exit() -> ! {
    // SAFETY: `_exit` ends the process at once; it touches no Rust state and cannot fail.
    unsafe { libc::_exit(EXIT_CODE) }
}
