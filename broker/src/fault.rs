//! Fault-injection points, compiled only into the `fault-injection` build the tests spawn.
//!
//! `ONELOG_FAULT=<name>` makes the process abort — like a kill -9, no destructors, no flushes —
//! when execution reaches the point of that name; a `panic_point` panics there instead, the
//! way a failed invariant would.

/// Aborts the process here if `ONELOG_FAULT` names this point.
#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if std::env::var("ONELOG_FAULT").is_ok_and(|v| v == name) {
        tracing::error!(point = name, "fault injection: aborting");
        std::process::abort();
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_name: &str) {}

/// Panics here if `ONELOG_FAULT` names this point: a stand-in for a failed invariant.
#[cfg(feature = "fault-injection")]
pub fn panic_point(name: &str) {
    if std::env::var("ONELOG_FAULT").is_ok_and(|v| v == name) {
        panic!("fault injection: invariant {name} failed");
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn panic_point(_name: &str) {}
