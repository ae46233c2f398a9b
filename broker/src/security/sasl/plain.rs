//! SASL/PLAIN (RFC 4616): one client token `authzid NUL user NUL password`, checked against the
//! JAAS `user_NAME="password"` entries of the listener (Kafka's `PlainServerCallbackHandler`),
//! the password compared in constant time. The authorization id must be empty or the user, as
//! in Kafka's `PlainSaslServer`.

use std::collections::BTreeMap;
use std::sync::Arc;

use subtle::ConstantTimeEq;

use super::{AuthFailure, SaslServer, Step, INVALID_CREDENTIALS};

pub const NAME: &str = "PLAIN";

pub struct PlainServer {
    users: Arc<BTreeMap<String, String>>,
}

impl PlainServer {
    pub fn new(users: Arc<BTreeMap<String, String>>) -> Self {
        PlainServer { users }
    }
}

fn failure(message: &str, user: Option<&str>) -> AuthFailure {
    AuthFailure { message: message.to_string(), user: user.map(str::to_string) }
}

impl SaslServer for PlainServer {
    fn mechanism(&self) -> &'static str {
        NAME
    }

    fn evaluate(&mut self, token: &[u8]) -> Result<Step, AuthFailure> {
        let text = std::str::from_utf8(token)
            .map_err(|_| failure("Invalid SASL/PLAIN response: not UTF-8", None))?;
        let parts: Vec<&str> = text.split('\0').collect();
        let [authzid, user, password] = parts.as_slice() else {
            return Err(failure("Invalid SASL/PLAIN response: expected 3 tokens", None));
        };
        if user.is_empty() {
            return Err(failure("Authentication failed: username not specified", None));
        }
        if password.is_empty() {
            return Err(failure("Authentication failed: password not specified", Some(user)));
        }
        // Compared whether or not the user exists, so the time taken does not tell.
        let expected = self.users.get(*user);
        let stored = expected.map_or(&[][..], |p| p.as_bytes());
        let equal: bool = stored.ct_eq(password.as_bytes()).into();
        if expected.is_none() || !equal {
            return Err(failure(INVALID_CREDENTIALS, Some(user)));
        }
        if !authzid.is_empty() && authzid != user {
            return Err(failure(
                "Authentication failed: Client requested an authorization id that is different from username",
                Some(user),
            ));
        }
        Ok(Step::Complete { response: Vec::new(), user: user.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> PlainServer {
        PlainServer::new(Arc::new(BTreeMap::from([("alice".to_string(), "alice-secret".to_string())])))
    }

    #[test]
    fn right_and_wrong_passwords() {
        let ok = server().evaluate(b"\0alice\0alice-secret").unwrap();
        assert_eq!(ok, Step::Complete { response: vec![], user: "alice".into() });
        assert!(server().evaluate(b"alice\0alice\0alice-secret").is_ok());
        let wrong = server().evaluate(b"\0alice\0nope").unwrap_err();
        assert_eq!(wrong.message, INVALID_CREDENTIALS);
        assert_eq!(wrong.user.as_deref(), Some("alice"));
        assert_eq!(server().evaluate(b"\0bob\0alice-secret").unwrap_err().message, INVALID_CREDENTIALS);
        assert!(server()
            .evaluate(b"bob\0alice\0alice-secret")
            .unwrap_err()
            .message
            .contains("authorization id"));
        assert!(server().evaluate(b"alice-secret").is_err());
        assert!(server().evaluate(&[0xff, 0, 0]).is_err());
    }
}
