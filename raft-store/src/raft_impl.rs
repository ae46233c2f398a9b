//! openraft's `RaftLogStorage` and `RaftLogReader` for `LogStore`: thin glue that converts
//! `LogStoreError` into `StorageError` and hands append callbacks to the flusher.

use std::fmt::Debug;
use std::ops::RangeBounds;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, RaftTypeConfig, StorageError, Vote,
};

use crate::flusher::Waiter;
use crate::limits::READ_BATCH_BYTES_MAX;
use crate::reader::{bounds, read_error, LogReader};
use crate::store::LogStore;

impl<C> RaftLogReader<C> for LogStore<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<C>>, StorageError<C::NodeId>> {
        let (start, end) = bounds(&range);
        self.reader().read_range(start, end, u64::MAX).map_err(read_error::<C>)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry<C>>, StorageError<C::NodeId>> {
        self.reader().read_range(start, end, READ_BATCH_BYTES_MAX).map_err(read_error::<C>)
    }
}

impl<C> RaftLogStorage<C> for LogStore<C>
where
    C: RaftTypeConfig<Entry = Entry<C>>,
{
    type LogReader = LogReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        self.shared.poison.check().map_err(read_error::<C>)?;
        // With no live entry, openraft expects the purge point as the last log id.
        let last_log_id = self.last_log_id.clone().or_else(|| self.last_purged.clone());
        Ok(LogState { last_purged_log_id: self.last_purged.clone(), last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.persist_vote(vote).await.map_err(|e| e.into_storage_error(ErrorSubject::Vote, ErrorVerb::Write))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        self.shared.poison.check().map_err(|e| e.into_storage_error(ErrorSubject::Vote, ErrorVerb::Read))?;
        Ok(self.vote.clone())
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        self.store_committed(committed)
            .map_err(|e| e.into_storage_error(ErrorSubject::Store, ErrorVerb::Write))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        self.shared.poison.check().map_err(read_error::<C>)?;
        Ok(self.committed.clone())
    }

    /// Writes and indexes the entries now; `callback` runs on the flusher thread once they are
    /// durable (shared fdatasync with concurrent appends), or with the error if that failed.
    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = Entry<C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        match self.append_entries(entries) {
            Ok(files) => {
                self.flusher.submit(&files, Waiter::Append(callback));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(e.to_io_error()));
                Err(e.into_storage_error(ErrorSubject::Logs, ErrorVerb::Write))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let result = self.truncate_since(&log_id).await;
        result.map_err(|e| e.into_storage_error(ErrorSubject::Log(log_id), ErrorVerb::Delete))
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let result = self.purge_upto(&log_id);
        result.map_err(|e| e.into_storage_error(ErrorSubject::Log(log_id), ErrorVerb::Delete))
    }
}
