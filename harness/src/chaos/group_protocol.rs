//! Which group protocol the copier's consumers speak (`chaos --group-protocol`): the classic
//! one with eager assignment, or KIP-848's (`group.protocol=consumer`, librdkafka 2.12+), where
//! the broker assigns and a rebalance moves partitions incrementally.

use std::str::FromStr;

use rdkafka::ClientConfig;

/// Kafka's minimum session timeout (a dropped member leaves at once: close sends LeaveGroup).
const SESSION_TIMEOUT_MS: &str = "6000";
/// Bounds a rebalance's join phase (Kafka's rebalance timeout is the member's
/// `max.poll.interval.ms`): a member cut off by a fault does not hold the group for 5 minutes.
const MAX_POLL_INTERVAL_MS: &str = "30000";
/// Eager assignment: every rebalance revokes every partition and restarts each from the
/// committed offset, which is what lets the copier drop a batch begun before a rebalance
/// without rewinding.
const ASSIGNMENT_STRATEGY: &str = "range,roundrobin";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    #[default]
    Classic,
    /// KIP-848: partitions a member keeps across a rebalance keep their position, so a batch
    /// dropped because of a rebalance must be rewound (`copier::Instance::poll_batch`). The
    /// session timeout and heartbeat interval are the broker's; librdkafka refuses to set them.
    Consumer,
}

impl GroupProtocol {
    pub fn name(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }

    /// The group settings of a copier consumer speaking this protocol.
    pub fn configure(self, config: &mut ClientConfig) {
        config.set("max.poll.interval.ms", MAX_POLL_INTERVAL_MS);
        match self {
            GroupProtocol::Classic => {
                config
                    .set("session.timeout.ms", SESSION_TIMEOUT_MS)
                    .set("heartbeat.interval.ms", "1000")
                    .set("partition.assignment.strategy", ASSIGNMENT_STRATEGY);
            }
            GroupProtocol::Consumer => {
                config.set("group.protocol", "consumer");
            }
        }
    }
}

impl FromStr for GroupProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "classic" => Ok(GroupProtocol::Classic),
            "consumer" => Ok(GroupProtocol::Consumer),
            _ => Err(format!("unknown group protocol {s:?}; classic or consumer")),
        }
    }
}
