//! Pieces of the benchmark binaries that are worth keeping out of `main`: for `onelog-bench`,
//! the floor measurements, latency statistics, the transaction benchmark and the disk
//! footprint benchmark; for `txbench`, the
//! Rust port of the Java transaction benches (`suite`). Benchmarks report figures; they assert
//! nothing.

pub mod disk;
pub mod floor;
pub mod stats;
pub mod suite;
pub mod txn;
