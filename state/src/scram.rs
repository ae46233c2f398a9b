//! SCRAM credentials (KIP-554, RFC 5802): the replicated table user → mechanism → credential,
//! Kafka's validation of AlterUserScramCredentials, and its apply.
//!
//! The table is replicated state so that every node authenticates a user alike and a
//! credential survives a failover. It holds only what RFC 5802 §5 says the server keeps —
//! salt, StoredKey, ServerKey, iteration count — never the password nor the salted password:
//! the broker derives the keys from the request's salted password before proposing
//! (`broker::security::scram::keys`), so the log never carries anything a client could log in with.
//!
//! Validation follows Kafka's `ScramControlManager` with its codes and messages, per user: one
//! user's bad alteration never fails another's. One difference: Kafka's KRaft controller
//! refuses a user named twice in one request even for two mechanisms, which makes
//! `kafka-configs --add-config 'SCRAM-SHA-256=[..],SCRAM-SHA-512=[..]'` fail; onelog, as
//! Kafka's ZooKeeper-era broker did, refuses only the same (user, mechanism) twice.

use std::collections::BTreeMap;
use std::fmt;

use kafka_compat::error_code;
use serde::{Deserialize, Serialize};

use crate::command::ItemResult;
use crate::limits;

/// Kafka's minimum iterations for both SCRAM-SHA mechanisms (`ScramMechanism.minIterations`)
/// and the controller's maximum (`ScramControlManager.MAX_ITERATIONS`).
pub const ITERATIONS_MIN: i32 = 4096;
pub const ITERATIONS_MAX: i32 = 16384;

const DUPLICATE: &str = "A user credential cannot be altered twice in the same request";
const NOT_FOUND_DELETE: &str = "Attempt to delete a user credential that does not exist";

/// A SCRAM mechanism, by Kafka's `ScramMechanism` type code (1 and 2; 0 is UNKNOWN).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn from_type(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn type_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The SASL mechanism name (RFC 7677, RFC 5802 §4).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Output length of the mechanism's hash: the length of a salted password, StoredKey and
    /// ServerKey.
    pub fn hash_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }
}

/// What the server keeps of one user's password for one mechanism (RFC 5802 §5).
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Keys stay out of logs and panic messages, as Kafka's `ScramCredentialValue` hides them.
impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("salt", &"[hidden]")
            .field("stored_key", &"[hidden]")
            .field("server_key", &"[hidden]")
            .field("iterations", &self.iterations)
            .finish()
    }
}

/// One user's validated alterations of one request: mechanisms to delete and credentials to
/// set, each mechanism at most once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserScramAlteration {
    pub user: String,
    pub deletions: Vec<ScramMechanism>,
    pub upsertions: Vec<(ScramMechanism, ScramCredential)>,
}

/// The replicated credential table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScramCredentials {
    users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
}

impl ScramCredentials {
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// A user's credentials by mechanism; `None` when the user has none.
    pub fn user(&self, user: &str) -> Option<&BTreeMap<ScramMechanism, ScramCredential>> {
        self.users.get(user)
    }

    /// Every user with at least one credential, in name order.
    pub fn users(&self) -> impl Iterator<Item = (&String, &BTreeMap<ScramMechanism, ScramCredential>)> {
        self.users.iter()
    }

    /// Whether the table shows `alteration` applied (a follower's answer waits for it).
    pub fn shows(&self, alteration: &UserScramAlteration) -> bool {
        let user = &alteration.user;
        alteration.deletions.iter().all(|m| self.get(user, *m).is_none())
            && alteration.upsertions.iter().all(|(m, c)| self.get(user, *m) == Some(c))
    }

    /// Applies each user's alterations all-or-nothing, independently of the other users;
    /// one result per user, in order. Deleting a credential that does not exist refuses the
    /// user's whole alteration, as does a new user beyond `SCRAM_USERS_MAX`.
    pub fn apply(&mut self, alterations: &[UserScramAlteration]) -> Vec<ItemResult> {
        alterations.iter().map(|a| self.apply_user(a)).collect()
    }

