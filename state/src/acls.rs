//! The ACL table (Kafka's `AclBinding`s): which principal may do which operation on which
//! resource, from which host. Replicated state, so every node authorizes alike and an ACL
//! survives a failover; CreateAcls and DeleteAcls are log ops, and a DeleteAcls filter is
//! evaluated here, inside apply, so every replica deletes the same bindings and the response
//! lists exactly what was deleted.
//!
//! Validation follows Kafka's `AclControlManager.validateNewAcl` and the broker-side checks of
//! `AclApis.handleCreateAcls` (CLUSTER named `kafka-cluster`, no empty name), with their
//! messages. The bindings are kept by resource type, then pattern type, then name, which is the
//! index the authorizer looks up: a check is a few ordered-map lookups, not a scan of every
//! binding (see `broker::security::authz`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use crate::command::{ItemResult, Refusal};
use crate::limits;

/// `ResourceType` codes.
pub mod resource_type {
    pub const UNKNOWN: i8 = 0;
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;
}

/// `PatternType` codes.
pub mod pattern_type {
    pub const UNKNOWN: i8 = 0;
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// `AclOperation` codes.
pub mod operation {
    pub const UNKNOWN: i8 = 0;
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    pub const CREATE_TOKENS: i8 = 13;
    pub const DESCRIBE_TOKENS: i8 = 14;
    pub const TWO_PHASE_COMMIT: i8 = 15;
    /// The largest code Kafka defines.
    pub const MAX: i8 = TWO_PHASE_COMMIT;
}

/// `AclPermissionType` codes.
pub mod permission {
    pub const UNKNOWN: i8 = 0;
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// Kafka's one name for the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal resource name that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The host that matches every client address.
pub const WILDCARD_HOST: &str = "*";

/// A resource pattern: type, pattern type (LITERAL or PREFIXED) and name. Ordered by type
/// first, which makes the table an index per resource type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    pub resource_type: i8,
    pub pattern_type: i8,
    pub name: String,
}

/// Who, from where, may or may not do what (Kafka's `AccessControlEntry`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclEntry {
    /// `type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// `*` or one IP address.
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// One ACL: a pattern and an entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AclEntry,
}

/// A DeleteAcls or DescribeAcls filter (Kafka's `AclBindingFilter`): ANY matches every
/// value of its field, `None` every name, principal or host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: i8,
    pub pattern_type: i8,
    pub name: Option<String>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

/// What one DeleteAcls filter deleted, or why it was refused.
pub type FilterDeleted = Result<Vec<AclBinding>, Refusal>;

/// The ACL table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acls {
    bindings: BTreeMap<ResourcePattern, BTreeSet<AclEntry>>,
    /// Bindings held, over every pattern (bounded by `limits::ACL_BINDINGS_MAX`).
    count: usize,
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal { error_code: error_code::INVALID_REQUEST, message: message.into() }
}

/// Kafka's checks of a binding to create, with its messages; also onelog's bounds.
pub fn validate_binding(binding: &AclBinding) -> Result<(), Refusal> {
    use resource_type as rt;
    let (pattern, entry) = (&binding.pattern, &binding.entry);
    if !(rt::TOPIC..=rt::USER).contains(&pattern.resource_type) {
        return Err(invalid(format!("Invalid resourceType {}", resource_type_name(pattern.resource_type))));
    }
    if pattern.resource_type == rt::DELEGATION_TOKEN {
        // onelog has no delegation tokens (CreateDelegationToken is refused), so an ACL on one
        // could never apply.
        return Err(invalid("DELEGATION_TOKEN ACLs are not supported: onelog has no delegation tokens"));
    }
    if !matches!(pattern.pattern_type, pattern_type::LITERAL | pattern_type::PREFIXED) {
        return Err(invalid(format!("Invalid patternType {}", pattern_type_name(pattern.pattern_type))));
    }
    if !(operation::ALL..=operation::MAX).contains(&entry.operation) {
        return Err(invalid(format!("Invalid operation {}", operation_name(entry.operation))));
    }
    if !matches!(entry.permission, permission::DENY | permission::ALLOW) {
        return Err(invalid(format!("Invalid permissionType {}", permission_name(entry.permission))));
    }
    if pattern.name.is_empty() {
        return Err(invalid("Resource name should not be empty"));
    }
    if pattern.resource_type == rt::CLUSTER && pattern.name != CLUSTER_NAME {
        return Err(invalid(format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")));
    }
    if pattern.name.len() > limits::ACL_RESOURCE_NAME_BYTES_MAX {
        return Err(invalid(format!(
            "Resource name is longer than {} bytes",
            limits::ACL_RESOURCE_NAME_BYTES_MAX
        )));
    }
    let Some((principal_type, principal_name)) = entry.principal.split_once(':') else {
        return Err(invalid(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal type from the principal name)",
            entry.principal
        )));
    };
    if principal_type.is_empty() || principal_name.is_empty() {
        return Err(invalid(format!("Could not parse principal from `{}`", entry.principal)));
    }
    if entry.principal.len() > limits::ACL_PRINCIPAL_BYTES_MAX {
        return Err(invalid(format!("Principal is longer than {} bytes", limits::ACL_PRINCIPAL_BYTES_MAX)));
    }
    if entry.host != WILDCARD_HOST && entry.host.parse::<IpAddr>().is_err() {
        return Err(invalid(format!("Invalid host `{}`: it must be * or an IP address", entry.host)));
    }
    Ok(())
}

