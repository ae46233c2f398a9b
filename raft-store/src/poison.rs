//! The store's fatal-error latch. After a failed write or fsync the page cache may hold data the
//! disk never got, and a later successful fsync would not bring it back (fsyncgate). So the first
//! such failure poisons the store and every later operation fails; only a restart, which re-reads
//! what the disk really has, clears it (DESIGN §3, STYLE "Errors").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::error::LogStoreError;

#[derive(Debug, Default)]
pub(crate) struct Poison {
    poisoned: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Poison {
    /// Fails with `Poisoned` once the latch is set.
    pub fn check(&self) -> Result<(), LogStoreError> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        let reason = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        Err(LogStoreError::Poisoned(reason.clone().unwrap_or_default()))
    }

    /// Sets the latch; the first reason is kept because it is the root cause.
    pub fn set(&self, reason: &str) {
        let mut slot = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            tracing::error!(reason, "raft log store poisoned: refusing all further operations");
            *slot = Some(reason.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }
}