    fn apply_user(&mut self, alteration: &UserScramAlteration) -> ItemResult {
        let user = &alteration.user;
        if alteration.deletions.iter().any(|m| self.get(user, *m).is_none()) {
            return (error_code::RESOURCE_NOT_FOUND, Some(NOT_FOUND_DELETE.to_string()));
        }
        let adds_user = !self.users.contains_key(user) && !alteration.upsertions.is_empty();
        if adds_user && self.users.len() >= limits::SCRAM_USERS_MAX {
            let message =
                format!("onelog keeps SCRAM credentials of at most {} users", limits::SCRAM_USERS_MAX);
            return (error_code::UNACCEPTABLE_CREDENTIAL, Some(message));
        }
        let entry = self.users.entry(user.clone()).or_default();
        for mechanism in &alteration.deletions {
            entry.remove(mechanism);
        }
        for (mechanism, credential) in &alteration.upsertions {
            entry.insert(*mechanism, credential.clone());
        }
        if entry.is_empty() {
            self.users.remove(user);
        }
        (error_code::NONE, None)
    }
}

/// Kafka's checks of one deletion's user name and mechanism.
pub fn validate_deletion(user: &str, mechanism: i8) -> Result<ScramMechanism, (i16, String)> {
    validate_user_and_mechanism(user, mechanism)
}

/// Kafka's checks of one upsertion, plus onelog's bounds on what it stores: the salt's length
/// and the salted password's, which must be the mechanism's hash length (anything else is not
/// a salted password of that mechanism).
pub fn validate_upsertion(
    user: &str,
    mechanism: i8,
    iterations: i32,
    salt: &[u8],
    salted_password: &[u8],
) -> Result<ScramMechanism, (i16, String)> {
    let mechanism = validate_user_and_mechanism(user, mechanism)?;
    let unacceptable = |message: String| Err((error_code::UNACCEPTABLE_CREDENTIAL, message));
    if iterations < ITERATIONS_MIN {
        return unacceptable("Too few iterations".to_string());
    }
    if iterations > ITERATIONS_MAX {
        return unacceptable("Too many iterations".to_string());
    }
    if salt.is_empty() || salt.len() > limits::SCRAM_SALT_BYTES_MAX {
        return unacceptable(format!("The salt must be 1 to {} bytes long", limits::SCRAM_SALT_BYTES_MAX));
    }
    if salted_password.len() != mechanism.hash_bytes() {
        return unacceptable(format!(
            "A {} salted password is {} bytes long, not {}",
            mechanism.name(),
            mechanism.hash_bytes(),
            salted_password.len()
        ));
    }
    Ok(mechanism)
}

