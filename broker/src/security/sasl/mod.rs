//! SASL on SASL_PLAINTEXT and SASL_SSL listeners: the mechanisms (a [`SaslServer`] per
//! exchange), the per-connection state machine that serves the exchange in the read loop
//! (`session`), and the per-address limit on attempts (`throttle`, owned by the node through
//! [`SaslView`]). Mechanisms are a trait: PLAIN (`plain`, JAAS users) and SCRAM-SHA-256/512
//! (`scram`, credentials in the log, read through the applied view).

pub mod plain;
pub mod scram;
pub mod session;
pub mod throttle;

use std::sync::Arc;

use crate::config::security::SaslSettings;
use crate::raft::applied::AppliedView;
use throttle::Throttle;

/// Where the SaslHandshake and SaslAuthenticate handlers import it from; Kafka's error codes
/// are defined in `kafka_compat::error_code`.
pub use kafka_compat::error_code::ILLEGAL_SASL_STATE;

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

/// What a SASL exchange reads of its node: the applied state (SCRAM credentials) and the
/// node's per-address attempt limit. One per node, made by the listeners (`net::listener`),
/// so two nodes in one process share no throttle; cloned into each connection's session.
#[derive(Clone)]
pub struct SaslView {
    pub applied: AppliedView,
    pub throttle: Arc<Throttle>,
}

impl SaslView {
    pub fn new(applied: AppliedView) -> Self {
        SaslView { applied, throttle: Arc::new(Throttle::new()) }
    }
}

/// A new exchange for `mechanism`, if this listener enables it and onelog serves it.
pub fn server_for(
    mechanism: &str,
    settings: &SaslSettings,
    applied: &AppliedView,
) -> Option<Box<dyn SaslServer>> {
    if !settings.mechanisms.iter().any(|m| m == mechanism) {
        return None;
    }
    if mechanism == plain::NAME {
        return Some(Box::new(plain::PlainServer::new(settings.plain_users.clone())));
    }
    let scram = crate::security::scram::Mechanism::from_name(mechanism)?;
    Some(Box::new(scram::ScramServer::new(scram, applied.clone())))
}

/// The mechanisms a SaslHandshake response lists: enabled and served.
pub fn served_mechanisms(settings: &SaslSettings) -> Vec<String> {
    settings.mechanisms.iter().filter(|m| served(m)).cloned().collect()
}

fn served(mechanism: &str) -> bool {
    mechanism == plain::NAME || crate::security::scram::Mechanism::from_name(mechanism).is_some()
}
