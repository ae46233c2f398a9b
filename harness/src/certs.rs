//! A test PKI for the SSL and SASL_SSL listener tests: a CA, server certificates for
//! 127.0.0.1/localhost, and client certificates with a chosen subject, generated with rcgen
//! and written as PEM files into a directory (the broker reads PEM keystores and truststores;
//! librdkafka and the Java client read the same files).

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, SanType,
};

/// A CA and the files it signed, under `dir`.
pub struct TestPki {
    dir: PathBuf,
    ca: Certificate,
    ca_key: KeyPair,
}

/// A client certificate's two PEM files.
#[derive(Debug, Clone)]
pub struct ClientFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestPki {
    /// A new CA named `ca_name`, its certificate written to `dir/<ca_name>.pem`.
    pub fn new(dir: &Path, ca_name: &str) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name =
            dn(&[(DnType::CommonName, ca_name), (DnType::OrganizationName, "onelog tests")]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate()?;
        let ca = params.self_signed(&ca_key)?;
        std::fs::write(dir.join(format!("{ca_name}.pem")), ca.pem())?;
        Ok(TestPki { dir: dir.to_path_buf(), ca, ca_key })
    }

    /// The CA certificate (a truststore).
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// Writes the CA certificate to `name` under the directory, and returns the path.
    pub fn write_ca(&self, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        std::fs::write(&path, self.ca.pem())?;
        Ok(path)
    }

    /// A server certificate for 127.0.0.1 and localhost with subject `CN=<cn>`, written with
    /// its private key into one PEM file `name` (a keystore); returns the path.
    pub fn server_keystore(&self, name: &str, cn: &str) -> Result<PathBuf> {
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name = dn(&[(DnType::CommonName, cn)]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca, &self.ca_key)?;
        let path = self.dir.join(name);
        std::fs::write(&path, format!("{}{}", cert.pem(), key.serialize_pem()))?;
        Ok(path)
    }

    /// A node's certificate for the Raft port's mutual TLS: subject `CN=<cn>`, valid as a
    /// server's and as a client's (a node is both to its peers), for 127.0.0.1 and localhost,
    /// written with its private key into one PEM file `name` (a keystore); returns the path.
    pub fn node_keystore(&self, name: &str, cn: &str) -> Result<PathBuf> {
        let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
        params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name = dn(&[(DnType::CommonName, cn)]);
        params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca, &self.ca_key)?;
        let path = self.dir.join(name);
        std::fs::write(&path, format!("{}{}", cert.pem(), key.serialize_pem()))?;
        Ok(path)
    }

    /// A client certificate whose subject is `subject` (most significant first, e.g.
    /// `[(O, "acme"), (OU, "eng"), (CN, "alice")]`, printed by Java as `CN=alice,OU=eng,O=acme`),
    /// as `<name>.crt` and `<name>.key`.
    pub fn client(&self, name: &str, subject: &[(DnType, &str)]) -> Result<ClientFiles> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = dn(subject);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.ca, &self.ca_key)?;
        let files = ClientFiles {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem())?;
        std::fs::write(&files.key, key.serialize_pem())?;
        Ok(files)
    }
}

fn dn(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for (kind, value) in parts {
        dn.push(kind.clone(), *value);
    }
    dn
}
