//! The authorizer's three configs, Kafka's names: `authorizer.class.name` (empty: none;
//! Kafka's two ACL authorizers: onelog's built-in one; anything else is refused at start-up,
//! since onelog cannot load Java classes), `super.users` (`;`-separated principals) and
//! `allow.everyone.if.no.acl.found`.

use anyhow::bail;
use kafka_compat::principal::KafkaPrincipal;

/// Kafka's KRaft authorizer.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// Kafka's ZooKeeper-era authorizer, same semantics; configs written for it keep working.
pub const ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

#[derive(Debug, Clone, Default)]
pub struct AuthzSettings {
    /// An authorizer is configured: requests are checked against the ACLs.
    pub enabled: bool,
    pub super_users: Vec<KafkaPrincipal>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthzSettings {
    pub fn parse(class_name: &str, super_users: &str, allow_if_no_acl: bool) -> anyhow::Result<Self> {
        let enabled = match class_name.trim() {
            "" => false,
            STANDARD_AUTHORIZER | ACL_AUTHORIZER => true,
            other => bail!(
                "authorizer.class.name={other}: onelog has one authorizer, Kafka's ACL model; set \
                 {STANDARD_AUTHORIZER} (or {ACL_AUTHORIZER}), or leave it empty for none"
            ),
        };
        let mut parsed = Vec::new();
        for text in super_users.split(';').map(str::trim).filter(|t| !t.is_empty()) {
            let Some(principal) = KafkaPrincipal::parse(text) else {
                bail!("super.users: `{text}` is not a principal of the form type:name (User:admin)");
            };
            parsed.push(principal);
        }
        Ok(AuthzSettings { enabled, super_users: parsed, allow_everyone_if_no_acl_found: allow_if_no_acl })
    }

    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        self.super_users.iter().any(|p| p == principal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_and_super_users() {
        assert!(!AuthzSettings::parse("", "", false).unwrap().enabled);
        assert!(AuthzSettings::parse(STANDARD_AUTHORIZER, "", false).unwrap().enabled);
        assert!(AuthzSettings::parse(ACL_AUTHORIZER, "", false).unwrap().enabled);
        let refused = AuthzSettings::parse("com.example.MyAuthorizer", "", false).unwrap_err();
        assert!(refused.to_string().contains("com.example.MyAuthorizer"));
        let s = AuthzSettings::parse(STANDARD_AUTHORIZER, "User:admin; User:CN=node1,O=x", true).unwrap();
        assert!(s.is_super_user(&KafkaPrincipal::user("admin")));
        assert!(s.is_super_user(&KafkaPrincipal::user("CN=node1,O=x")));
        assert!(!s.is_super_user(&KafkaPrincipal::user("alice")));
        assert!(AuthzSettings::parse(STANDARD_AUTHORIZER, "admin", false).is_err());
    }
}
