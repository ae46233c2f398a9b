//! Client quotas (KIP-546's AlterClientQuotas / DescribeClientQuotas): the replicated table of
//! quota values per entity, Kafka's validation of an alteration, and the lookup that finds
//! the quota governing one connection.
//!
//! The table is replicated state so that every node throttles alike and a quota survives a
//! failover; the rate measurement itself is per node, as in Kafka, where each broker measures
//! the bytes it serves (`broker::security::quotas`).
//!
//! Validation follows Kafka's `ClientQuotaControlManager` (entity types, their combinations,
//! the keys each combination accepts, positive and, for integral keys, whole values) with its
//! messages, so that `kafka-configs` prints what it prints against Kafka.

use std::collections::BTreeMap;

use kafka_compat::error_code::{INVALID_REQUEST, UNSUPPORTED_VERSION};
use serde::{Deserialize, Serialize};

pub const ENTITY_USER: &str = "user";
pub const ENTITY_CLIENT_ID: &str = "client-id";
pub const ENTITY_IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// The value type of a quota key, as Kafka's `QuotaConfig` declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueType {
    Long,
    Int,
    Double,
}

/// Keys of user and client-id entities (and their combination).
const USER_AND_CLIENT_KEYS: &[(&str, ValueType)] = &[
    (PRODUCER_BYTE_RATE, ValueType::Long),
    (CONSUMER_BYTE_RATE, ValueType::Long),
    (REQUEST_PERCENTAGE, ValueType::Double),
    (CONTROLLER_MUTATION_RATE, ValueType::Double),
];
/// Keys of an ip entity.
const IP_KEYS: &[(&str, ValueType)] = &[(CONNECTION_CREATION_RATE, ValueType::Int)];

/// A quota entity: entity type → name, `None` being the type's default entity
/// (`<default>` in `kafka-configs`). Ordered, so the table serializes deterministically.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// A quota value, kept as the bits of Kafka's double so the state stays `Eq` and digests are
/// exact.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct QuotaValue(u64);

impl QuotaValue {
    pub fn new(value: f64) -> Self {
        QuotaValue(value.to_bits())
    }

    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// Every entity's quotas; an entity with no key left is removed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientQuotas {
    pub entities: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
}

/// One entity's changes: a key set to a value, or removed (`None`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub changes: Vec<(String, Option<f64>)>,
}

/// Kafka's refusal of an alteration or a filter: INVALID_REQUEST (42) unless said otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaError {
    pub error_code: i16,
    pub message: String,
}

fn invalid(message: impl Into<String>) -> QuotaError {
    QuotaError { error_code: INVALID_REQUEST, message: message.into() }
}

/// Checks one entity as sent on the wire (type, name pairs, in request order) and returns it
/// as a [`QuotaEntity`]: Kafka's `validateEntity`.
pub fn validate_entity(pairs: &[(String, Option<String>)]) -> Result<QuotaEntity, QuotaError> {
    if pairs.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut entity = QuotaEntity::new();
    for (entity_type, name) in pairs {
        if entity.contains_key(entity_type) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            )));
        }
        if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!("Unhandled client quota entity type: {entity_type}")));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
        entity.insert(entity_type.clone(), name.clone());
    }
    Ok(entity)
}

/// The keys the entity's combination of types accepts (Kafka's `configKeysForEntityType`).
fn keys_for(entity: &QuotaEntity) -> Result<&'static [(&'static str, ValueType)], QuotaError> {
    let has = |t: &str| entity.contains_key(t);
    if let Some(ip) = entity.get(ENTITY_IP) {
        if has(ENTITY_USER) || has(ENTITY_CLIENT_ID) {
            // Kafka's message, missing space included.
            return Err(invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ));
        }
        if let Some(ip) = ip {
            if ip.parse::<std::net::IpAddr>().is_err() {
                // Kafka also accepts a resolvable host name; apply resolves nothing (it must be
                // pure), so onelog accepts literal addresses only.
                return Err(invalid(format!("{ip} is not a valid IP or resolvable host.")));
            }
        }
        return Ok(IP_KEYS);
    }
    Ok(USER_AND_CLIENT_KEYS)
}

