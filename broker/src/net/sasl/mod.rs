//! SASL on SASL_PLAINTEXT and SASL_SSL listeners: the mechanisms (a [`SaslServer`] per
//! exchange), the per-connection state machine that serves the exchange in the read loop
//! (`session`), and the per-address limit on attempts (`throttle`). Mechanisms are a trait so
//! another (SCRAM, `broker/src/scram/`) is one arm of [`server_for`].

pub mod plain;
pub mod session;
pub mod throttle;

use crate::config::security::SaslSettings;
use crate::ctx::SharedCtx;

/// Kafka error codes of the SASL exchange (`Errors`).
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Kafka's message for a bad PLAIN (or SCRAM) login: the same whether the user or the password
/// is wrong, so it tells an attacker nothing.
pub const INVALID_CREDENTIALS: &str = "Authentication failed: Invalid username or password";

/// What a mechanism answers one client token with.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Another round: send this and wait for the client's next token.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; `response` is the last server token (empty for PLAIN).
    Complete { response: Vec<u8>, user: String },
}

/// A failed exchange: the message the client gets, and the user it claimed (for the log).
#[derive(Debug, PartialEq, Eq)]
pub struct AuthFailure {
    pub message: String,
    pub user: Option<String>,
}

/// The server side of one mechanism's exchange on one connection.
pub trait SaslServer: Send {
    fn mechanism(&self) -> &'static str;
    fn evaluate(&mut self, token: &[u8]) -> Result<Step, AuthFailure>;
}

/// A new exchange for `mechanism`, if this listener enables it and onelog serves it here.
/// SCRAM-SHA-256/512 plug in here once `scram::ServerExchange` exists: an arm
/// `m if scram::Mechanism::from_name(m).is_some()` returning a small adapter whose `evaluate`
/// calls `ServerExchange::step` and maps `scram::Step` to [`Step`] (and a `ScramError` to an
/// [`AuthFailure`] with Kafka's message), plus the names in [`served_mechanisms`]. Until then
/// they are answered UNSUPPORTED_SASL_MECHANISM.
pub fn server_for(mechanism: &str, settings: &SaslSettings, _ctx: &SharedCtx) -> Option<Box<dyn SaslServer>> {
    if !settings.mechanisms.iter().any(|m| m == mechanism) {
        return None;
    }
    match mechanism {
        plain::NAME => Some(Box::new(plain::PlainServer::new(settings.plain_users.clone()))),
        _ => None,
    }
}

/// The mechanisms a SaslHandshake response lists: enabled and served.
pub fn served_mechanisms(settings: &SaslSettings) -> Vec<String> {
    settings.mechanisms.iter().filter(|m| m.as_str() == plain::NAME).cloned().collect()
}
