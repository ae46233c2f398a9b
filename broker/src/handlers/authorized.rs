//! Authorized operations (KIP-430): the bit set Metadata, DescribeCluster, DescribeGroups and
//! ConsumerGroupDescribe return when the client asks for it. onelog has no authorizer yet, so
//! every principal may do everything: the answer is every operation Kafka defines for the
//! resource type (`AclEntry.supportedOperations`), each operation's bit being `1 << code`.
//! When not asked for, Kafka answers `i32::MIN` ("omitted").

/// Kafka's `authorizedOperations` when the request did not ask for it.
pub const OMITTED: i32 = i32::MIN;

/// `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut set = 0;
    let mut i = 0;
    while i < operations.len() {
        set |= 1 << operations[i];
        i += 1;
    }
    set
}

pub const TOPIC: i32 = bits(&[READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
pub const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE]);
pub const CLUSTER: i32 =
    bits(&[CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE]);

/// `all` when the client asked for authorized operations, else [`OMITTED`].
pub fn when_asked(asked: bool, all: i32) -> i32 {
    if asked {
        all
    } else {
        OMITTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_sets_are_kafkas() {
        // The sums of Kafka's supported operations per resource type.
        assert_eq!(TOPIC, 3576);
        assert_eq!(GROUP, 328);
        assert_eq!(CLUSTER, 8096);
    }
}
