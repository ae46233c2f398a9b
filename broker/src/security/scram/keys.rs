//! The SCRAM key derivations of RFC 5802 §3, for SCRAM-SHA-256 (RFC 7677) and SCRAM-SHA-512:
//! HMAC and H by mechanism, the StoredKey and ServerKey a credential keeps, and the
//! signatures of an exchange. On the `hmac` and `sha2` crates; nothing here is hand-written
//! cryptography, only the composition the RFC defines.

use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::Digest;
use hmac::{Mac, SimpleHmac};
use sha2::{Sha256, Sha512};

use onelog_state::scram::{ScramCredential, ScramMechanism};

/// HMAC(key, data) with the mechanism's hash.
pub fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => mac::<Sha256>(key, data),
        ScramMechanism::Sha512 => mac::<Sha512>(key, data),
    }
}

/// H(data) with the mechanism's hash.
pub fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

fn mac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = <SimpleHmac<D> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// RFC 5802 §3: ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
/// ServerKey = HMAC(SaltedPassword, "Server Key"). What a credential keeps of a salted
/// password (Kafka's `ScramFormatter`); the salted password itself is dropped.
pub fn credential(
    mechanism: ScramMechanism,
    salt: &[u8],
    salted_password: &[u8],
    iterations: i32,
) -> ScramCredential {
    let client_key = hmac(mechanism, salted_password, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        stored_key: hash(mechanism, &client_key),
        server_key: hmac(mechanism, salted_password, b"Server Key"),
        iterations,
    }
}
