//! The isolation level of Fetch (v4+) and ListOffsets (v2+) requests (KIP-98), as the wire
//! carries it (`IsolationLevel` in Kafka's clients). Read committed stops at the last stable
//! offset and leaves out aborted transactions' records; read uncommitted reads to the high
//! watermark.

pub const READ_UNCOMMITTED: i8 = 0;
pub const READ_COMMITTED: i8 = 1;
