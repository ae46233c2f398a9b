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

/// The topic's name, Kafka's `Topic.GROUP_METADATA_TOPIC_NAME`.
pub const NAME: &str = "__consumer_offsets";

/// Its topic id: fixed, and not a version-4 UUID, so no random topic id can equal it.
pub const TOPIC_ID: [u8; 16] = *b"onelog:__offsets";

/// Its partitions: one suffices, no group's offsets live in it.
pub const PARTITIONS: i32 = 1;

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
