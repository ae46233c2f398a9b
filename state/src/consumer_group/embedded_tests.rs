//! The embedded consumer protocol: what a classic member's metadata and assignment say, read
//! and written as Kafka's `ConsumerProtocol` does, and hostile bytes refused without panicking
//! or allocating from a count that is not there.

use super::*;
use crate::consumer_group::testkit::{assignment_bytes, parts, subscription_bytes, topics};

#[test]
fn a_v3_subscription_gives_topics_owned_partitions_by_id_and_rack() {
    let topics = topics(&[("a", 3, 1), ("b", 2, 2)]);
    let bytes = subscription_bytes(3, &["a", "b", "gone"], &[("a", &[0, 2]), ("gone", &[1])]);
    let s = parse_subscription(&bytes, &topics).unwrap();
    assert_eq!(s.version, 3);
    assert_eq!(s.topics, vec!["a", "b", "gone"]);
    // A topic that does not exist owns nothing (Kafka's `toTopicPartitionMap`).
    assert_eq!(s.owned, parts(&[(1, &[0, 2])]));
    assert_eq!(s.rack_id.as_deref(), Some("rack-a"));
}

#[test]
fn a_version_above_three_is_read_as_three_and_a_negative_one_is_malformed() {
    let topics = topics(&[("a", 1, 1)]);
    let mut bytes = subscription_bytes(3, &["a"], &[]);
    bytes[1] = 9;
    assert_eq!(parse_subscription(&bytes, &topics).unwrap().version, 3);
    bytes[0] = 0xff;
    assert!(parse_subscription(&bytes, &topics).is_err());
    assert!(parse_subscription(&[0], &topics).is_err(), "no version");
}

#[test]
fn hostile_counts_are_refused_not_allocated() {
    let topics = topics(&[("a", 1, 1)]);
    // Version 0, then a topic count of i32::MAX with no topics behind it.
    let bytes = [0u8, 0, 0x7f, 0xff, 0xff, 0xff];
    assert!(parse_subscription(&bytes, &topics).is_err());
    assert!(parse_assignment(&bytes, &topics).is_err());
}

#[test]
fn an_assignment_round_trips_and_reports_user_data() {
    let topics = topics(&[("a", 4, 1), ("b", 2, 2)]);
    let assigned = parts(&[(1, &[1, 3]), (2, &[0])]);
    let bytes = write_assignment(&assigned, 1, &topics);
    assert_eq!(&bytes[..2], &[0, 1], "written at the subscription's version");
    assert_eq!(parse_assignment(&bytes, &topics).unwrap(), (assigned, false));
    let with_data = assignment_bytes(&[("a", &[0])], Some(b"sticky"));
    assert_eq!(parse_assignment(&with_data, &topics).unwrap(), (parts(&[(1, &[0])]), true));
    assert_eq!(parse_assignment(&[], &topics).unwrap(), (parts(&[]), false), "no assignment yet");
}