/// Kafka's `validateQuotaKeyValue`.
fn validate_value(keys: &[(&str, ValueType)], key: &str, value: f64) -> Result<(), QuotaError> {
    let Some(&(_, value_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, name) = match value_type {
        ValueType::Double => return Ok(()),
        ValueType::Int => (i32::MAX as f64, "an INT"),
        ValueType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!("Proposed value for {key} is too large for {name}.")));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// Checks one entity's changes: duplicate keys, then each set value against the keys of the
/// entity's type combination (removals of any key are accepted, as in Kafka).
pub fn validate_alteration(alteration: &QuotaAlteration) -> Result<(), QuotaError> {
    let keys = keys_for(&alteration.entity)?;
    let mut seen = std::collections::BTreeSet::new();
    for (key, value) in &alteration.changes {
        if !seen.insert(key.as_str()) {
            return Err(invalid(format!("Duplicate quota key {key} not updating quota for this entity")));
        }
        if let Some(value) = value {
            validate_value(keys, key, *value)?;
        }
    }
    Ok(())
}

impl ClientQuotas {
    /// Applies validated alterations, each entity independently.
    pub fn apply(&mut self, alterations: &[QuotaAlteration]) {
        for alteration in alterations {
            let values = self.entities.entry(alteration.entity.clone()).or_default();
            for (key, value) in &alteration.changes {
                match value {
                    Some(v) => {
                        values.insert(key.clone(), QuotaValue::new(*v));
                    }
                    None => {
                        values.remove(key);
                    }
                }
            }
            if values.is_empty() {
                self.entities.remove(&alteration.entity);
            }
        }
    }

    /// Whether every change of `alteration` shows in the table (a follower relaying an
    /// alteration waits for this before it answers).
    pub fn shows(&self, alteration: &QuotaAlteration) -> bool {
        let values = self.entities.get(&alteration.entity);
        alteration
            .changes
            .iter()
            .all(|(key, value)| values.and_then(|v| v.get(key)).copied() == value.map(QuotaValue::new))
    }

    /// The entities a DescribeClientQuotas filter matches (Kafka's `describeClientQuotas`).
    pub fn describe(
        &self,
        filter: &[FilterComponent],
        strict: bool,
    ) -> Result<Vec<QuotaEntityValues<'_>>, QuotaError> {
        let mut seen = std::collections::BTreeSet::new();
        for c in filter {
            if c.entity_type.is_empty() {
                return Err(invalid("Invalid empty entity type."));
            }
            if !seen.insert(c.entity_type.as_str()) {
                return Err(invalid(format!(
                    "Entity type {} cannot appear more than once in the filter.",
                    c.entity_type
                )));
            }
            if ![ENTITY_USER, ENTITY_CLIENT_ID, ENTITY_IP].contains(&c.entity_type.as_str()) {
                return Err(QuotaError {
                    error_code: UNSUPPORTED_VERSION,
                    message: format!("Unsupported entity type {}", c.entity_type),
                });
            }
        }
        if seen.contains(ENTITY_IP) && (seen.contains(ENTITY_USER) || seen.contains(ENTITY_CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
            ));
        }
        let matches = |entity: &QuotaEntity| {
            (!strict || entity.len() == filter.len())
                && filter.iter().all(|c| match (&c.matches, entity.get(&c.entity_type)) {
                    (_, None) => false,
                    (FilterMatch::Any, Some(_)) => true,
                    (FilterMatch::Default, Some(name)) => name.is_none(),
                    (FilterMatch::Exact(want), Some(name)) => name.as_deref() == Some(want.as_str()),
                })
        };
        Ok(self.entities.iter().filter(|(e, _)| matches(e)).collect())
    }

    /// The quota of `key` governing a connection of `user` and `client_id`, and the entity
    /// whose usage it is measured against: Kafka's precedence (`DefaultQuotaCallback`), most
    /// specific first. The returned sensor key has the connection's own names in place of
    /// defaults, so that a default quota applies to each user or client id separately, while
    /// an exact one is shared by every connection it names.
    pub fn lookup(&self, key: &str, user: &str, client_id: &str) -> Option<(f64, SensorKey)> {
        let u = |name: Option<&str>| (ENTITY_USER.to_string(), name.map(str::to_string));
        let c = |name: Option<&str>| (ENTITY_CLIENT_ID.to_string(), name.map(str::to_string));
        let levels: [(QuotaEntity, bool, bool); 8] = [
            ([u(Some(user)), c(Some(client_id))].into(), true, true),
            ([u(Some(user)), c(None)].into(), true, true),
            ([u(Some(user))].into(), true, false),
            ([u(None), c(Some(client_id))].into(), true, true),
            ([u(None), c(None)].into(), true, true),
            ([u(None)].into(), true, false),
            ([c(Some(client_id))].into(), false, true),
            ([c(None)].into(), false, true),
        ];
        levels.into_iter().find_map(|(entity, by_user, by_client)| {
            let value = self.entities.get(&entity)?.get(key)?;
            let sensor = SensorKey {
                user: by_user.then(|| user.to_string()),
                client_id: by_client.then(|| client_id.to_string()),
            };
            Some((value.get(), sensor))
        })
    }
}

