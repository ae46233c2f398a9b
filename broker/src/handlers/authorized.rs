//! Authorized operations (KIP-430): the bit set Metadata, DescribeCluster, DescribeGroups,
//! ConsumerGroupDescribe and DescribeTopicPartitions return when the client asks for it: of
//! the operations Kafka defines for the resource type (`AclEntry.supportedOperations`), those
//! the requesting principal may do, each operation's bit being `1 << code`. Without an
//! authorizer that is every one of them. When not asked for, Kafka answers `i32::MIN`.

use crate::ctx::Ctx;
use crate::security::authz::{op, rt, Subject, CLUSTER_NAME};

/// Kafka's `authorizedOperations` when the request did not ask for it.
pub const OMITTED: i32 = i32::MIN;

const TOPIC_OPERATIONS: &[i8] = &[
    op::READ,
    op::WRITE,
    op::CREATE,
    op::DELETE,
    op::ALTER,
    op::DESCRIBE,
    op::DESCRIBE_CONFIGS,
    op::ALTER_CONFIGS,
];
const GROUP_OPERATIONS: &[i8] = &[op::READ, op::DESCRIBE, op::DELETE];
const CLUSTER_OPERATIONS: &[i8] = &[
    op::CREATE,
    op::ALTER,
    op::DESCRIBE,
    op::CLUSTER_ACTION,
    op::DESCRIBE_CONFIGS,
    op::ALTER_CONFIGS,
    op::IDEMPOTENT_WRITE,
];

/// The topic's bit set for `who`, or [`OMITTED`] when not asked.
pub fn topic(ctx: &Ctx, who: &Subject, asked: bool, name: &str) -> i32 {
    of(ctx, who, asked, rt::TOPIC, name, TOPIC_OPERATIONS)
}

pub fn group(ctx: &Ctx, who: &Subject, asked: bool, group_id: &str) -> i32 {
    of(ctx, who, asked, rt::GROUP, group_id, GROUP_OPERATIONS)
}

/// Kafka's `handleDescribeCluster` and Metadata: 0 for a principal that may not DESCRIBE
/// the cluster.
pub fn cluster(ctx: &Ctx, who: &Subject, asked: bool) -> i32 {
    if asked && !ctx.authorizer.cluster_allowed(who, op::DESCRIBE) {
        return 0;
    }
    of(ctx, who, asked, rt::CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
}

fn of(ctx: &Ctx, who: &Subject, asked: bool, resource_type: i8, name: &str, operations: &[i8]) -> i32 {
    if asked {
        ctx.authorizer.authorized_operations(who, resource_type, name, operations)
    } else {
        OMITTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(operations: &[i8]) -> i32 {
        operations.iter().fold(0, |set, o| set | (1 << o))
    }

    #[test]
    fn bit_sets_are_kafkas() {
        // The sums of Kafka's supported operations per resource type.
        assert_eq!(bits(TOPIC_OPERATIONS), 3576);
        assert_eq!(bits(GROUP_OPERATIONS), 328);
        assert_eq!(bits(CLUSTER_OPERATIONS), 8096);
    }
}
