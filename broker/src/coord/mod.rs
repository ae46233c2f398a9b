//! The coordinators: leader-only state that Kafka keeps in its group and transaction
//! coordinators. Each owns its memory behind one API and resets it when the term changes;
//! what must survive a leader change goes through the log.

pub mod checks;
pub mod consumer;
pub mod group;
pub mod lane;
pub mod liveness;
pub mod share;
pub mod streams;
pub mod txn;
pub mod xgroup;
