//! Partition storage: the materialized view of the Raft log (DESIGN §3).

pub mod free_space;
pub mod partition_log;
pub mod partitions;
pub mod segment;
