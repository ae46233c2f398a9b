//! Pieces of the `onelog-bench` binary that are worth keeping out of `main`: the floor
//! measurements and latency statistics. Benchmarks report figures; they assert nothing.

pub mod floor;
pub mod stats;
pub mod txn;
