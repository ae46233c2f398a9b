//! `__consumer_offsets` as clients see it: a virtual internal topic with one empty partition.
//!
//! onelog keeps committed offsets in its one Raft log (DESIGN §2), so it has no offsets topic.
//! Clients and tools still expect Kafka's: Metadata lists it with `is_internal`, which regex
//! subscribers and `kafka-topics --exclude-internal` use to skip it (franz-go's suite waits for
//! it to appear after a FindCoordinator); and a Metadata request naming it must not auto-create
//! a real topic of that name. Reads find an empty partition (every offset 0); Produce is refused
//! with INVALID_TOPIC_EXCEPTION, as Kafka refuses client appends to an internal topic; it can be
//! neither created (TOPIC_ALREADY_EXISTS) nor deleted (INVALID_TOPIC_EXCEPTION). A real topic of
//! that name made before this existed (Metadata auto-create used to allow it) shadows it.

/// Its name, id and partition count, which the replicated state shares (consumer groups
/// resolve subscriptions against it and take commits for it: `onelog_state::internal_topic`).
pub use onelog_state::internal_topic::{NAME, PARTITIONS, TOPIC_ID};

/// Whether `name` is the virtual internal topic.
pub fn is_internal(name: &str) -> bool {
    name == NAME
}

/// Whether `id` is the virtual internal topic's id.
pub fn is_internal_id(id: &[u8; 16]) -> bool {
    *id == TOPIC_ID
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_not_a_random_uuid() {
        // Version nibble of a v4 UUID is 4: uuid::Uuid::new_v4 can never produce TOPIC_ID.
        assert_ne!(uuid::Uuid::from_bytes(TOPIC_ID).get_version_num(), 4);
    }
}
