//! Fault-injection points, compiled only into the `fault-injection` build the tests spawn.
//!
//! `ONELOG_FAULT=<name>` makes the process abort — like a kill -9, no destructors, no flushes —
//! when execution reaches the point of that name; a `panic_point` panics there instead, the
//! way a failed invariant would. With `ONELOG_FAULT_ARMED_BY=<path>` neither fires before that
//! file exists (`raft_store::fault`, which also holds the log store's failed-fsync point). `ONELOG_FAULT_DELAY=<name>:<ms>` makes a `delay` point wait (also held back by the armed file);
//! `ONELOG_FAULT_FLAGS=<name>,…` turns on a `flag` for the whole run.

/// Aborts the process here if `ONELOG_FAULT` names this point.
#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if raft_store::fault::fires(name) {
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
    if raft_store::fault::fires(name) {
        panic!("fault injection: invariant {name} failed");
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn panic_point(_name: &str) {}

/// Waits here if `ONELOG_FAULT_DELAY` is `<name>:<milliseconds>`: widens a race window so a
/// test can show what a slow step used to let through. With `ONELOG_FAULT_ARMED_BY` set it
/// waits only while that file exists, so a test can hold one leader there and let the next
/// one (with the same environment) pass.
#[cfg(feature = "fault-injection")]
pub async fn delay(name: &str) {
    let Ok(v) = std::env::var("ONELOG_FAULT_DELAY") else { return };
    let Some((point, ms)) = v.split_once(':') else { return };
    let armed = std::env::var_os("ONELOG_FAULT_ARMED_BY").is_none_or(|p| std::path::Path::new(&p).exists());
    if point == name && armed {
        if let Ok(ms) = ms.parse::<u64>() {
            tracing::warn!(point = name, ms, "fault injection: delaying");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub async fn delay(_name: &str) {}

/// Whether `ONELOG_FAULT_FLAGS` (comma-separated) names `name`: a behaviour switched on for
/// the whole run, such as a leader lease that never holds. Read once per process, at the first
/// flag consulted, which logs "fault injection active: flags …": a test asserts that line, since
/// a build without the feature ignores the variable and would pass it without the fault.
#[cfg(feature = "fault-injection")]
pub fn flag(name: &str) -> bool {
    static FLAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let flags = FLAGS.get_or_init(|| {
        let v = std::env::var("ONELOG_FAULT_FLAGS").unwrap_or_default();
        let flags: Vec<String> = v.split(',').filter(|f| !f.is_empty()).map(str::to_string).collect();
        if !flags.is_empty() {
            tracing::warn!("fault injection active: flags {}", flags.join(","));
        }
        flags
    });
    flags.iter().any(|f| f == name)
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn flag(_name: &str) -> bool {
    false
}

/// Blocks the calling thread for good if `ONELOG_FAULT_FLAGS` names `name`: a stand-in for a
/// step that hangs (a lock never released, a write to a full pipe).
#[cfg(feature = "fault-injection")]
pub fn block_point(name: &str) {
    if flag(name) {
        tracing::warn!(point = name, "fault injection: blocking this thread for good");
        loop {
            std::thread::park();
        }
    }
}

/// Where to dial Raft peer `target` instead of its membership address, if
/// `ONELOG_RAFT_DIAL=<id>=<host:port>,…` names it: the harness routes each directed link
/// i→j through its own fault-injecting proxy, which one shared membership address cannot
/// express. Read once per process.
#[cfg(feature = "fault-injection")]
pub fn raft_dial(target: u64) -> Option<String> {
    static DIAL: std::sync::OnceLock<Vec<(u64, String)>> = std::sync::OnceLock::new();
    let dial = DIAL.get_or_init(|| {
        let v = std::env::var("ONELOG_RAFT_DIAL").unwrap_or_default();
        v.split(',')
            .filter_map(|pair| {
                let (id, addr) = pair.split_once('=')?;
                Some((id.trim().parse().ok()?, addr.trim().to_string()))
            })
            .collect()
    });
    dial.iter().find(|(id, _)| *id == target).map(|(_, addr)| addr.clone())
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn block_point(_name: &str) {}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn raft_dial(_target: u64) -> Option<String> {
    None
}