/// Kafka's check of a filter (`AclControlManager.validateFilter`): no UNKNOWN anywhere.
pub fn validate_filter(filter: &AclFilter) -> Result<(), Refusal> {
    let known_pattern = (resource_type::ANY..=resource_type::USER).contains(&filter.resource_type)
        && (pattern_type::ANY..=pattern_type::PREFIXED).contains(&filter.pattern_type);
    if !known_pattern {
        return Err(invalid("Unknown patternFilter."));
    }
    let known_entry = (operation::ANY..=operation::MAX).contains(&filter.operation)
        && (permission::ANY..=permission::ALLOW).contains(&filter.permission);
    if !known_entry {
        return Err(invalid("Unknown entryFilter."));
    }
    Ok(())
}

impl AclFilter {
    /// Kafka's `ResourcePatternFilter.matches`: MATCH also takes the literal and prefixed
    /// patterns that would apply to the named resource.
    pub fn matches_pattern(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != resource_type::ANY && self.resource_type != pattern.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, pattern_type::ANY | pattern_type::MATCH)
            && self.pattern_type != pattern.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else { return true };
        if self.pattern_type == pattern_type::ANY || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        match pattern.pattern_type {
            pattern_type::LITERAL => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            pattern_type::PREFIXED => name.starts_with(&pattern.name),
            _ => false,
        }
    }

    /// Kafka's `AccessControlEntryFilter.matches`.
    pub fn matches_entry(&self, entry: &AclEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == entry.principal)
            && self.host.as_ref().is_none_or(|h| *h == entry.host)
            && (self.operation == operation::ANY || self.operation == entry.operation)
            && (self.permission == permission::ANY || self.permission == entry.permission)
    }
}

impl Acls {
    /// Creates each binding: one result per binding, in order. A binding already present
    /// succeeds without change, as in Kafka.
    pub fn create(&mut self, bindings: &[AclBinding]) -> Vec<ItemResult> {
        bindings.iter().map(|b| self.create_one(b)).collect()
    }

    fn create_one(&mut self, binding: &AclBinding) -> ItemResult {
        if let Err(r) = validate_binding(binding) {
            return (r.error_code, Some(r.message));
        }
        let present = self.bindings.get(&binding.pattern).is_some_and(|e| e.contains(&binding.entry));
        if present {
            return (error_code::NONE, None);
        }
        if self.count >= limits::ACL_BINDINGS_MAX {
            let message =
                format!("The cluster holds the most ACL bindings it may ({})", limits::ACL_BINDINGS_MAX);
            return (error_code::POLICY_VIOLATION, Some(message));
        }
        self.bindings.entry(binding.pattern.clone()).or_default().insert(binding.entry.clone());
        self.count += 1;
        (error_code::NONE, None)
    }

    /// Deletes every binding each filter matches; per filter, what it deleted. A binding two
    /// filters match is listed under the first.
    pub fn delete(&mut self, filters: &[AclFilter]) -> Vec<FilterDeleted> {
        filters.iter().map(|f| self.delete_one(f)).collect()
    }

    fn delete_one(&mut self, filter: &AclFilter) -> FilterDeleted {
        validate_filter(filter)?;
        let deleted = self.matching(filter);
        for binding in &deleted {
            if let Some(entries) = self.bindings.get_mut(&binding.pattern) {
                if entries.remove(&binding.entry) {
                    self.count -= 1;
                }
                if entries.is_empty() {
                    self.bindings.remove(&binding.pattern);
                }
            }
        }
        Ok(deleted)
    }

