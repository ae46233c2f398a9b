//! The principal of a TLS connection: its client certificate's subject DN in RFC 2253 form, as
//! Java's `X500Principal.getName()` prints it (the most specific RDN first, `CN=alice,OU=eng,O=acme`;
//! known attribute types by keyword, others as `OID=#hex`), mapped by
//! `ssl.principal.mapping.rules`. Without a certificate: `User:ANONYMOUS`, as Kafka.

use std::fmt::Write;
use std::sync::Arc;

use kafka_compat::principal::KafkaPrincipal;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

use crate::security::principal_rules::PrincipalMapper;

/// The attribute keywords RFC 2253 (and Java) print by name.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The principal for the certificate chain a client presented (its first certificate).
pub fn of_chain(
    chain: Option<&[rustls_pki_types::CertificateDer<'_>]>,
    mapper: &PrincipalMapper,
) -> Result<Arc<KafkaPrincipal>, String> {
    let Some(leaf) = chain.and_then(|c| c.first()) else { return Ok(KafkaPrincipal::anonymous()) };
    let dn = subject_dn(leaf.as_ref())?;
    Ok(Arc::new(KafkaPrincipal::user(mapper.name(&dn)?)))
}

/// The certificate's subject as RFC 2253 text.
pub fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| format!("client certificate does not parse: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn attribute(attr: &AttributeTypeAndValue<'_>) -> String {
    let oid = attr.attr_type().to_id_string();
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    match (keyword, attr.as_str()) {
        (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
        _ => format!("{oid}=#{}", hex_der(attr)),
    }
}

/// RFC 2253 §2.4 escaping, as Java applies it.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The value's DER (tag, length, content) in hex, as RFC 2253 prints unknown types.
fn hex_der(attr: &AttributeTypeAndValue<'_>) -> String {
    let value = attr.attr_value();
    let data: &[u8] = value.data;
    let mut der = vec![value.header.tag().0 as u8];
    match data.len() {
        n if n < 0x80 => der.push(n as u8),
        n => {
            let bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
            der.push(0x80 | bytes.len() as u8);
            der.extend(bytes);
        }
    }
    der.extend_from_slice(data);
    der.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc2253_escapes() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape("#x "), "\\#x\\ ");
        assert_eq!(escape("plain"), "plain");
    }
}
