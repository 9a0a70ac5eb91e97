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
//! - Who may use that etcd: it holds every job's environment and names the leader whom
//!   standbys send callers' tokens to, so the controllers must be the only clients
//!   (issue 43, finding 13). They prove it with a client certificate (`cert`, `key`) or
//!   etcd's users: `username`, with the password in `password_file` (mode 0600; its first
//!   line) or the environment variable `GANTRY_ETCD_PASSWORD`, never in this file. A
//!   controller refuses to start on an etcd that answers a client without credentials
//!   (`leadership::etcd_trust`), unless `etcd_isolated = true` says nothing else can reach
//!   it (its own network), which is announced at every start.
//!
//! Owns: these settings and their checks. Does not own the store (`gantry-store`) or the
//! election's use (`leadership.rs`).

use gantry_store::StateBackend;
use gantry_store::etcd::{EtcdConfig, Password};
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
    /// etcd user the controllers log in as.
    pub username: Option<String>,
    /// A file (mode 0600 or stricter) whose first line is that user's password.
    pub password_file: Option<PathBuf>,
    /// Nothing but the controllers can reach etcd (its own network or firewall): start even
    /// when etcd answers clients without credentials.
    pub etcd_isolated: bool,
}

/// The environment variable that may hold the etcd user's password.
pub const PASSWORD_ENV: &str = "GANTRY_ETCD_PASSWORD";

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
            username: None,
            password_file: None,
            etcd_isolated: false,
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
                if self.username.is_some() || self.password_file.is_some() || self.etcd_isolated {
                    return Err(
                        "store.username, store.password_file and store.etcd_isolated are for backend = \"etcd\"".into(),
                    );
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
                if self.password_file.is_some() && self.username.is_none() {
                    return Err("store.password_file needs store.username".into());
                }
                if self.username.as_deref().is_some_and(str::is_empty) {
                    return Err("store.username is empty".into());
                }
                Ok(())
            }
            other => Err(format!(
                "store.backend must be \"sled\" or \"etcd\", not {other:?}"
            )),
        }
    }

    /// The store's state backend (reading the etcd password when a user is configured).
    pub fn backend(&self) -> Result<StateBackend, String> {
        if !self.is_replicated() {
            return Ok(StateBackend::Sled);
        }
        Ok(StateBackend::Etcd(self.etcd()?))
    }

    /// etcd's client settings, with the user's password from `password_file` or the
    /// environment.
    pub fn etcd(&self) -> Result<EtcdConfig, String> {
        let password = match &self.username {
            None => None,
            Some(user) => Some(Password(self.password(user)?)),
        };
        Ok(EtcdConfig {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
            username: self.username.clone(),
            password,
        })
    }

    /// The password of etcd user `user`: `password_file` or [`PASSWORD_ENV`], not both.
    fn password(&self, user: &str) -> Result<String, String> {
        use gantry_store::secret_file::{from_env, read_private};
        match (&self.password_file, from_env(PASSWORD_ENV)) {
            (Some(_), Some(_)) => Err(format!(
                "store.password_file and {PASSWORD_ENV} are both set: give the password once"
            )),
            (Some(path), None) => {
                read_private("store.password_file", path).map_err(|e| e.to_string())
            }
            (None, Some(password)) => Ok(password),
            (None, None) => Err(format!(
                "store.username = {user:?} needs its password: in a file only the daemon's user may read, named by store.password_file, or in the environment variable {PASSWORD_ENV}"
            )),
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
        assert_eq!(
            StoreConfig::default().backend().unwrap(),
            StateBackend::Sled
        );
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
        assert!(matches!(ok.backend().unwrap(), StateBackend::Etcd(e) if e.prefix == "/gantry/"));
        assert!(
            err("backend = \"etcd\"\nendpoints = [\"http://a:2379\"]\npassword_file = \"/p\"")
                .contains("store.username")
        );
        assert!(err("etcd_isolated = true").contains("backend = \"etcd\""));
        assert!(toml::from_str::<StoreConfig>("endpoint = []").is_err());
    }
}
