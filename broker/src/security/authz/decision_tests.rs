//! The decision table of `decide`: super users, DENY over ALLOW, literal / prefixed / wildcard
//! resources, `User:*`, hosts, implied operations and `allow.everyone.if.no.acl.found`.

use std::sync::Arc;

use onelog_state::acls::{pattern_type as pt, resource_type as rt, AclBinding, ResourcePattern};

use super::*;

const ALICE: &str = "alice";

fn settings(allow_if_none: bool) -> AuthzSettings {
    AuthzSettings {
        enabled: true,
        super_users: vec![KafkaPrincipal::user("admin")],
        allow_everyone_if_no_acl_found: allow_if_none,
    }
}

fn who(name: &str, host: &str) -> Subject {
    Subject { principal: Arc::new(KafkaPrincipal::user(name)), host: host.parse().ok() }
}

fn acl(pattern: i8, name: &str, principal: &str, host: &str, operation: i8, perm: i8) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern { resource_type: rt::TOPIC, pattern_type: pattern, name: name.into() },
        entry: AclEntry { principal: principal.into(), host: host.into(), operation, permission: perm },
    }
}

fn table(bindings: &[AclBinding]) -> Acls {
    let mut acls = Acls::default();
    for r in acls.create(bindings) {
        assert_eq!(r.0, 0, "{r:?}");
    }
    acls
}

fn may(acls: &Acls, s: &AuthzSettings, name: &str, topic: &str, operation: i8) -> bool {
    decide(s, acls, &who(name, "10.0.0.1"), rt::TOPIC, topic, operation)
}

#[test]
fn super_users_and_the_no_acl_default() {
    let empty = Acls::default();
    assert!(may(&empty, &settings(false), "admin", "t", op::WRITE));
    assert!(!may(&empty, &settings(false), ALICE, "t", op::WRITE));
    assert!(may(&empty, &settings(true), ALICE, "t", op::WRITE));
    // Any binding on the resource, even for someone else, turns the default off.
    let other = table(&[acl(pt::LITERAL, "t", "User:bob", "*", op::READ, permission::ALLOW)]);
    assert!(!may(&other, &settings(true), ALICE, "t", op::WRITE));
    assert!(may(&other, &settings(true), ALICE, "u", op::WRITE));
    // A super user passes even an explicit DENY.
    let deny = table(&[acl(pt::LITERAL, "t", "User:admin", "*", op::ALL, permission::DENY)]);
    assert!(may(&deny, &settings(false), "admin", "t", op::WRITE));
}

#[test]
fn literal_prefixed_and_wildcard_resources() {
    let s = settings(false);
    let acls = table(&[
        acl(pt::LITERAL, "orders", "User:alice", "*", op::WRITE, permission::ALLOW),
        acl(pt::PREFIXED, "logs-", "User:alice", "*", op::READ, permission::ALLOW),
        acl(pt::LITERAL, "*", "User:alice", "*", op::DESCRIBE, permission::ALLOW),
    ]);
    assert!(may(&acls, &s, ALICE, "orders", op::WRITE));
    assert!(!may(&acls, &s, ALICE, "orders2", op::WRITE));
    assert!(may(&acls, &s, ALICE, "logs-eu", op::READ));
    assert!(!may(&acls, &s, ALICE, "log", op::READ));
    assert!(may(&acls, &s, ALICE, "anything", op::DESCRIBE));
    assert!(!may(&acls, &s, ALICE, "anything", op::READ));
}

