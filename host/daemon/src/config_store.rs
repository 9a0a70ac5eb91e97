//! The `[store]` section of the configuration: where the controller keeps its active state
//! (the jobs it holds, pipeline versions and plugin components, nodes, services, counters).
//!
//! - `backend = "sled"` (the default): an embedded database under the data directory, for
//!   one controller.
//! - `backend = "etcd"` with `endpoints = ["http://10.0.0.1:2379", ...]`: etcd v3, shared
//!   by two or three `gantry serve` processes of which one leads (`leadership.rs`); `ca`,
//!   `cert` and `key` (PEM files) for etcd's TLS with client certificates; `prefix`
//!   (default `/gantry/`) to share one etcd between clusters; `name` (default the host
//!   name) and `advertise_url` (the URL others reach this controller's API at; default
//!   from `listen`) say who leads; `lease_s` (default 5, 2..=60) is how long a leader that
//!   stopped renewing keeps leading, so a standby takes over within about that long.
//!
//! Owns: these settings and their checks. Does not own the store (`gantry-store`) or the
//! election's use (`leadership.rs`).

use gantry_store::StateBackend;
use gantry_store::etcd::EtcdConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the active state lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `sled` (default) or `etcd`.
    pub backend: String,
    /// etcd's client URLs.
    pub endpoints: Vec<String>,
    /// Key prefix in etcd.
    pub prefix: String,
    /// This controller's name in the election (default: the host name).
    pub name: Option<String>,
    /// The URL others reach this controller's API at (default: from `listen`).
    pub advertise_url: Option<String>,
    /// Seconds a leader's lease lasts without renewal.
    pub lease_s: u64,
    /// CA certificate (PEM) of etcd's members.
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM) for etcd.
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub key: Option<PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: "sled".into(),
            endpoints: Vec::new(),
            prefix: "/gantry/".into(),
            name: None,
            advertise_url: None,
            lease_s: 5,
            ca: None,
            cert: None,
            key: None,
        }
    }
}

impl StoreConfig {
    /// Whether several controllers share this state (one leads).
    pub fn is_replicated(&self) -> bool {
        self.backend == "etcd"
    }

    /// Consistency checks, as messages naming the key.
    pub fn check(&self) -> Result<(), String> {
        match self.backend.as_str() {
            "sled" => {
                if !self.endpoints.is_empty() {
                    return Err("store.endpoints is for backend = \"etcd\"".into());
                }
                Ok(())
            }
            "etcd" => {
                if self.endpoints.is_empty() {
                    return Err("store.endpoints is required with backend = \"etcd\"".into());
                }
                if let Some(bad) = self
                    .endpoints
                    .iter()
                    .find(|e| !(e.starts_with("http://") || e.starts_with("https://")))
                {
                    return Err(format!(
                        "store.endpoints: {bad:?} is not an http:// or https:// URL"
                    ));
                }
                if !self.prefix.starts_with('/') || !self.prefix.ends_with('/') {
                    return Err("store.prefix must begin and end with /".into());
                }
                if !(2..=60).contains(&self.lease_s) {
                    return Err("store.lease_s must be 2..=60".into());
                }
                if self.cert.is_some() != self.key.is_some() {
                    return Err("store.cert and store.key go together".into());
                }
                Ok(())
            }
            other => Err(format!(
                "store.backend must be \"sled\" or \"etcd\", not {other:?}"
            )),
        }
    }

    /// The store's state backend.
    pub fn backend(&self) -> StateBackend {
        if !self.is_replicated() {
            return StateBackend::Sled;
        }
        StateBackend::Etcd(self.etcd())
    }

    /// etcd's client settings.
    pub fn etcd(&self) -> EtcdConfig {
        EtcdConfig {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }

    /// This controller's name: `name`, else the host name.
    pub fn controller_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "controller".into())
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_to_sled_and_names_the_key_of_each_mistake() {
        assert_eq!(StoreConfig::default().backend(), StateBackend::Sled);
        StoreConfig::default().check().unwrap();
        let parse = |t: &str| toml::from_str::<StoreConfig>(t).unwrap();
        let err = |t: &str| parse(t).check().unwrap_err();
        assert!(err("backend = \"consul\"").contains("store.backend"));
        assert!(err("backend = \"etcd\"").contains("store.endpoints is required"));
        assert!(err("backend = \"etcd\"\nendpoints = [\"10.0.0.1:2379\"]").contains("http://"));
        assert!(
            err("backend = \"etcd\"\nendpoints = [\"http://a:2379\"]\nlease_s = 1")
                .contains("lease_s")
        );
        assert!(err("endpoints = [\"http://a:2379\"]").contains("backend = \"etcd\""));
        let ok = parse("backend = \"etcd\"\nendpoints = [\"http://a:2379\"]\nname = \"c1\"");
        ok.check().unwrap();
        assert_eq!(ok.controller_name(), "c1");
        assert!(matches!(ok.backend(), StateBackend::Etcd(e) if e.prefix == "/gantry/"));
        assert!(toml::from_str::<StoreConfig>("endpoint = []").is_err());
    }
}