/// One entity and its values, as [`ClientQuotas::describe`] returns them.
pub type QuotaEntityValues<'a> = (&'a QuotaEntity, &'a BTreeMap<String, QuotaValue>);

/// The usage a quota is measured against: Kafka's quota metric tags.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SensorKey {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

/// One component of a DescribeClientQuotas filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterComponent {
    pub entity_type: String,
    pub matches: FilterMatch,
}

/// Match types 0 (exact name), 1 (the default entity) and 2 (any entity of the type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterMatch {
    Exact(String),
    Default,
    Any,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs.iter().map(|(t, n)| (t.to_string(), n.map(str::to_string))).collect()
    }

    fn set(e: QuotaEntity, key: &str, value: f64) -> QuotaAlteration {
        QuotaAlteration { entity: e, changes: vec![(key.to_string(), Some(value))] }
    }

    #[test]
    fn validation_follows_kafka() {
        let pairs = |p: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            p.iter().map(|(t, n)| (t.to_string(), n.map(str::to_string))).collect()
        };
        assert!(validate_entity(&[]).is_err());
        assert!(validate_entity(&pairs(&[("user", Some("a")), ("user", Some("b"))])).is_err());
        assert!(validate_entity(&pairs(&[("group", Some("a"))])).is_err());
        assert!(validate_entity(&pairs(&[("user", Some(""))])).is_err());
        let user = validate_entity(&pairs(&[("user", Some("alice"))])).unwrap();
        assert!(validate_alteration(&set(user.clone(), PRODUCER_BYTE_RATE, 1024.0)).is_ok());
        assert!(validate_alteration(&set(user.clone(), PRODUCER_BYTE_RATE, 10.5)).is_err());
        assert!(validate_alteration(&set(user.clone(), PRODUCER_BYTE_RATE, 0.0)).is_err());
        assert!(validate_alteration(&set(user.clone(), REQUEST_PERCENTAGE, 12.5)).is_ok());
        assert!(validate_alteration(&set(user.clone(), CONNECTION_CREATION_RATE, 5.0)).is_err());
        let ip = entity(&[("ip", Some("10.0.0.1"))]);
        assert!(validate_alteration(&set(ip, CONNECTION_CREATION_RATE, 5.0)).is_ok());
        let bad_ip = entity(&[("ip", Some("not an ip"))]);
        assert!(validate_alteration(&set(bad_ip, CONNECTION_CREATION_RATE, 5.0)).is_err());
        let mixed = entity(&[("ip", None), ("user", Some("a"))]);
        let err = validate_alteration(&set(mixed, CONNECTION_CREATION_RATE, 5.0)).unwrap_err();
        assert!(err.message.contains("Invalid quota entity combination"), "{err:?}");
    }

    #[test]
    fn shows_tells_whether_an_alteration_applied() {
        let mut quotas = ClientQuotas::default();
        let e = entity(&[("client-id", Some("app"))]);
        let alteration = set(e.clone(), PRODUCER_BYTE_RATE, 100.0);
        assert!(!quotas.shows(&alteration));
        quotas.apply(std::slice::from_ref(&alteration));
        assert!(quotas.shows(&alteration));
        assert!(!quotas.shows(&set(e.clone(), PRODUCER_BYTE_RATE, 200.0)));
        let removal = QuotaAlteration { entity: e, changes: vec![(PRODUCER_BYTE_RATE.into(), None)] };
        assert!(!quotas.shows(&removal));
        quotas.apply(std::slice::from_ref(&removal));
        assert!(quotas.shows(&removal));
    }

    #[test]
    fn apply_sets_and_removes_and_drops_empty_entities() {
        let mut quotas = ClientQuotas::default();
        let e = entity(&[("client-id", Some("app"))]);
        quotas.apply(&[set(e.clone(), PRODUCER_BYTE_RATE, 100.0)]);
        assert_eq!(quotas.entities[&e][PRODUCER_BYTE_RATE].get(), 100.0);
        quotas.apply(&[QuotaAlteration {
            entity: e.clone(),
            changes: vec![(PRODUCER_BYTE_RATE.into(), None)],
        }]);
        assert!(quotas.entities.is_empty());
    }

    #[test]
    fn lookup_takes_the_most_specific_level_and_names_its_sensor() {
        let mut quotas = ClientQuotas::default();
        quotas.apply(&[
            set(entity(&[("client-id", None)]), PRODUCER_BYTE_RATE, 1.0),
            set(entity(&[("client-id", Some("app"))]), PRODUCER_BYTE_RATE, 2.0),
            set(entity(&[("user", Some("bob"))]), PRODUCER_BYTE_RATE, 3.0),
        ]);
        let sensor = |user: Option<&str>, client: Option<&str>| SensorKey {
            user: user.map(str::to_string),
            client_id: client.map(str::to_string),
        };
        assert_eq!(
            quotas.lookup(PRODUCER_BYTE_RATE, "ANONYMOUS", "other"),
            Some((1.0, sensor(None, Some("other"))))
        );
        assert_eq!(
            quotas.lookup(PRODUCER_BYTE_RATE, "ANONYMOUS", "app"),
            Some((2.0, sensor(None, Some("app"))))
        );
        assert_eq!(quotas.lookup(PRODUCER_BYTE_RATE, "bob", "app"), Some((3.0, sensor(Some("bob"), None))));
        assert_eq!(quotas.lookup(CONSUMER_BYTE_RATE, "bob", "app"), None);
    }

    #[test]
    fn describe_filters_as_kafka() {
        let mut quotas = ClientQuotas::default();
        quotas.apply(&[
            set(entity(&[("client-id", None)]), PRODUCER_BYTE_RATE, 1.0),
            set(entity(&[("client-id", Some("app"))]), PRODUCER_BYTE_RATE, 2.0),
            set(entity(&[("user", Some("bob")), ("client-id", Some("app"))]), PRODUCER_BYTE_RATE, 3.0),
        ]);
        let component = |t: &str, m: FilterMatch| FilterComponent { entity_type: t.into(), matches: m };
        let any = quotas.describe(&[component("client-id", FilterMatch::Any)], false).unwrap();
        assert_eq!(any.len(), 3);
        let strict = quotas.describe(&[component("client-id", FilterMatch::Any)], true).unwrap();
        assert_eq!(strict.len(), 2);
        let default = quotas.describe(&[component("client-id", FilterMatch::Default)], false).unwrap();
        assert_eq!(default.len(), 1);
        let exact =
            quotas.describe(&[component("client-id", FilterMatch::Exact("app".into()))], true).unwrap();
        assert_eq!(exact[0].1[PRODUCER_BYTE_RATE].get(), 2.0);
        let bad =
            quotas.describe(&[component("ip", FilterMatch::Any), component("user", FilterMatch::Any)], false);
        assert_eq!(bad.unwrap_err().error_code, INVALID_REQUEST);
        let unknown = quotas.describe(&[component("group", FilterMatch::Any)], false);
        assert_eq!(unknown.unwrap_err().error_code, UNSUPPORTED_VERSION);
    }
}
