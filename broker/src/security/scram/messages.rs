//! The client's two SCRAM messages (RFC 5802 §7), parsed strictly: the gs2 header, the
//! saslname escaping, the attributes in their fixed order, base64 where the grammar says so.
//! Everything that is not the grammar is a [`ScramError`], never a panic: the input is a
//! client's, before it has authenticated.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;

use super::ScramError;

/// The parts of a client-first-message the exchange uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// `n,,`, `y,,` or `n,a=…,`, as sent: client-final's `c=` must repeat it.
    pub gs2_header: String,
    /// The user, unescaped.
    pub user: String,
    pub nonce: String,
    /// client-first-message-bare, as sent: the start of the AuthMessage.
    pub bare: String,
}

/// The parts of a client-final-message the exchange uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The decoded `c=` attribute.
    pub channel_binding: Vec<u8>,
    pub nonce: String,
    pub proof: Vec<u8>,
    /// client-final-message-without-proof, as sent: the end of the AuthMessage.
    pub without_proof: String,
}

fn malformed(what: &str) -> ScramError {
    ScramError::Malformed(what.to_string())
}

/// `name=value` with the given one-letter name, or the error naming what was expected.
fn attribute<'a>(part: Option<&'a str>, name: char, what: &str) -> Result<&'a str, ScramError> {
    part.and_then(|p| p.strip_prefix(name))
        .and_then(|p| p.strip_prefix('='))
        .ok_or_else(|| malformed(&format!("expected {what} ({name}=)")))
}

pub fn parse_client_first(text: &str) -> Result<ClientFirst, ScramError> {
    let mut parts = text.splitn(3, ',');
    let cbind = parts.next().unwrap_or_default();
    match cbind {
        "n" | "y" => {}
        _ if cbind.starts_with("p=") => {
            return Err(ScramError::Unsupported("channel binding (p=) is not supported".into()))
        }
        _ => return Err(malformed("the gs2 header must start with n, y or p=")),
    }
    let authzid = match parts.next() {
        Some("") => None,
        Some(a) => Some(saslname(attribute(Some(a), 'a', "an authorization id")?)?),
        None => return Err(malformed("missing the gs2 header's authorization id field")),
    };
    let bare = parts.next().ok_or_else(|| malformed("missing client-first-message-bare"))?;
    let gs2_header = text[..text.len() - bare.len()].to_string();
    let mut attrs = bare.split(',');
    let first = attrs.next();
    if first.is_some_and(|a| a.starts_with("m=")) {
        return Err(ScramError::Unsupported("mandatory extensions (m=) are not supported".into()));
    }
    let user = saslname(attribute(first, 'n', "the user name")?)?;
    let nonce = attribute(attrs.next(), 'r', "the client nonce")?;
    check_nonce(nonce)?;
    for extension in attrs {
        check_extension(extension)?;
    }
    if authzid.as_ref().is_some_and(|a| *a != user) {
        return Err(ScramError::Refused(format!("the authorization id differs from the user name {user:?}")));
    }
    Ok(ClientFirst { gs2_header, user, nonce: nonce.to_string(), bare: bare.to_string() })
}

/// Kafka's SCRAM extensions (KIP-84): `tokenauth=true` asks to authenticate with a delegation
/// token, which onelog does not issue; other extensions are ignored, as Kafka ignores them.
fn check_extension(extension: &str) -> Result<(), ScramError> {
    let Some((key, value)) = extension.split_once('=') else {
        return Err(malformed("an extension must be key=value"));
    };
    if key.is_empty() {
        return Err(malformed("an extension must be key=value"));
    }
    if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
        return Err(ScramError::Unsupported(
            "delegation token authentication (tokenauth) is not supported".into(),
        ));
    }
    Ok(())
}

/// RFC 5802: `printable = %x21-2B / %x2D-7E` (no comma), at least one.
fn check_nonce(nonce: &str) -> Result<(), ScramError> {
    if nonce.is_empty() || !nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',') {
        return Err(malformed("the nonce must be printable ASCII without commas"));
    }
    Ok(())
}

/// RFC 5802 `saslname`: UTF-8 without NUL, `,` and `=` except the escapes `=2C` and `=3D`.
pub fn saslname(escaped: &str) -> Result<String, ScramError> {
    if escaped.is_empty() {
        return Err(malformed("empty saslname"));
    }
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find(['=', '\0']) {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed("a saslname may only escape =2C and =3D")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

pub fn parse_client_final(text: &str) -> Result<ClientFinal, ScramError> {
    let (without_proof, proof) =
        text.rsplit_once(",p=").ok_or_else(|| malformed("missing the client proof (p=)"))?;
    let mut attrs = without_proof.split(',');
    let channel_binding = decode(attribute(attrs.next(), 'c', "the channel binding")?, "channel binding")?;
    let nonce = attribute(attrs.next(), 'r', "the nonce")?;
    check_nonce(nonce)?;
    for extension in attrs {
        check_extension(extension)?;
    }
    let proof = decode(proof, "proof")?;
    Ok(ClientFinal {
        channel_binding,
        nonce: nonce.to_string(),
        proof,
        without_proof: without_proof.to_string(),
    })
}

fn decode(text: &str, what: &str) -> Result<Vec<u8>, ScramError> {
    BASE64.decode(text).map_err(|_| malformed(&format!("the {what} is not base64")))
}

pub fn encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}
