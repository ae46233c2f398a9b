//! The SCRAM-SHA-256 / SCRAM-SHA-512 server exchange (RFC 5802, RFC 7677) over the credentials
//! in the replicated state (`onelog_state::scram`).
//!
//! The SASL state machine (`security::sasl::session`) feeds it the client's tokens and relays its answers: first
//! client-first-message → server-first-message ([`Step::Challenge`]), then
//! client-final-message → server-final-message ([`Step::Complete`], with the authenticated
//! user). Anything else is a [`ScramError`] whose message fits a log line; the exchange is
//! then over.
//!
//! An unknown user (or one without a credential for this mechanism) goes through the same
//! exchange with a fake credential derived from the user name and a per-process random key,
//! as Kafka and PostgreSQL do, and fails at the proof exactly as a wrong password does: neither
//! the messages nor the work done tell a client which user names exist.

pub mod keys;
pub mod messages;

use std::sync::OnceLock;

use rand::RngCore;
use subtle::ConstantTimeEq;

use onelog_state::scram::ScramCredential;

use crate::limits::SCRAM_MESSAGE_BYTES_MAX;
use crate::raft::applied::AppliedView;
use messages::{encode, parse_client_final, parse_client_first, ClientFirst};

/// The SCRAM mechanisms, as Kafka's `ScramMechanism` types them (`from_name("SCRAM-SHA-256")`,
/// `name()`); one type with the replicated state's, which stores credentials by it.
pub use onelog_state::scram::ScramMechanism as Mechanism;

/// Bytes of the server nonce, from the OS's generator (RFC 5802 §5.1: unpredictable).
const SERVER_NONCE_BYTES: usize = 24;
/// Iterations of a fake credential: kafka-configs' default, so that an unknown user's
/// challenge looks like most real ones.
const FAKE_ITERATIONS: i32 = 4096;
/// Length of a fake salt: kafka-configs' salts are 130 random bits in base 36 (25–26 chars).
const FAKE_SALT_CHARS: usize = 26;

/// What a step answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// server-first-message; the client's final message comes next.
    Challenge(Vec<u8>),
    /// server-final-message (`v=` ServerSignature): `user` is authenticated.
    Complete { response: Vec<u8>, user: String },
}

/// Why an exchange failed. Each message names the cause without any secret; a wrong password
/// and an unknown user give the same [`ScramError::InvalidCredentials`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM message: {0}")]
    Malformed(String),
    #[error("unsupported SCRAM feature: {0}")]
    Unsupported(String),
    #[error("SCRAM exchange refused: {0}")]
    Refused(String),
    #[error("SCRAM message of {0} bytes is over the {SCRAM_MESSAGE_BYTES_MAX}-byte bound")]
    TooLong(usize),
    #[error("authentication of user {user:?} failed: invalid credentials")]
    InvalidCredentials { user: String },
    #[error("SCRAM exchange already ended: no further message is expected")]
    Ended,
}

/// Where the exchange stands.
enum State {
    /// Waiting for client-first-message.
    First,
    /// Sent server-first-message: waiting for client-final-message.
    Final(Box<Pending>),
    /// Completed or failed: any further token is an error.
    Ended,
}

/// What the final step checks the client's proof against.
struct Pending {
    first: ClientFirst,
    /// Client nonce then server nonce: client-final's `r=` must repeat it.
    nonce: String,
    server_first: String,
    credential: ScramCredential,
}

/// Finds a user's credential for a mechanism.
type Lookup = Box<dyn Fn(&str, Mechanism) -> Option<ScramCredential> + Send + Sync>;

/// One SCRAM authentication on one connection.
pub struct ServerExchange {
    mechanism: Mechanism,
    lookup: Lookup,
    server_nonce: Option<String>,
    state: State,
}

impl ServerExchange {
    /// An exchange that looks the user's credential up in the applied state when the client's
    /// first message arrives.
    pub fn new(mechanism: Mechanism, applied: AppliedView) -> Self {
        let lookup = move |user: &str, m: Mechanism| applied.state(|s| s.scram.get(user, m).cloned());
        Self::with_lookup(mechanism, Box::new(lookup), None)
    }