    /// Every binding the filter matches, ordered by pattern then entry.
    pub fn matching(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.bindings
            .iter()
            .filter(|(pattern, _)| filter.matches_pattern(pattern))
            .flat_map(|(pattern, entries)| {
                entries
                    .iter()
                    .filter(|e| filter.matches_entry(e))
                    .map(|e| AclBinding { pattern: pattern.clone(), entry: e.clone() })
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether `binding` is in the table.
    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.bindings.get(&binding.pattern).is_some_and(|e| e.contains(&binding.entry))
    }

    /// Every entry of a pattern that applies to the resource `(resource_type, name)`: the
    /// literal name, the literal wildcard `*`, and each prefixed pattern that is a prefix of
    /// the name. One ordered-map lookup per candidate; with `each` returning `false` the walk
    /// stops (the authorizer stops at the first DENY).
    pub fn for_each_applying(&self, resource_type: i8, name: &str, mut each: impl FnMut(&AclEntry) -> bool) {
        let mut lookup = |pattern_type: i8, name: &str| -> bool {
            let key = ResourcePattern { resource_type, pattern_type, name: name.to_string() };
            self.bindings.get(&key).is_none_or(|entries| entries.iter().all(&mut each))
        };
        if !lookup(pattern_type::LITERAL, name) {
            return;
        }
        if name != WILDCARD_RESOURCE && !lookup(pattern_type::LITERAL, WILDCARD_RESOURCE) {
            return;
        }
        if !self.has_prefixed(resource_type) {
            return;
        }
        // Every prefix of the name that ends on a character boundary, the whole name included.
        let ends = name.char_indices().skip(1).map(|(i, _)| i).chain(std::iter::once(name.len()));
        for end in ends {
            if !lookup(pattern_type::PREFIXED, &name[..end]) {
                return;
            }
        }
    }

    /// Whether any PREFIXED pattern of the type exists (skips the prefix walk when none do).
    fn has_prefixed(&self, resource_type: i8) -> bool {
        let from =
            ResourcePattern { resource_type, pattern_type: pattern_type::PREFIXED, name: String::new() };
        self.bindings.range(from..).next().is_some_and(|(p, _)| {
            p.resource_type == resource_type && p.pattern_type == pattern_type::PREFIXED
        })
    }

    /// Whether any binding exists for the resource type (Kafka's "any ACL for this type",
    /// used by the authorized-operations and `authorizeByResourceType` checks).
    pub fn entries_of_type(&self, resource_type: i8) -> impl Iterator<Item = (&ResourcePattern, &AclEntry)> {
        let from = ResourcePattern { resource_type, pattern_type: i8::MIN, name: String::new() };
        self.bindings
            .range(from..)
            .take_while(move |(p, _)| p.resource_type == resource_type)
            .flat_map(|(p, entries)| entries.iter().map(move |e| (p, e)))
    }
}

pub fn resource_type_name(code: i8) -> &'static str {
    use resource_type as rt;
    match code {
        rt::ANY => "ANY",
        rt::TOPIC => "TOPIC",
        rt::GROUP => "GROUP",
        rt::CLUSTER => "CLUSTER",
        rt::TRANSACTIONAL_ID => "TRANSACTIONAL_ID",
        rt::DELEGATION_TOKEN => "DELEGATION_TOKEN",
        rt::USER => "USER",
        _ => "UNKNOWN",
    }
}

pub fn pattern_type_name(code: i8) -> &'static str {
    match code {
        pattern_type::ANY => "ANY",
        pattern_type::MATCH => "MATCH",
        pattern_type::LITERAL => "LITERAL",
        pattern_type::PREFIXED => "PREFIXED",
        _ => "UNKNOWN",
    }
}

pub fn operation_name(code: i8) -> &'static str {
    use operation as op;
    const NAMES: [&str; 16] = [
        "UNKNOWN",
        "ANY",
        "ALL",
        "READ",
        "WRITE",
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "CREATE_TOKENS",
        "DESCRIBE_TOKENS",
        "TWO_PHASE_COMMIT",
    ];
    usize::try_from(code).ok().filter(|_| code <= op::MAX).map_or("UNKNOWN", |i| NAMES[i])
}

pub fn permission_name(code: i8) -> &'static str {
    match code {
        permission::ANY => "ANY",
        permission::DENY => "DENY",
        permission::ALLOW => "ALLOW",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;
