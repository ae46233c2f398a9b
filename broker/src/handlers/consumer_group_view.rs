//! A KIP-848 consumer group as ConsumerGroupDescribe shows it, from the applied state (Kafka's
//! `ConsumerGroup.asDescribedGroup`): topic ids named by the applied topics.

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::TopicName;
use onelog_state::consumer_group::{self as cg, ConsumerGroup};

use super::util::{str_bytes, uuid};
use crate::ctx::{Ctx, Lane};

/// `member_type` (v1, KIP-1099): 1 for a member that speaks the consumer protocol, 0 for a
/// classic member inside the group (online migration).
const MEMBER_TYPE_CONSUMER: i8 = 1;
const MEMBER_TYPE_CLASSIC: i8 = 0;

/// The described group, or None when no consumer group has that id.
pub fn describe(ctx: &Ctx, lane: Lane, group_id: &str) -> Option<DescribedGroup> {
    let settings = &ctx.config.settings.consumer_group.settings;
    lane.applied.state(|s| {
        let group = s.consumer_groups.groups.get(group_id)?;
        // The virtual `__consumer_offsets` too: a regex may have matched it, as in Kafka.
        let names: BTreeMap<[u8; 16], &str> = onelog_state::internal_topic::names(&s.topics)
            .filter_map(|n| onelog_state::internal_topic::lookup(&s.topics, n).map(|(id, _)| (id, n)))
            .collect();
        Some(described(group, settings, &names))
    })
}

fn described(
    group: &ConsumerGroup,
    settings: &cg::GroupSettings,
    names: &BTreeMap<[u8; 16], &str>,
) -> DescribedGroup {
    let members = group.describe_members().into_iter().map(|m| member(&m, names)).collect();
    DescribedGroup::default()
        .with_group_state(str_bytes(group.state().as_str()))
        .with_group_epoch(group.group_epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(str_bytes(group.preferred_assignor(settings).name()))
        .with_members(members)
}

fn member(m: &cg::MemberDescription<'_>, names: &BTreeMap<[u8; 16], &str>) -> Member {
    let member = m.member;
    let text = |s: &Option<String>| s.as_ref().map(|s| str_bytes(s.clone()));
    Member::default()
        .with_member_id(str_bytes(m.member_id.to_string()))
        .with_instance_id(text(&member.instance_id))
        .with_rack_id(text(&member.rack_id))
        .with_member_epoch(member.member_epoch)
        .with_client_id(str_bytes(member.client_id.clone()))
        .with_client_host(str_bytes(member.client_host.clone()))
        .with_subscribed_topic_names(
            member.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n.clone()))).collect(),
        )
        .with_subscribed_topic_regex(text(&member.subscribed_topic_regex))
        .with_assignment(assignment(&m.assignment, names))
        .with_target_assignment(assignment(&m.target, names))
        .with_member_type(if member.classic.is_some() { MEMBER_TYPE_CLASSIC } else { MEMBER_TYPE_CONSUMER })
}

fn assignment(assigned: &cg::Assignment, names: &BTreeMap<[u8; 16], &str>) -> Assignment {
    let topic_partitions = assigned
        .iter()
        .map(|(id, partitions)| {
            let name = names.get(id).copied().unwrap_or_default();
            TopicPartitions::default()
                .with_topic_id(uuid(id))
                .with_topic_name(TopicName(str_bytes(name.to_string())))
                .with_partitions(partitions.iter().copied().collect())
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}
