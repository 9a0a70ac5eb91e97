//! Optional TLS (rustls, `ring` crypto provider) for the daemon's API and its clients.
//!
//! Server side: the `[tls]` config table ([`TlsSettings`]: `cert` and `key`, PEM files,
//! both or neither) is loaded by [`ServerTls::load`] into a rustls server config (ALPN
//! `http/1.1`), which `http_server` uses to serve HTTPS on `listen`.
//! Client side: [`trust_roots`] reads the CA / self-signed certificates a client should
//! trust (`--ca-cert` / `GANTRY_CA_CERT`), and [`client_config`] builds a rustls client
//! config from them.
//!
//! The CLI (`cli::Client`, through ureq) uses [`trust_roots`]; the agent's listener takes
//! the same `[tls]` settings through [`ServerTls::load`] and `http_server`, and the
//! controller dials agents with [`client_config`] and the same trust settings.
//!
//! Owns: reading and checking certificate and key files, rustls configs, the TLS accept
//! loop. Does not own: routing, authentication (`auth`), or the plain-HTTP path (`serve`).

mod summary;

use rustls::RootCertStore;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `[tls]` table: serve HTTPS when both files are set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsSettings {
    /// PEM file with the server certificate (then any intermediates).
    pub cert: Option<PathBuf>,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// Why TLS could not be set up; every message names the setting or flag and the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// One of `tls.cert` / `tls.key` is set without the other.
    #[error("{missing} must be set together with {set} (both or neither)")]
    Incomplete {
        /// The setting that is missing.
        missing: &'static str,
        /// The setting that is present.
        set: &'static str,
    },
    /// A file could not be read.
    #[error("{setting}: cannot read {}: {source}", path.display())]
    Read {
        /// `tls.cert`, `tls.key` or `--ca-cert`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The key file may be read by its group or others.
    #[error("tls.key: {} may be read by its group or others (mode {mode:04o}): make it private (chmod 600)", path.display())]
    ExposedKey {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A file is not valid PEM.
    #[error("{setting}: {} is not valid PEM: {message}", path.display())]
    BadPem {
        /// `tls.cert`, `tls.key` or `--ca-cert`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        message: String,
    },
    /// A file meant to hold certificates holds none.
    #[error("{setting}: {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// `tls.cert` or `--ca-cert`.
        setting: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// `tls.key` holds no private key.
    #[error("tls.key: {} holds no PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC)", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused a certificate or the certificate/key pair.
    #[error("{setting}: {message}")]
    Rejected {
        /// The setting(s) concerned.
        setting: &'static str,
        /// What rustls said.
        message: String,
    },
}

/// A loaded server certificate and key, ready to accept TLS connections.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
    summary: String,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

/// The `ring` provider, named explicitly so that no other provider compiled into the
/// binary (through some dependency's features) can make the choice ambiguous.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ServerTls {
    /// Loads `settings`: `Ok(None)` when neither file is set (plain HTTP), an error naming
    /// `tls.cert` / `tls.key` when one is missing or a file is unreadable, holds no
    /// certificate or key, or the key does not match the certificate.
    pub fn load(settings: &TlsSettings) -> Result<Option<Self>, TlsError> {
        let (cert_path, key_path) = match (&settings.cert, &settings.key) {
            (None, None) => return Ok(None),
            (Some(c), Some(k)) => (c, k),
            (Some(_), None) => {
                return Err(TlsError::Incomplete {
                    missing: "tls.key",
                    set: "tls.cert",
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::Incomplete {
                    missing: "tls.cert",
                    set: "tls.key",
                });
            }
        };
        let chain = read_certificates("tls.cert", cert_path)?;
        let key = read_key(key_path)?;
        let summary = summary::describe(cert_path, &chain[0]);
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| rejected("tls.cert", e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| rejected("tls.cert/tls.key", e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Some(Self {
            config: Arc::new(config),
            summary,
        }))
    }

    /// Which certificate is served: its file, subject, expiry and SHA-256 fingerprint.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The rustls server config.
    pub fn config(&self) -> Arc<rustls::ServerConfig> {
        self.config.clone()
    }
}

fn rejected(setting: &'static str, e: rustls::Error) -> TlsError {
    TlsError::Rejected {
        setting,
        message: e.to_string(),
    }
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        setting,
        path: path.into(),
        source,
    })
}

fn bad_pem(setting: &'static str, path: &Path, e: &pem::Error) -> TlsError {
    TlsError::BadPem {
        setting,
        path: path.into(),
        message: e.to_string(),
    }
}

/// Every certificate in the PEM file at `path` (at least one); `setting` names it in errors.
pub fn read_certificates(
    setting: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(setting, path, &e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            setting,
            path: path.into(),
        });
    }
    Ok(certs)
}

/// Reads the private key; a key its group or others may read is refused (as ssh refuses
/// one), after the file is known to hold a key.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read("tls.key", path)?;
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey { path: path.into() },
        e => bad_pem("tls.key", path, &e),
    })?;
    let exposed =
        gantry_private_files::readable_by_others(path).map_err(|source| TlsError::Read {
            setting: "tls.key",
            path: path.into(),
            source,
        })?;
    match exposed {
        Some(mode) => Err(TlsError::ExposedKey {
            path: path.into(),
            mode,
        }),
        None => Ok(key),
    }
}

/// The certificates a client trusts when `ca` is given (`--ca-cert`): every certificate in
/// the file, each checked to be usable as a trust anchor. `None` means "the built-in
/// public roots" and returns `Ok(None)`.
pub fn trust_roots(ca: Option<&Path>) -> Result<Option<Vec<CertificateDer<'static>>>, TlsError> {
    trust_roots_of("--ca-cert", ca)
}

/// Like [`trust_roots`], with errors naming `setting` (e.g. `cluster.ca_cert`).
pub fn trust_roots_of(
    setting: &'static str,
    ca: Option<&Path>,
) -> Result<Option<Vec<CertificateDer<'static>>>, TlsError> {
    let Some(path) = ca else {
        return Ok(None);
    };
    let certs = read_certificates(setting, path)?;
    let mut store = RootCertStore::empty();
    for cert in &certs {
        store.add(cert.clone()).map_err(|e| TlsError::Rejected {
            setting,
            message: format!("{}: {e}", path.display()),
        })?;
    }
    Ok(Some(certs))
}

/// The TLS settings of a ureq client (rustls) that trusts only the certificates in `ca`
/// (errors name `setting`), or the public roots when `ca` is `None`: the CLI's, the agent's
/// for its controller, and the controller's for its agents.
pub fn ureq_tls(
    setting: &'static str,
    ca: Option<&Path>,
) -> Result<ureq::tls::TlsConfig, TlsError> {
    let mut tls = ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
    if let Some(certs) = trust_roots_of(setting, ca)? {
        let certs: Vec<_> = certs
            .iter()
            .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    Ok(tls.build())
}

/// A rustls client config trusting the certificates in `ca`, or the public web PKI roots
/// when `ca` is `None`; ALPN `http/1.1`. For clients that speak rustls directly (the
/// future agent link); the CLI passes [`trust_roots`] to ureq, which builds the same.
pub fn client_config(ca: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    match trust_roots(ca)? {
        Some(certs) => {
            for cert in certs {
                roots.add(cert).map_err(|e| rejected("--ca-cert", e))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| rejected("--ca-cert", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
