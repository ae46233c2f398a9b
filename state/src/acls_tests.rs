//! The ACL table: Kafka's validation, filter matching, deletion inside apply and the lookup
//! the authorizer uses.

use super::*;

fn binding(rt: i8, pt: i8, name: &str, principal: &str, op: i8, perm: i8) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern { resource_type: rt, pattern_type: pt, name: name.into() },
        entry: AclEntry { principal: principal.into(), host: "*".into(), operation: op, permission: perm },
    }
}

fn topic_read(name: &str, pt: i8) -> AclBinding {
    binding(resource_type::TOPIC, pt, name, "User:alice", operation::READ, permission::ALLOW)
}

fn any_filter() -> AclFilter {
    AclFilter {
        resource_type: resource_type::ANY,
        pattern_type: pattern_type::ANY,
        name: None,
        principal: None,
        host: None,
        operation: operation::ANY,
        permission: permission::ANY,
    }
}

#[test]
fn validation_uses_kafkas_messages() {
    let message = |b: AclBinding| validate_binding(&b).unwrap_err().message;
    let mut b = topic_read("t", pattern_type::LITERAL);
    assert!(validate_binding(&b).is_ok());
    b.pattern.resource_type = resource_type::ANY;
    assert_eq!(message(b.clone()), "Invalid resourceType ANY");
    let mut b = topic_read("t", pattern_type::MATCH);
    assert_eq!(message(b.clone()), "Invalid patternType MATCH");
    b.pattern.pattern_type = pattern_type::LITERAL;
    b.entry.operation = operation::ANY;
    assert_eq!(message(b.clone()), "Invalid operation ANY");
    b.entry.operation = operation::READ;
    b.entry.permission = permission::ANY;
    assert_eq!(message(b.clone()), "Invalid permissionType ANY");
    assert_eq!(message(topic_read("", pattern_type::LITERAL)), "Resource name should not be empty");
    let mut b = topic_read("t", pattern_type::LITERAL);
    b.entry.principal = "alice".into();
    assert!(message(b.clone()).contains("no colon is present"));
    b.entry.principal = "User:alice".into();
    b.entry.host = "not-an-ip".into();
    assert!(message(b.clone()).starts_with("Invalid host"));
    b.entry.host = "10.0.0.1".into();
    assert!(validate_binding(&b).is_ok());
    let cluster = binding(
        resource_type::CLUSTER,
        pattern_type::LITERAL,
        "c",
        "User:a",
        operation::ALTER,
        permission::ALLOW,
    );
    assert!(message(cluster).contains("kafka-cluster"));
    let token = binding(
        resource_type::DELEGATION_TOKEN,
        pattern_type::LITERAL,
        "t",
        "User:a",
        operation::DESCRIBE,
        permission::ALLOW,
    );
    assert!(validate_binding(&token).is_err());
    let long = topic_read(&"x".repeat(limits::ACL_RESOURCE_NAME_BYTES_MAX + 1), pattern_type::LITERAL);
    assert!(validate_binding(&long).is_err());
}

#[test]
fn create_is_idempotent_and_counted() {
    let mut acls = Acls::default();
    let b = topic_read("t", pattern_type::LITERAL);
    assert_eq!(acls.create(&[b.clone(), b.clone()]), vec![(0, None), (0, None)]);
    assert_eq!(acls.len(), 1);
    let bad = topic_read("", pattern_type::LITERAL);
    let results = acls.create(&[bad]);
    assert_eq!(results[0].0, error_code::INVALID_REQUEST);
    assert_eq!(acls.len(), 1);
}

#[test]
fn delete_filters_match_as_kafka_and_report_what_they_deleted() {
    let mut acls = Acls::default();
    let literal = topic_read("orders", pattern_type::LITERAL);
    let prefixed = topic_read("ord", pattern_type::PREFIXED);
    let wildcard = topic_read("*", pattern_type::LITERAL);
    let other = topic_read("payments", pattern_type::LITERAL);
    let group = binding(
        resource_type::GROUP,
        pattern_type::LITERAL,
        "orders",
        "User:bob",
        operation::READ,
        permission::ALLOW,
    );
    acls.create(&[literal.clone(), prefixed.clone(), wildcard.clone(), other.clone(), group.clone()]);

    // MATCH with a name: every pattern that applies to the topic `orders`.
    let mut matching = any_filter();
    matching.resource_type = resource_type::TOPIC;
    matching.pattern_type = pattern_type::MATCH;
    matching.name = Some("orders".into());
    let mut found = acls.matching(&matching);
    found.sort();
    let mut expected = vec![literal.clone(), prefixed.clone(), wildcard.clone()];
    expected.sort();
    assert_eq!(found, expected);

    // ANY with a name: that exact name only, of any pattern type.
    let mut exact = any_filter();
    exact.name = Some("orders".into());
    let mut found = acls.matching(&exact);
    found.sort();
    let mut expected = vec![literal.clone(), group.clone()];
    expected.sort();
    assert_eq!(found, expected);

    // A principal filter; then deletion removes and lists exactly the matched bindings.
    let mut bob = any_filter();
    bob.principal = Some("User:bob".into());
    let deleted = acls.delete(&[bob.clone(), bob]);
    assert_eq!(deleted[0].as_ref().unwrap(), &vec![group.clone()]);
    assert!(deleted[1].as_ref().unwrap().is_empty(), "a second identical filter finds nothing");
    assert!(!acls.contains(&group));
    assert_eq!(acls.len(), 4);

    let mut unknown = any_filter();
    unknown.operation = operation::UNKNOWN;
    assert_eq!(acls.delete(&[unknown])[0].as_ref().unwrap_err().message, "Unknown entryFilter.");
    assert_eq!(acls.delete(&[any_filter()])[0].as_ref().unwrap().len(), 4);
    assert!(acls.is_empty());
}

#[test]
fn applying_lookup_finds_literal_wildcard_and_prefixes_only() {
    let mut acls = Acls::default();
    let literal = topic_read("orders", pattern_type::LITERAL);
    let prefixed = topic_read("ord", pattern_type::PREFIXED);
    let wildcard = topic_read("*", pattern_type::LITERAL);
    let longer = topic_read("orders-eu", pattern_type::PREFIXED);
    let star_prefix = topic_read("*", pattern_type::PREFIXED);
    acls.create(&[literal, prefixed, wildcard, longer, star_prefix]);
    let mut seen = 0;
    acls.for_each_applying(resource_type::TOPIC, "orders", |_| {
        seen += 1;
        true
    });
    assert_eq!(seen, 3, "orders, ord* and the literal *; not orders-eu* nor the prefix `*`");
    let mut seen = 0;
    acls.for_each_applying(resource_type::GROUP, "orders", |_| {
        seen += 1;
        true
    });
    assert_eq!(seen, 0);
    // Multi-byte names split only on character boundaries.
    acls.for_each_applying(resource_type::TOPIC, "ördér", |_| true);
}
