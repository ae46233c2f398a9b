//! Who sent a request: Kafka's `KafkaPrincipal` (`User:alice`), set by the broker from the
//! connection's authentication (SASL username, TLS certificate subject) and matched by ACLs and
//! quotas. A connection that did not authenticate is `User:ANONYMOUS`, as in Kafka.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Kafka's principal type for users (`KafkaPrincipal.USER_TYPE`).
pub const USER_TYPE: &str = "User";
/// The user name of a connection that did not authenticate (`KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

/// `type:name`, e.g. `User:alice`. ACLs name principals in this form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    pub fn user(name: impl Into<String>) -> Self {
        KafkaPrincipal { principal_type: USER_TYPE.to_string(), name: name.into() }
    }

    /// `User:ANONYMOUS`, shared.
    pub fn anonymous() -> Arc<KafkaPrincipal> {
        static ANONYMOUS: OnceLock<Arc<KafkaPrincipal>> = OnceLock::new();
        ANONYMOUS.get_or_init(|| Arc::new(KafkaPrincipal::user(ANONYMOUS_NAME))).clone()
    }

    /// Parses `type:name` (Kafka's `SecurityUtils.parseKafkaPrincipal`): the type is what
    /// precedes the first colon; both parts must be non-empty.
    pub fn parse(text: &str) -> Option<KafkaPrincipal> {
        let (principal_type, name) = text.split_once(':')?;
        if principal_type.is_empty() || name.is_empty() {
            return None;
        }
        Some(KafkaPrincipal { principal_type: principal_type.to_string(), name: name.to_string() })
    }

    pub fn is_anonymous(&self) -> bool {
        self.principal_type == USER_TYPE && self.name == ANONYMOUS_NAME
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_type_colon_name() {
        let alice = KafkaPrincipal::parse("User:alice").unwrap();
        assert_eq!(alice, KafkaPrincipal::user("alice"));
        assert_eq!(alice.to_string(), "User:alice");
        // Only the first colon separates: a certificate subject may contain more.
        assert_eq!(KafkaPrincipal::parse("User:CN=a:b").unwrap().name, "CN=a:b");
        assert!(KafkaPrincipal::parse("alice").is_none());
        assert!(KafkaPrincipal::parse(":alice").is_none());
        assert!(KafkaPrincipal::parse("User:").is_none());
        assert!(KafkaPrincipal::anonymous().is_anonymous());
    }
}