fn validate_user_and_mechanism(user: &str, mechanism: i8) -> Result<ScramMechanism, (i16, String)> {
    if user.is_empty() {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Username must not be empty".to_string()));
    }
    if user.len() > limits::SCRAM_USER_NAME_BYTES_MAX {
        return Err((
            error_code::UNACCEPTABLE_CREDENTIAL,
            format!("A SCRAM user name is at most {} bytes long", limits::SCRAM_USER_NAME_BYTES_MAX),
        ));
    }
    ScramMechanism::from_type(mechanism)
        .ok_or_else(|| (error_code::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism".to_string()))
}

/// One alteration of a user: the mechanism and the credential to set, `None` to delete it.
pub type Alteration<C> = (ScramMechanism, Option<C>);
/// A user's alterations, or the refusal (code, message) that answers the user.
pub type UserAlterations<C> = Result<Vec<Alteration<C>>, (i16, String)>;

/// Groups one request's alterations by user, in order of first appearance, refusing a user
/// that names the same mechanism twice (deletion and upsertion together included) with
/// DUPLICATE_RESOURCE. `check` validates one alteration (a deletion when its credential is
/// `None`) and turns it into the mechanism and credential to store; the first failure of a
/// user is that user's answer.
pub struct Grouped<C> {
    /// Users in order of first appearance, each with its alterations or its refusal.
    pub users: Vec<(String, UserAlterations<C>)>,
    /// Position of each user in `users`, so a request naming many users costs no more than
    /// its length times a lookup.
    index: BTreeMap<String, usize>,
}

impl<C> Grouped<C> {
    pub fn new() -> Self {
        Grouped { users: Vec::new(), index: BTreeMap::new() }
    }

    /// Adds one alteration of `user`: `checked` is its validation's outcome.
    pub fn add(&mut self, user: &str, checked: Result<Alteration<C>, (i16, String)>) {
        let index = match self.index.get(user) {
            Some(index) => *index,
            None => {
                self.users.push((user.to_string(), Ok(Vec::new())));
                self.index.insert(user.to_string(), self.users.len() - 1);
                self.users.len() - 1
            }
        };
        let slot = &mut self.users[index].1;
        let Ok(alterations) = slot else { return };
        match checked {
            Err(refusal) => *slot = Err(refusal),
            Ok((mechanism, _)) if alterations.iter().any(|(m, _)| *m == mechanism) => {
                *slot = Err((error_code::DUPLICATE_RESOURCE, DUPLICATE.to_string()))
            }
            Ok(alteration) => alterations.push(alteration),
        }
    }
}

impl<C> Default for Grouped<C> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(byte: u8, iterations: i32) -> ScramCredential {
        ScramCredential {
            salt: vec![byte; 16],
            stored_key: vec![byte; 32],
            server_key: vec![byte; 32],
            iterations,
        }
    }

    fn upsert(user: &str, mechanism: ScramMechanism, c: ScramCredential) -> UserScramAlteration {
        UserScramAlteration { user: user.into(), deletions: vec![], upsertions: vec![(mechanism, c)] }
    }

    #[test]
    fn validation_uses_kafkas_codes_and_messages() {
        let sp = [0u8; 32];
        let refused = |r: Result<ScramMechanism, (i16, String)>| r.unwrap_err();
        assert_eq!(
            refused(validate_upsertion("", 1, 4096, b"s", &sp)),
            (error_code::UNACCEPTABLE_CREDENTIAL, "Username must not be empty".into())
        );
        assert_eq!(
            refused(validate_upsertion("a", 0, 4096, b"s", &sp)),
            (error_code::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism".into())
        );
        assert_eq!(refused(validate_upsertion("a", 1, 4095, b"s", &sp)).1, "Too few iterations");
        assert_eq!(refused(validate_upsertion("a", 1, 16385, b"s", &sp)).1, "Too many iterations");
        assert_eq!(
            refused(validate_upsertion("a", 2, 4096, b"s", &sp)).0,
            error_code::UNACCEPTABLE_CREDENTIAL
        );
        assert_eq!(
            refused(validate_upsertion("a", 1, 4096, b"", &sp)).0,
            error_code::UNACCEPTABLE_CREDENTIAL
        );
        let long = "u".repeat(limits::SCRAM_USER_NAME_BYTES_MAX + 1);
        assert_eq!(refused(validate_deletion(&long, 1)).0, error_code::UNACCEPTABLE_CREDENTIAL);
        assert_eq!(validate_upsertion("a", 1, 16384, b"s", &sp), Ok(ScramMechanism::Sha256));
        assert_eq!(validate_upsertion("a", 2, 4096, b"s", &[0; 64]), Ok(ScramMechanism::Sha512));
    }

    #[test]
    fn a_mechanism_named_twice_refuses_only_that_user() {
        let mut grouped: Grouped<()> = Grouped::new();
        grouped.add("alice", Ok((ScramMechanism::Sha256, None)));
        grouped.add("bob", Ok((ScramMechanism::Sha256, Some(()))));
        grouped.add("alice", Ok((ScramMechanism::Sha512, Some(()))));
        grouped.add("alice", Ok((ScramMechanism::Sha256, Some(()))));
        grouped.add("bob", Ok((ScramMechanism::Sha512, Some(()))));
        assert_eq!(grouped.users[0].0, "alice");
        assert_eq!(grouped.users[0].1, Err((error_code::DUPLICATE_RESOURCE, DUPLICATE.to_string())));
        assert_eq!(grouped.users[1].1.as_ref().map(Vec::len), Ok(2));
    }

    #[test]
    fn apply_upserts_deletes_and_refuses_a_missing_credential_per_user() {
        let mut table = ScramCredentials::default();
        let results = table.apply(&[
            upsert("alice", ScramMechanism::Sha256, credential(1, 4096)),
            upsert("bob", ScramMechanism::Sha512, credential(2, 8192)),
        ]);
        assert_eq!(results, vec![(error_code::NONE, None), (error_code::NONE, None)]);
        let delete =
            |user: &str, m| UserScramAlteration { user: user.into(), deletions: vec![m], upsertions: vec![] };
        let results =
            table.apply(&[delete("alice", ScramMechanism::Sha512), delete("bob", ScramMechanism::Sha512)]);
        assert_eq!(results[0], (error_code::RESOURCE_NOT_FOUND, Some(NOT_FOUND_DELETE.into())));
        assert_eq!(results[1], (error_code::NONE, None));
        assert_eq!(table.get("alice", ScramMechanism::Sha256), Some(&credential(1, 4096)));
        assert!(table.user("bob").is_none(), "a user without credentials is not kept");
        assert!(table.shows(&upsert("alice", ScramMechanism::Sha256, credential(1, 4096))));
        assert!(!format!("{:?}", credential(7, 4096)).contains('7'), "keys are hidden from Debug");
    }
}
