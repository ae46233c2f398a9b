//! The stateless rules V1-V10, each with Kafka's code and message.

use kafka_compat::error_code;

use super::validate;
use crate::consumer_group::request::{GroupSettings, Heartbeat, TopicPartitions};
use crate::consumer_group::testkit::{beat, join, parts};

fn refusal(hb: &Heartbeat) -> (i16, String) {
    let refused = validate(hb, &GroupSettings::default()).expect_err("refused");
    (refused.code, refused.message.unwrap_or_default())
}

fn invalid(message: &str) -> (i16, String) {
    (error_code::INVALID_REQUEST, message.to_string())
}

#[test]
fn valid_requests_pass() {
    let settings = GroupSettings::default();
    assert_eq!(validate(&join("g", "m", &["t"]), &settings), Ok(()));
    assert_eq!(validate(&join("g", "m", &[]), &settings), Ok(()), "an empty subscription may join");
    assert_eq!(validate(&beat("g", "m", 5, &parts(&[])), &settings), Ok(()));
    // v0: a join may come without a member id (the leader makes one), and so may a -2.
    let v0_join = Heartbeat { version: 0, member_id: String::new(), ..join("g", "", &["t"]) };
    assert_eq!(validate(&v0_join, &settings), Ok(()));
    let v0_leave = Heartbeat { version: 0, instance_id: Some("i".into()), ..beat("g", "", -2, &parts(&[])) };
    assert_eq!(validate(&v0_leave, &settings), Ok(()));
}

#[test]
fn each_rule_answers_kafkas_code_and_message() {
    let cases: Vec<(Heartbeat, (i16, String))> = vec![
        (join("g", " ", &["t"]), invalid("MemberId can't be empty.")),
        (Heartbeat { version: 0, ..beat("g", "", -1, &parts(&[])) }, invalid("MemberId can't be empty.")),
        (Heartbeat { version: 0, ..beat("g", "", 3, &parts(&[])) }, invalid("MemberId can't be empty.")),
        (join("\t", "m", &["t"]), invalid("GroupId can't be empty.")),
        (
            Heartbeat { instance_id: Some("".into()), ..join("g", "m", &["t"]) },
            invalid("InstanceId can't be empty."),
        ),
        (
            Heartbeat { rack_id: Some(" ".into()), ..join("g", "m", &["t"]) },
            invalid("RackId can't be empty."),
        ),
        (
            Heartbeat { rebalance_timeout_ms: -1, ..join("g", "m", &["t"]) },
            invalid("RebalanceTimeoutMs must be provided in first request."),
        ),
        (
            Heartbeat { topic_partitions: None, ..join("g", "m", &["t"]) },
            invalid("TopicPartitions must be empty when (re-)joining."),
        ),
        (
            Heartbeat {
                topic_partitions: Some(vec![TopicPartitions { topic_id: [1; 16], partitions: vec![0] }]),
                ..join("g", "m", &["t"])
            },
            invalid("TopicPartitions must be empty when (re-)joining."),
        ),
        (
            Heartbeat { subscribed_topic_names: None, ..join("g", "m", &[]) },
            invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            ),
        ),
        (beat("g", "m", -2, &parts(&[])), invalid("InstanceId can't be null.")),
        (beat("g", "m", -3, &parts(&[])), invalid("MemberEpoch is invalid.")),
        (
            Heartbeat { server_assignor: Some("".into()), ..beat("g", "m", 1, &parts(&[])) },
            (
                error_code::UNSUPPORTED_ASSIGNOR,
                "ServerAssignor  is not supported. Supported assignors: uniform, range.".into(),
            ),
        ),
        (
            Heartbeat { server_assignor: Some("Range".into()), ..beat("g", "m", 1, &parts(&[])) },
            (
                error_code::UNSUPPORTED_ASSIGNOR,
                "ServerAssignor Range is not supported. Supported assignors: uniform, range.".into(),
            ),
        ),
    ];
    for (hb, expected) in cases {
        assert_eq!(refusal(&hb), expected, "{hb:?}");
    }
}
