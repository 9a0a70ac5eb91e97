//! The cluster's certificate authority: made once by `gantry init`, it signs the
//! controller's server certificate and each joined node's agent certificate, and a node
//! finds it by its hash (`sha256:` of the certificate's DER), which the administrator copies
//! from `gantry init`'s output to each `gantry agent join`.
//!
//! Owns: making and loading the CA, issuing server certificates, [`ca_hash`]. Does not own
//! where the files go (`init`, `join`) or the TLS settings that read them
//! (`gantry_config::tls`).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use sha2::{Digest, Sha256};
use std::net::IpAddr;
use std::path::Path;

/// The CA's common name.
pub const CA_NAME: &str = "Gantry cluster CA";
/// Years a CA is valid.
const CA_YEARS: i32 = 10;
/// Years a node's or the controller's certificate is valid.
const LEAF_YEARS: i32 = 3;
/// Most names in one certificate.
pub const MAX_NAMES: usize = 16;

/// What went wrong with a certificate.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// Which.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not a certificate or key, or one rcgen cannot use.
    #[error("{what}: {message}")]
    Invalid {
        /// What was being read or made.
        what: String,
        /// Why it failed.
        message: String,
    },
}

fn invalid(what: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |e| PkiError::Invalid {
        what: what.to_string(),
        message: e.to_string(),
    }
}

/// A CA: its certificate and key.
pub struct ClusterCa {
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa").finish_non_exhaustive()
    }
}

fn this_year() -> i32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    1970 + i32::try_from(secs / 31_556_952).unwrap_or(0)
}

impl ClusterCa {
    /// A new CA (ECDSA P-256), valid for ten years.
    pub fn generate() -> Result<Self, PkiError> {
        let key = KeyPair::generate().map_err(invalid("a CA key"))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, CA_NAME);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let year = this_year();
        params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(year + CA_YEARS, 1, 1);
        let cert = params.self_signed(&key).map_err(invalid("the CA"))?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// The CA in `cert` and `key` (PEM files).
    pub fn load(cert: &Path, key: &Path) -> Result<Self, PkiError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| PkiError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let ca = Self {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        };
        ca.issuer()?;
        Ok(ca)
    }

    /// The certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, PkiError> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(invalid("the CA key"))?;
        Issuer::from_ca_cert_pem(&self.cert_pem, key).map_err(invalid("the CA certificate"))
    }

    /// A server (and client) certificate for `common_name` valid for `names` (host names or
    /// IP addresses), and its new key: (certificate PEM, key PEM).
    pub fn issue(&self, common_name: &str, names: &[String]) -> Result<(String, String), PkiError> {
        if names.is_empty() || names.len() > MAX_NAMES {
            return Err(PkiError::Invalid {
                what: "a certificate's names".into(),
                message: format!("1 to {MAX_NAMES} names, not {}", names.len()),
            });
        }
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        for name in names {
            let san = match name.trim_matches(['[', ']']).parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.as_str().try_into().map_err(invalid(name))?),
            };
            params.subject_alt_names.push(san);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        let year = this_year();
        params.not_before = rcgen::date_time_ymd(year - 1, 1, 1);
        params.not_after = rcgen::date_time_ymd(year + LEAF_YEARS, 1, 1);
        let key = KeyPair::generate().map_err(invalid("a key"))?;
        let cert = params
            .signed_by(&key, &self.issuer()?)
            .map_err(invalid("a certificate"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// This CA's hash, as [`ca_hash`].
    pub fn hash(&self) -> Result<String, PkiError> {
        ca_hash(&self.cert_pem)
    }
}

/// `sha256:` and the hex SHA-256 of the DER of the first certificate in `pem`.
pub fn ca_hash(pem: &str) -> Result<String, PkiError> {
    let der = first_der(pem)?;
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(der))))
}

/// The DER of the first certificate in `pem`.
pub fn first_der(pem: &str) -> Result<Vec<u8>, PkiError> {
    let bad = |message: &str| PkiError::Invalid {
        what: "a CA certificate".into(),
        message: message.into(),
    };
    let begin = "-----BEGIN CERTIFICATE-----";
    let start = pem.find(begin).ok_or_else(|| bad("no PEM certificate"))? + begin.len();
    let end = pem[start..]
        .find("-----END CERTIFICATE-----")
        .ok_or_else(|| bad("an unterminated PEM certificate"))?;
    let text: String = pem[start..start + end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| bad("bad base64 in the certificate"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_ca_signs_certificates_for_names_and_addresses_and_has_a_stable_hash() {
        let ca = ClusterCa::generate().unwrap();
        let hash = ca.hash().unwrap();
        assert!(
            hash.starts_with("sha256:") && hash.len() == 7 + 64,
            "{hash}"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.cert_pem()).unwrap();
        std::fs::write(dir.path().join("ca.key"), ca.key_pem()).unwrap();
        let again =
            ClusterCa::load(&dir.path().join("ca.pem"), &dir.path().join("ca.key")).unwrap();
        assert_eq!(again.hash().unwrap(), hash);
        let (cert, key) = again
            .issue("node-a", &["127.0.0.1".into(), "node-a.example".into()])
            .unwrap();
        assert!(cert.contains("BEGIN CERTIFICATE") && key.contains("PRIVATE KEY"));
        assert_ne!(ca_hash(&cert).unwrap(), hash);
        assert!(again.issue("none", &[]).is_err());
        assert!(ca_hash("not a certificate").is_err());
        let other = ClusterCa::generate().unwrap();
        assert_ne!(other.hash().unwrap(), hash);
    }
}
