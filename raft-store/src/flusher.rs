//! Group fsync. `append` writes its records and hands its `LogFlushed` callback here; a dedicated
//! thread takes every callback queued so far, does one `fdatasync` per segment written since its
//! last round, then completes them all. Concurrent proposals therefore share one fsync, and a
//! callback is only ever completed after the bytes it covers are durable.
//!
//! On a failed fdatasync the store is poisoned and every waiter (of this round and all later
//! ones) gets the error: there is no retry (see `poison.rs`).

use std::fs::File;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use openraft::storage::LogFlushed;
use openraft::RaftTypeConfig;
use tokio::sync::oneshot;

use crate::error::LogStoreError;
use crate::poison::Poison;

/// Someone waiting for the data written before it to become durable.
pub(crate) enum Waiter<C: RaftTypeConfig> {
    /// openraft's completion callback for one `append`.
    Append(LogFlushed<C>),
    /// An internal ordering point: `save_vote` and `truncate` wait for earlier appends.
    Barrier(oneshot::Sender<io::Result<()>>),
}

/// What one flush round takes from the queue: the waiters and the segments to sync for them.
type Round<C> = (Vec<Waiter<C>>, Vec<Arc<File>>);

/// Outcome of one flush round, copied to every waiter of that round.
type RoundResult = Result<(), (io::ErrorKind, String)>;

impl<C: RaftTypeConfig> Waiter<C> {
    fn complete(self, result: &RoundResult) {
        let result = result.clone().map_err(|(kind, msg)| io::Error::new(kind, msg));
        match self {
            Waiter::Append(callback) => callback.log_io_completed(result),
            // The barrier's caller may have gone away; nothing to report to then.
            Waiter::Barrier(tx) => drop(tx.send(result)),
        }
    }
}

struct Queue<C: RaftTypeConfig> {
    waiters: Vec<Waiter<C>>,
    /// Segments written since the last round; fsynced before any waiter is completed.
    dirty: Vec<Arc<File>>,
    shutdown: bool,
}

struct FlushShared<C: RaftTypeConfig> {
    queue: Mutex<Queue<C>>,
    wake: Condvar,
}

impl<C: RaftTypeConfig> FlushShared<C> {
    fn lock(&self) -> MutexGuard<'_, Queue<C>> {
        // A panic elsewhere must not stop us from completing (or failing) the callbacks.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Handle to the flusher thread; dropping it flushes what is queued and joins the thread.
pub(crate) struct Flusher<C: RaftTypeConfig> {
    shared: Arc<FlushShared<C>>,
    thread: Option<JoinHandle<()>>,
}

impl<C: RaftTypeConfig> Flusher<C> {
    pub fn start(poison: Arc<Poison>) -> io::Result<Self> {
        let shared = Arc::new(FlushShared {
            queue: Mutex::new(Queue { waiters: Vec::new(), dirty: Vec::new(), shutdown: false }),
            wake: Condvar::new(),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("raft-log-flush".into())
            .spawn(move || run(&for_thread, &poison))?;
        Ok(Flusher { shared, thread: Some(thread) })
    }

    /// Queues `waiter` to be completed once `files` (and everything queued before) are synced.
    pub fn submit(&self, files: &[Arc<File>], waiter: Waiter<C>) {
        let mut queue = self.shared.lock();
        for file in files {
            if !queue.dirty.iter().any(|d| Arc::ptr_eq(d, file)) {
                queue.dirty.push(Arc::clone(file));
            }
        }
        queue.waiters.push(waiter);
        drop(queue);
        self.shared.wake.notify_one();
    }

    /// Waits until everything submitted before this call is durable.
    pub async fn barrier(&self) -> Result<(), LogStoreError> {
        let (tx, rx) = oneshot::channel();
        self.submit(&[], Waiter::Barrier(tx));
        match rx.await {
            Ok(result) => result.map_err(|e| LogStoreError::io("waiting for earlier log writes to sync", e)),
            Err(_) => Err(LogStoreError::Poisoned("the log flusher thread stopped".into())),
        }
    }
}

impl<C: RaftTypeConfig> Drop for Flusher<C> {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("raft log flusher thread panicked");
            }
        }
    }
}

/// The flusher loop: one round per wake-up until shut down with nothing left to do.
fn run<C: RaftTypeConfig>(shared: &FlushShared<C>, poison: &Poison) {
    while let Some((waiters, dirty)) = next_round(shared) {
        let result = sync_files(&dirty, poison);
        for waiter in waiters {
            waiter.complete(&result);
        }
    }
}

/// Blocks until there is work; takes all of it. `None` once shut down and drained.
fn next_round<C: RaftTypeConfig>(shared: &FlushShared<C>) -> Option<Round<C>> {
    let mut queue = shared.lock();
    while queue.waiters.is_empty() {
        if queue.shutdown {
            return None;
        }
        queue = shared.wake.wait(queue).unwrap_or_else(PoisonError::into_inner);
    }
    Some((std::mem::take(&mut queue.waiters), std::mem::take(&mut queue.dirty)))
}

/// One fdatasync per dirty segment. Never runs once poisoned: a sync after a failed one could
/// succeed without the lost pages ever reaching the disk.
fn sync_files(files: &[Arc<File>], poison: &Poison) -> RoundResult {
    if let Err(e) = poison.check() {
        return Err((io::ErrorKind::Other, e.to_string()));
    }
    for file in files {
        let started = std::time::Instant::now();
        let synced = sync_data(file);
        if synced.is_ok() {
            crate::observe::fsync_done(started.elapsed());
        }
        if let Err(e) = synced {
            let msg = format!("fdatasync of a raft log segment failed: {e}");
            tracing::error!(error = %e, "fatal: fdatasync of a raft log segment failed");
            poison.set(&msg);
            return Err((e.kind(), msg));
        }
    }
    Ok(())
}

#[cfg(feature = "fault-injection")]
fn sync_data(file: &File) -> io::Result<()> {
    match crate::fault::sync_failure() {
        Some(injected) => Err(injected),
        None => file.sync_data(),
    }
}

#[cfg(not(feature = "fault-injection"))]
fn sync_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::os::unix::io::FromRawFd;

    use super::*;

    openraft::declare_raft_types!(TestConfig);

    /// A pipe's write end: fdatasync on it fails with EINVAL, standing in for a failing disk.
    fn unsyncable_file() -> File {
        let mut fds = [0; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors were just created and are owned by nothing else.
        unsafe {
            drop(File::from_raw_fd(fds[0]));
            File::from_raw_fd(fds[1])
        }
    }

    #[tokio::test]
    async fn failed_fsync_poisons_and_fails_every_later_waiter() {
        let poison = Arc::new(Poison::default());
        let flusher = Flusher::<TestConfig>::start(Arc::clone(&poison)).unwrap();
        flusher.barrier().await.unwrap();

        let (tx, rx) = oneshot::channel();
        flusher.submit(&[Arc::new(unsyncable_file())], Waiter::Barrier(tx));
        assert!(rx.await.unwrap().is_err(), "a failed fdatasync must be reported");
        assert!(matches!(poison.check(), Err(LogStoreError::Poisoned(_))));
        assert!(flusher.barrier().await.is_err(), "no success after a failed fsync");
    }
}
