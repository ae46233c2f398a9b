//! Small helpers shared by handlers: string conversions and Kafka's "no value" defaults.

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub fn topic_name(s: impl Into<String>) -> TopicName {
    TopicName(str_bytes(s))
}

pub fn uuid(id: &[u8; 16]) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id)
}

pub fn uuid_bytes(id: &uuid::Uuid) -> [u8; 16] {
    *id.as_bytes()
}

/// Before the coordinator answers for a group, a new leader takes it over from the last
/// generation recorded in the log (see `Coordinator::adopt`).
pub fn adopt_group(ctx: &crate::ctx::Ctx, group_id: &str) {
    ctx.groups.observe_term(ctx.raft.metrics().borrow().current_term);
    let record = {
        let applied = ctx.sm.applied.read().expect("applied lock");
        applied.state.groups.groups.get(group_id).and_then(|g| g.generation.clone())
    };
    if let Some(record) = record {
        ctx.groups.adopt(&record);
    }
}
