//! KIP-932 share groups' record state on one topic partition (Kafka's `SharePartition`), as
//! pure state: which records the group has in flight, which member holds each acquired one
//! and until when, how often each was delivered, and where the share-partition start offset
//! (SPSO) stands. Kafka 4.4.0's behaviour, as read from its `SharePartition`,
//! `InFlightState` and `RecordState`: acquisition with redelivery first and delivery-count
//! throttling (`acquire`, `acquire_new`), acknowledgement all or nothing per partition
//! (`acknowledge`), releases on leave, fencing and lock expiry and the log start moving
//! (`release`), over ranges of records split and joined as their states diverge (`model`,
//! `ranges`).
//!
//! Every change is an op of the one Raft log applied on every node, so nothing here reads a
//! clock or the log: lock deadlines and log batch boundaries come from the leader in the op,
//! and the leader arms the timers that propose `expire`. Where onelog differs from Kafka:
//! no persister (the Raft log is the durable state, so no rollback on a failed write and no
//! gap window after a reload); no dead-letter queue (no ARCHIVING); records below a moved
//! log start are forgotten at once, even acquired ones, rather than archived when their
//! holder lets go; the start offset moves after every change rather than after a persister
//! write; redelivery is bounded by the record budget only, not by the bytes a log read
//! reached; and aborted records enter the window Archived with no delivery counted.

mod acknowledge;
mod acquire;
mod acquire_new;
mod model;
mod ranges;
mod release;

pub use acknowledge::{AckBatch, AckError};
pub use acquire::{AcquireInput, Acquired, LogBatch};
pub use model::{InFlight, Limits, RecordState, SharePartition, Totals};

#[cfg(test)]
mod acknowledge_tests;
#[cfg(test)]
mod acquire_tests;
#[cfg(test)]
mod random_tests;
#[cfg(test)]
mod release_tests;
#[cfg(test)]
mod test_support;
