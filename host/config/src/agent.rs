//! The `[agent]` section: what `gantry agent --config FILE` needs besides the node's own
//! tables, so that a joined node's whole configuration is one file (`gantry agent join`
//! writes it) and a service unit starts it with `--config` alone.
//!
//! Owns: these settings and their checks. Does not own the agent's start-up
//! (`gantry-agent`), nor the node's credential (`[cluster] node_credential`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[agent]`. Every key may be overridden by the flag of the same name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The controllers' URLs, comma-separated (`--controller`).
    pub controller: String,
    /// Where to serve the controller's calls (`--listen`; default 127.0.0.1:8421).
    pub listen: String,
    /// The node's address as the controller and other nodes reach it (`--advertise`).
    pub advertise: String,
    /// PEM file of the CA an `https://` controller is checked against (`--ca-cert`).
    pub ca_cert: Option<PathBuf>,
}

impl AgentConfig {
    /// Range checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        for url in self
            .controller
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "agent.controller must be http:// or https:// URLs, not {url:?}"
                ));
            }
        }
        if self.advertise.contains(['/', ' ']) {
            return Err("agent.advertise must be a host name or an address".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn urls_must_have_a_scheme() {
        let ok = AgentConfig {
            controller: "https://10.0.0.1:8420, https://10.0.0.2:8420".into(),
            ..Default::default()
        };
        assert!(ok.check().is_ok());
        let bad = AgentConfig {
            controller: "10.0.0.1:8420".into(),
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("agent.controller"));
    }
}
