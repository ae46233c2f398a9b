//! The decision, as Kafka's `StandardAuthorizerData.authorize`: pure over the ACL table, the
//! settings and who asks, so the whole table of cases is unit-tested here.
//!
//! Order: a super user is allowed; otherwise every binding that applies to the resource
//! (literal name, literal `*`, prefixes) is looked at; one DENY that matches the principal
//! (or `User:*`), the host (or `*`) and the operation (or ALL) denies at once; else one ALLOW
//! whose operation is the one asked, ALL, or one that implies it (DESCRIBE by READ, WRITE,
//! DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS) allows; else, when no binding at all
//! applies to the resource, `allow.everyone.if.no.acl.found` decides; else denied.

use std::net::IpAddr;

use kafka_compat::principal::KafkaPrincipal;
use onelog_state::acls::{operation as op, permission, AclEntry, Acls, WILDCARD_HOST};

use crate::config::authz::AuthzSettings;

/// The principal that matches every user (Kafka's `WILDCARD_PRINCIPAL`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Who asks: a principal from a client address.
#[derive(Debug, Clone)]
pub struct Subject {
    pub principal: std::sync::Arc<KafkaPrincipal>,
    pub host: Option<IpAddr>,
}

/// Whether `subject` may do `operation` on the resource `(resource_type, name)`.
pub fn decide(
    settings: &AuthzSettings,
    acls: &Acls,
    subject: &Subject,
    resource_type: i8,
    name: &str,
    operation: i8,
) -> bool {
    if settings.is_super_user(&subject.principal) {
        return true;
    }
    let principal = subject.principal.to_string();
    let (mut any_binding, mut allowed, mut denied) = (false, false, false);
    acls.for_each_applying(resource_type, name, |entry| {
        any_binding = true;
        if !applies_to(entry, &principal, subject.host) {
            return true;
        }
        if entry.permission == permission::DENY {
            if entry.operation == op::ALL || entry.operation == operation {
                denied = true;
                return false;
            }
        } else if grants(entry.operation, operation) {
            allowed = true;
        }
        true
    });
    if denied {
        return false;
    }
    allowed || (!any_binding && settings.allow_everyone_if_no_acl_found)
}

/// Whether an entry names this principal (or every user) and this host (or every host).
fn applies_to(entry: &AclEntry, principal: &str, host: Option<IpAddr>) -> bool {
    let principal_matches = entry.principal == principal || entry.principal == WILDCARD_PRINCIPAL;
    let host_matches = entry.host == WILDCARD_HOST
        || host.is_some_and(|h| entry.host.parse::<IpAddr>().is_ok_and(|acl_host| acl_host == h));
    principal_matches && host_matches
}

/// Whether an ALLOW of `granted` allows `asked` (Kafka's implied operations).
pub fn grants(granted: i8, asked: i8) -> bool {
    granted == op::ALL
        || granted == asked
        || (asked == op::DESCRIBE && matches!(granted, op::READ | op::WRITE | op::DELETE | op::ALTER))
        || (asked == op::DESCRIBE_CONFIGS && granted == op::ALTER_CONFIGS)
}

/// Kafka's `Authorizer.authorizeByResourceType`: whether the subject may do `operation` on at
/// least one resource of the type — an ALLOW on some literal name or prefix that no DENY of the
/// subject covers (a literal `*` DENY covers all). Used for the idempotent producer's
/// "WRITE on any topic".
pub fn decide_any_of_type(
    settings: &AuthzSettings,
    acls: &Acls,
    subject: &Subject,
    resource_type: i8,
    operation: i8,
) -> bool {
    // Kafka asks first about a resource no ACL is likely to name: super users, `*` ALLOWs and
    // allow.everyone.if.no.acl.found answer there.
    if decide(settings, acls, subject, resource_type, "hardcode", operation) {
        return true;
    }
    use onelog_state::acls::pattern_type::{LITERAL, PREFIXED};
    let principal = subject.principal.to_string();
    let mut deny_literal = Vec::new();
    let mut deny_prefix = Vec::new();
    let mut allows = Vec::new();
    for (pattern, entry) in acls.entries_of_type(resource_type) {
        if !applies_to(entry, &principal, subject.host) {
            continue;
        }
        if entry.permission == permission::DENY
            && (entry.operation == op::ALL || entry.operation == operation)
        {
            match pattern.pattern_type {
                LITERAL if pattern.name == onelog_state::acls::WILDCARD_RESOURCE => return false,
                LITERAL => deny_literal.push(pattern.name.as_str()),
                _ => deny_prefix.push(pattern.name.as_str()),
            }
        } else if entry.permission == permission::ALLOW && grants(entry.operation, operation) {
            allows.push(pattern);
        }
    }
    allows.iter().any(|p| {
        let covered = deny_prefix.iter().any(|d| p.name.starts_with(d));
        match p.pattern_type {
            PREFIXED => !covered,
            _ => !covered && !deny_literal.contains(&p.name.as_str()),
        }
    })
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;
