//! Fault injection shared by the whole workspace, compiled only with the `fault-injection`
//! feature (the broker's feature of the same name turns it on for the binary the tests spawn).
//!
//! It lives here, in the lowest crate, so the log store's own point (a failed fdatasync) and
//! the broker's points (`broker::fault`) read the same switches:
//!
//! - `ONELOG_FAULT=<name>` names the one point that fires in this process;
//! - `ONELOG_FAULT_ARMED_BY=<path>`, when set, holds it back until that file exists, so a test
//!   can let a node start, join and serve before the point may fire.

use std::io;

/// The log store's point: an fdatasync of a segment fails with EIO, as on a failing disk.
pub const FSYNC_FAILS: &str = "raft-log-fsync-fails";

/// Whether the point `name` fires now.
pub fn fires(name: &str) -> bool {
    if !std::env::var("ONELOG_FAULT").is_ok_and(|v| v == name) {
        return false;
    }
    match std::env::var_os("ONELOG_FAULT_ARMED_BY") {
        Some(path) => std::path::Path::new(&path).exists(),
        None => true,
    }
}

/// Aborts the process here if `ONELOG_FAULT` names `name` (the broker's `fault::point` for the
/// log store's own steps).
pub(crate) fn crash_point(name: &str) {
    if fires(name) {
        tracing::error!(point = name, "fault injection: aborting");
        std::process::abort();
    }
}

/// The error an injected failed fdatasync reports, or `None` when the point does not fire.
pub(crate) fn sync_failure() -> Option<io::Error> {
    fires(FSYNC_FAILS).then(|| {
        tracing::error!(point = FSYNC_FAILS, "fault injection: failing an fdatasync with EIO");
        io::Error::from_raw_os_error(libc::EIO)
    })
}
