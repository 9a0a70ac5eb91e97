//! `[services]`: the endpoints of replicated services (a shared gateway, connection
//! bounds, how long a request to a service scaled to zero waits).
//!
//! Owns: these settings and their checks. Does not own the endpoints
//! (`service_endpoint.rs`).

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// `[services]`: the endpoints of replicated services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServicesConfig {
    /// One address (`IP:PORT`) where `/NAME/...` reaches service NAME (none by default).
    pub gateway: Option<String>,
    /// Most connections one endpoint serves at once (default 1024).
    pub max_connections: usize,
    /// How long a request to a service scaled to zero waits for its first replica,
    /// seconds (default 120).
    pub activation_timeout_s: u64,
}

impl Default for ServicesConfig {
    fn default() -> Self {
        Self {
            gateway: None,
            max_connections: 1024,
            activation_timeout_s: 120,
        }
    }
}

impl ServicesConfig {
    /// Checks the values; an error names the key.
    pub fn check(&self) -> Result<(), String> {
        if let Some(g) = &self.gateway {
            g.parse::<SocketAddr>()
                .map_err(|e| format!("services.gateway: {g:?} is not IP:PORT: {e}"))?;
        }
        if self.max_connections == 0 || self.max_connections > 1_000_000 {
            return Err("services.max_connections: must be 1..=1000000".into());
        }
        if self.activation_timeout_s == 0 || self.activation_timeout_s > 3600 {
            return Err("services.activation_timeout_s: must be 1..=3600".into());
        }
        Ok(())
    }
}
