//! The `[http]` table: which `Host` names the API answers to besides its own address, and
//! the bounds on connections and streams that keep one client from exhausting the daemon.
//!
//! Owns: the settings, their defaults and range checks. Does not own applying them (the
//! daemon's accept loop in `http_server`, the guards in `checks`, the stream caps in `api`,
//! the grouping of addresses into callers in `http_server/limits.rs`).

use serde::{Deserialize, Serialize};

/// The `[http]` table (the same for `gantry serve` and `gantry agent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// Host names clients may reach the daemon by (the `Host` header), besides the address
    /// they connected to, `localhost` on loopback and this machine's host name: `name`
    /// (any port), `name:port`, or `*` (no Host check at all). Anything else is refused
    /// with 421, a defence against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Open connections at most (default 1024); more are answered 503 and closed.
    pub max_connections: usize,
    /// Open connections from one caller at most (default 256): the whole loopback range is
    /// one caller, remote addresses are grouped by `caller_prefix_v4` / `caller_prefix_v6`.
    pub max_connections_per_ip: usize,
    /// Leading bits of an IPv4 address that name one caller for the limits (8..=32, default
    /// 32: each address).
    pub caller_prefix_v4: u8,
    /// Leading bits of an IPv6 address that name one caller for the limits (16..=128,
    /// default 64: one host's usual allocation).
    pub caller_prefix_v6: u8,
    /// Seconds a client has to send a request's headers, on a new connection and between
    /// requests on a kept-alive one (default 15).
    pub header_read_timeout_s: u64,
    /// Seconds a connection may stay silent, no byte read or written and no request being
    /// handled, before it is closed; a request body that stalls this long fails (default
    /// 60; at least 20, above the 15 s keep-alive of `/v1/stream`).
    pub idle_timeout_s: u64,
    /// Open `/v1/stream` and `/v1/jobs/{id}/attach` streams per caller (a token, or an IP
    /// address without tokens) at most (default 32); more are refused with 429.
    pub max_streams_per_caller: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            max_connections: 1024,
            max_connections_per_ip: 256,
            caller_prefix_v4: 32,
            caller_prefix_v6: 64,
            header_read_timeout_s: 15,
            idle_timeout_s: 60,
            max_streams_per_caller: 32,
        }
    }
}

/// Most `allowed_hosts` entries.
const MAX_HOSTS: usize = 256;

impl HttpSettings {
    /// Range checks; the message names the key.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=65_536).contains(&self.max_connections) {
            return Err("http.max_connections must be 1..=65536".into());
        }
        if self.max_connections_per_ip == 0 || self.max_connections_per_ip > self.max_connections {
            return Err("http.max_connections_per_ip must be 1..=http.max_connections".into());
        }
        if !(8..=32).contains(&self.caller_prefix_v4) {
            return Err("http.caller_prefix_v4 must be 8..=32".into());
        }
        if !(16..=128).contains(&self.caller_prefix_v6) {
            return Err("http.caller_prefix_v6 must be 16..=128".into());
        }
        if !(1..=3600).contains(&self.header_read_timeout_s) {
            return Err("http.header_read_timeout_s must be 1..=3600".into());
        }
        if !(20..=86_400).contains(&self.idle_timeout_s) {
            return Err("http.idle_timeout_s must be 20..=86400".into());
        }
        if !(1..=4096).contains(&self.max_streams_per_caller) {
            return Err("http.max_streams_per_caller must be 1..=4096".into());
        }
        if self.allowed_hosts.len() > MAX_HOSTS {
            return Err(format!(
                "http.allowed_hosts may list at most {MAX_HOSTS} names"
            ));
        }
        for (i, entry) in self.allowed_hosts.iter().enumerate() {
            crate::authority::parse_entry(entry)
                .map_err(|why| format!("http.allowed_hosts[{i}] ({entry:?}): {why}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_each_bound_names_its_key() {
        assert_eq!(HttpSettings::default().check(), Ok(()));
        let bad = |f: fn(&mut HttpSettings), key: &str| {
            let mut s = HttpSettings::default();
            f(&mut s);
            let e = s.check().expect_err(key);
            assert!(e.contains(key), "{e}");
        };
        bad(|s| s.max_connections = 0, "http.max_connections");
        bad(
            |s| s.max_connections_per_ip = 2000,
            "http.max_connections_per_ip",
        );
        bad(
            |s| s.header_read_timeout_s = 0,
            "http.header_read_timeout_s",
        );
        bad(|s| s.idle_timeout_s = 5, "http.idle_timeout_s");
        bad(
            |s| s.max_streams_per_caller = 0,
            "http.max_streams_per_caller",
        );
        bad(
            |s| s.allowed_hosts = vec!["http://x.example".into()],
            "http.allowed_hosts[0]",
        );
    }
}