#[test]
fn deny_wins_and_principals_and_hosts_match_as_kafka() {
    let s = settings(false);
    let acls = table(&[
        acl(pt::LITERAL, "t", "User:*", "*", op::ALL, permission::ALLOW),
        acl(pt::PREFIXED, "t", "User:bob", "*", op::WRITE, permission::DENY),
        acl(pt::LITERAL, "t", "User:carol", "10.0.0.9", op::ALL, permission::DENY),
    ]);
    assert!(may(&acls, &s, ALICE, "t", op::WRITE), "User:* allows everyone");
    assert!(!may(&acls, &s, "bob", "t", op::WRITE), "a prefixed DENY beats a literal ALLOW");
    assert!(may(&acls, &s, "bob", "t", op::READ), "a DENY of WRITE does not deny READ");
    assert!(may(&acls, &s, "carol", "t", op::READ), "carol's DENY is for another host");
    assert!(!decide(&s, &acls, &who("carol", "10.0.0.9"), rt::TOPIC, "t", op::READ));
    // DENY of DESCRIBE is not implied by a DENY of READ, nor the reverse.
    let acls = table(&[
        acl(pt::LITERAL, "t", "User:alice", "*", op::READ, permission::ALLOW),
        acl(pt::LITERAL, "t", "User:alice", "*", op::DESCRIBE, permission::DENY),
    ]);
    assert!(may(&acls, &s, ALICE, "t", op::READ));
    assert!(!may(&acls, &s, ALICE, "t", op::DESCRIBE));
    // An ACL for a host never matches a request whose address is unknown.
    let acls = table(&[acl(pt::LITERAL, "t", "User:alice", "10.0.0.1", op::READ, permission::ALLOW)]);
    assert!(!decide(&s, &acls, &who(ALICE, "unknown"), rt::TOPIC, "t", op::READ));
    assert!(may(&acls, &s, ALICE, "t", op::READ));
}

#[test]
fn implied_operations() {
    let s = settings(false);
    for granted in [op::READ, op::WRITE, op::DELETE, op::ALTER] {
        let acls = table(&[acl(pt::LITERAL, "t", "User:alice", "*", granted, permission::ALLOW)]);
        assert!(may(&acls, &s, ALICE, "t", op::DESCRIBE), "{granted} implies DESCRIBE");
        assert!(!may(&acls, &s, ALICE, "t", op::DESCRIBE_CONFIGS));
    }
    let acls = table(&[acl(pt::LITERAL, "t", "User:alice", "*", op::ALTER_CONFIGS, permission::ALLOW)]);
    assert!(may(&acls, &s, ALICE, "t", op::DESCRIBE_CONFIGS));
    assert!(!may(&acls, &s, ALICE, "t", op::DESCRIBE));
    let acls = table(&[acl(pt::LITERAL, "t", "User:alice", "*", op::ALL, permission::ALLOW)]);
    for asked in op::READ..=op::IDEMPOTENT_WRITE {
        assert!(may(&acls, &s, ALICE, "t", asked));
    }
    let acls = table(&[acl(pt::LITERAL, "t", "User:alice", "*", op::DESCRIBE, permission::ALLOW)]);
    assert!(!may(&acls, &s, ALICE, "t", op::READ), "DESCRIBE implies nothing");
}

#[test]
fn write_on_any_topic() {
    let s = settings(false);
    let alice = who(ALICE, "10.0.0.1");
    let any = |acls: &Acls| decide_any_of_type(&s, acls, &alice, rt::TOPIC, op::WRITE);
    assert!(!any(&Acls::default()));
    assert!(any(&table(&[acl(pt::LITERAL, "t", "User:alice", "*", op::WRITE, permission::ALLOW)])));
    assert!(any(&table(&[acl(pt::PREFIXED, "p", "User:alice", "*", op::ALL, permission::ALLOW)])));
    assert!(!any(&table(&[
        acl(pt::LITERAL, "t", "User:alice", "*", op::WRITE, permission::ALLOW),
        acl(pt::LITERAL, "t", "User:alice", "*", op::WRITE, permission::DENY),
    ])));
    assert!(!any(&table(&[
        acl(pt::PREFIXED, "pay", "User:alice", "*", op::WRITE, permission::ALLOW),
        acl(pt::PREFIXED, "p", "User:alice", "*", op::WRITE, permission::DENY),
    ])));
    assert!(!any(&table(&[
        acl(pt::LITERAL, "t", "User:alice", "*", op::WRITE, permission::ALLOW),
        acl(pt::LITERAL, "*", "User:alice", "*", op::ALL, permission::DENY),
    ])));
    assert!(!any(&table(&[acl(pt::LITERAL, "t", "User:bob", "*", op::WRITE, permission::ALLOW)])));
}
