//! `__consumer_offsets`, the virtual internal topic, as far as the replicated state knows it
//! (the broker's `internal_topic` serves it to clients). onelog keeps committed offsets in the
//! Raft log, so no partition of it holds anything; Metadata lists it with one empty partition
//! because clients expect Kafka's. Kafka resolves a consumer group's names and regexes against
//! every topic, internal ones included (franz-go's `Test848RegexBrokerResolves`), and takes
//! commits for any partition that exists, so the state treats it as a topic of one partition
//! where those two ask, unless a real topic of that name shadows it.

use std::collections::BTreeMap;

use crate::Topic;

/// The topic's name, Kafka's `Topic.GROUP_METADATA_TOPIC_NAME`.
pub const NAME: &str = "__consumer_offsets";

/// Its topic id: fixed, and not a version-4 UUID, so no random topic id can equal it.
pub const TOPIC_ID: [u8; 16] = *b"onelog:__offsets";

/// Its partitions: one suffices, no group's offsets live in it.
pub const PARTITIONS: i32 = 1;

/// A topic's id and partition count by name: a real topic, or the virtual internal one.
pub fn lookup(topics: &BTreeMap<String, Topic>, name: &str) -> Option<([u8; 16], i32)> {
    match topics.get(name) {
        Some(topic) => Some((topic.topic_id, i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX))),
        None => (name == NAME).then_some((TOPIC_ID, PARTITIONS)),
    }
}

/// Every topic name a subscription may match: the real topics' and, unless shadowed, the
/// virtual internal one's.
pub fn names(topics: &BTreeMap<String, Topic>) -> impl Iterator<Item = &str> {
    let internal = (!topics.contains_key(NAME)).then_some(NAME);
    topics.keys().map(String::as_str).chain(internal)
}

/// A topic id's name among `topics`, or the virtual internal topic's.
pub fn name_of<'a>(topics: &'a BTreeMap<String, Topic>, id: &[u8; 16]) -> Option<&'a str> {
    let real = topics.iter().find(|(_, t)| t.topic_id == *id).map(|(n, _)| n.as_str());
    real.or_else(|| (*id == TOPIC_ID && !topics.contains_key(NAME)).then_some(NAME))
}
