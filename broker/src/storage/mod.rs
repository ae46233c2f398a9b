//! Partition storage: the materialized view of the Raft log (DESIGN §3).

pub mod copier;
pub mod free_space;
pub mod journal;
pub mod locate;
pub mod partition_log;
pub mod partitions;
pub mod reads;
pub mod segment;
