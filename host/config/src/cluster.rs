//! The `[cluster]` section: the shared token agents and controller prove themselves with,
//! whether `gantry serve` also runs tasks on its own node, how often agents report and how
//! long a silent node stays up.
//!
//! Owns: these settings, their defaults and range checks. Does not own their use
//! (the daemon's `scheduler::remote`, `api::cluster`, `agent`, and its warning about a
//! plain `http://` link in `cluster/mod.rs`).

use serde::{Deserialize, Serialize};

/// Environment variable that overrides `cluster.token` (so the secret need not be in a file).
pub const TOKEN_ENV: &str = "GANTRY_CLUSTER_TOKEN";

/// Shortest cluster token accepted, in bytes.
pub const MIN_TOKEN_LEN: usize = 16;

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// The shared secret of controller and agents (at least 16 bytes). Empty: no agent can
    /// join (every agent request is refused with 401). `GANTRY_CLUSTER_TOKEN` wins.
    pub token: String,
    /// `gantry serve` runs tasks on its own node too (default true: one command is a
    /// one-node cluster). False: a controller only, every task runs on an agent.
    pub local_node: bool,
    /// The controller node's address for other nodes' tasks (`MASTER_ADDR` when rank 0 runs
    /// on the controller's node).
    pub advertise_addr: String,
    /// How often agents send heartbeats, ms (told to them in every reply).
    pub heartbeat_interval_ms: u64,
    /// A node whose agent has not been heard from for this long is down, ms.
    pub node_down_after_ms: u64,
    /// PEM file of the CA (or self-signed) certificates that `https://` agents, and a
    /// standby's `https://` leader (`leadership/forward.rs`), are checked against, in place
    /// of the public roots.
    pub ca_cert: Option<std::path::PathBuf>,
    /// The CA's private key (PEM, 0600), with which the controller signs the certificates
    /// of nodes that join (`gantry init` writes both; `gantry agent join`).
    pub ca_key: Option<std::path::PathBuf>,
    /// The URL nodes join at, printed in `gantry token join`'s command (`gantry init` sets
    /// it from `--advertise`).
    pub join_url: String,
    /// An agent's own credential (`gantry agent join` writes it): it speaks for this node
    /// alone. Without it an agent derives its credential from `token`.
    pub node_credential: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            token: String::new(),
            local_node: true,
            advertise_addr: "127.0.0.1".into(),
            heartbeat_interval_ms: 1000,
            node_down_after_ms: 10_000,
            ca_cert: None,
            ca_key: None,
            join_url: String::new(),
            node_credential: String::new(),
        }
    }
}

/// `GANTRY_CLUSTER_TOKEN`'s value is empty (unset) or at least [`MIN_TOKEN_LEN`] bytes.
pub fn check_env_token(value: &str) -> Result<(), String> {
    if !value.is_empty() && value.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "{TOKEN_ENV} must be at least {MIN_TOKEN_LEN} bytes (or unset), like cluster.token"
        ));
    }
    Ok(())
}

impl ClusterConfig {
    /// The token in effect: `GANTRY_CLUSTER_TOKEN` when set, else `token`.
    pub fn effective_token(&self) -> String {
        std::env::var(TOKEN_ENV)
            .ok()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| self.token.clone())
    }

    /// The credential an agent for node `node` presents: `node_credential` when set, else
    /// the one derived from the cluster token (empty when neither is set).
    pub fn agent_credential(&self, node: &str) -> String {
        if !self.node_credential.is_empty() {
            return self.node_credential.clone();
        }
        gantry_api::cluster_token::node_credential(&self.effective_token(), node)
    }

    /// Range checks; the message names the key. The token's minimum length holds for
    /// `GANTRY_CLUSTER_TOKEN` as for `cluster.token`.
    pub fn check(&self) -> Result<(), String> {
        if !self.token.is_empty() && self.token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "cluster.token must be at least {MIN_TOKEN_LEN} bytes (or empty: no agents)"
            ));
        }
        if !self.node_credential.is_empty()
            && !self
                .node_credential
                .starts_with(gantry_api::cluster_token::NODE_CREDENTIAL_PREFIX)
        {
            return Err(
                "cluster.node_credential must be one `gantry agent join` wrote (gnc_...)".into(),
            );
        }
        let from_env = std::env::var(TOKEN_ENV).unwrap_or_default();
        check_env_token(&from_env)?;
        self.check_timing()
    }

    fn check_timing(&self) -> Result<(), String> {
        if !(50..=60_000).contains(&self.heartbeat_interval_ms) {
            return Err("cluster.heartbeat_interval_ms must be 50..=60000".into());
        }
        if self.node_down_after_ms < 2 * self.heartbeat_interval_ms
            || self.node_down_after_ms > 3_600_000
        {
            return Err(
                "cluster.node_down_after_ms must be at least twice cluster.heartbeat_interval_ms and at most 3600000"
                    .into(),
            );
        }
        if self.advertise_addr.trim().is_empty() {
            return Err("cluster.advertise_addr must not be empty".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_their_key() {
        assert!(ClusterConfig::default().check().is_ok());
        let short = ClusterConfig {
            token: "short".into(),
            ..Default::default()
        };
        assert!(short.check().unwrap_err().contains("cluster.token"));
        let hasty = ClusterConfig {
            node_down_after_ms: 1500,
            ..Default::default()
        };
        assert!(hasty.check().unwrap_err().contains("node_down_after_ms"));
    }

    #[test]
    fn a_short_token_in_the_environment_is_refused_too() {
        assert!(check_env_token("").is_ok());
        assert!(check_env_token("0123456789abcdef").is_ok());
        assert!(check_env_token("short").unwrap_err().contains(TOKEN_ENV));
    }
}