    /// For tests: credentials from `lookup`, and a fixed server nonce (RFC 7677's vector).
    #[cfg(test)]
    pub(crate) fn for_test(
        mechanism: Mechanism,
        lookup: impl Fn(&str, Mechanism) -> Option<ScramCredential> + Send + Sync + 'static,
        server_nonce: Option<&str>,
    ) -> Self {
        Self::with_lookup(mechanism, Box::new(lookup), server_nonce.map(str::to_string))
    }

    fn with_lookup(mechanism: Mechanism, lookup: Lookup, server_nonce: Option<String>) -> Self {
        ServerExchange { mechanism, lookup, server_nonce, state: State::First }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Takes the client's next token. After an error or completion the exchange is over.
    pub fn step(&mut self, token: &[u8]) -> Result<Step, ScramError> {
        let state = std::mem::replace(&mut self.state, State::Ended);
        if token.len() > SCRAM_MESSAGE_BYTES_MAX {
            return Err(ScramError::TooLong(token.len()));
        }
        let text = std::str::from_utf8(token).map_err(|_| ScramError::Malformed("not UTF-8".into()))?;
        match state {
            State::First => self.first(text),
            State::Final(pending) => self.last(text, &pending),
            State::Ended => Err(ScramError::Ended),
        }
    }

    fn first(&mut self, text: &str) -> Result<Step, ScramError> {
        let first = parse_client_first(text)?;
        let credential = (self.lookup)(&first.user, self.mechanism)
            .unwrap_or_else(|| fake_credential(self.mechanism, &first.user));
        let server_nonce = self.server_nonce.take().unwrap_or_else(random_nonce);
        let nonce = format!("{}{}", first.nonce, server_nonce);
        let server_first = format!("r={nonce},s={},i={}", encode(&credential.salt), credential.iterations);
        let challenge = server_first.clone().into_bytes();
        self.state = State::Final(Box::new(Pending { first, nonce, server_first, credential }));
        Ok(Step::Challenge(challenge))
    }

    /// RFC 5802 §3: ClientSignature = HMAC(StoredKey, AuthMessage), ClientKey = ClientProof
    /// XOR ClientSignature; the client knows the password iff H(ClientKey) = StoredKey.
    fn last(&self, text: &str, pending: &Pending) -> Result<Step, ScramError> {
        let Pending { first, nonce, server_first, credential } = pending;
        let last = parse_client_final(text)?;
        if last.channel_binding != first.gs2_header.as_bytes() {
            return Err(ScramError::Refused("the channel binding (c=) differs from the gs2 header".into()));
        }
        if last.nonce != *nonce {
            return Err(ScramError::Refused("the nonce differs from the one the server sent".into()));
        }
        let auth_message = format!("{},{server_first},{}", first.bare, last.without_proof);
        let m = self.mechanism;
        let client_signature = keys::hmac(m, &credential.stored_key, auth_message.as_bytes());
        let invalid = || ScramError::InvalidCredentials { user: first.user.clone() };
        if last.proof.len() != client_signature.len() {
            return Err(invalid());
        }
        let client_key: Vec<u8> = last.proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        let stored_key = keys::hash(m, &client_key);
        if !bool::from(stored_key.ct_eq(&credential.stored_key)) {
            return Err(invalid());
        }
        let server_signature = keys::hmac(m, &credential.server_key, auth_message.as_bytes());
        let response = format!("v={}", encode(&server_signature)).into_bytes();
        Ok(Step::Complete { response, user: first.user.clone() })
    }
}

fn random_nonce() -> String {
    let mut bytes = [0u8; SERVER_NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    encode(&bytes)
}

/// The per-process key fake credentials derive from: random, so that nobody can compute a
/// fake credential's keys, and fixed for the process, so that the same unknown user gets the
/// same salt on every attempt (a changing salt would reveal it is fake).
fn fake_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        key
    })
}

fn fake_credential(mechanism: Mechanism, user: &str) -> ScramCredential {
    const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let derive = |label: &str| keys::hmac(mechanism, fake_key(), format!("{label}\0{user}").as_bytes());
    let salt = derive("salt").iter().take(FAKE_SALT_CHARS).map(|b| BASE36[usize::from(*b) % 36]).collect();
    ScramCredential {
        salt,
        stored_key: derive("stored key"),
        server_key: derive("server key"),
        iterations: FAKE_ITERATIONS,
    }
}

#[cfg(test)]
mod tests;
