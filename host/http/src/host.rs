//! Which `Host` a request may name, and which `Origin` may send it: the defence against
//! DNS rebinding and cross-site requests from browsers.
//!
//! Rebinding: a page on `http://evil.example` whose DNS name the attacker re-points at
//! 127.0.0.1 (or at the cluster's address) reaches the daemon as "the same origin", but the
//! browser still sends `Host: evil.example`, a name the daemon does not answer to. Allowed:
//! - an IP literal equal to the local address the client connected to, or any loopback
//!   address when that one is loopback (an IP literal cannot be rebound);
//! - `localhost` and `*.localhost` on a loopback connection;
//! - this machine's host name (`/proc/sys/kernel/hostname`; set by its administrator);
//! - `[http] allowed_hosts` entries: `name` (any port), `name:port`, or `*` (no check).
//!
//! Ports of IP literals and of the implicit names are not compared: port forwarding (SSH
//! `-L`, the tests' relays, NAT) changes them legitimately, and a port gives no protection
//! against rebinding, which is about names.
//!
//! Origin: a browser names the page that sent a request in `Origin`; it must be the same
//! origin as the request (its authority equal to `Host`) or an `allowed_hosts` entry.
//!
//! Owns: parsing authorities and these rules. Does not own the HTTP answers (`checks`).

use gantry_config::authority::{Host, split};
use std::net::IpAddr;

/// One `allowed_hosts` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: Host,
    port: Option<u16>,
}

/// The names a server answers to (see the module's documentation).
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    any: bool,
    entries: Vec<Entry>,
    machine: Option<String>,
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl HostRules {
    /// Rules from `allowed_hosts` (already checked) and `extra` names (e.g. the address an
    /// agent advertises), plus this machine's host name.
    pub fn new(allowed: &[String], extra: &[String]) -> Self {
        let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|s| !s.is_empty());
        Self::with_machine(allowed, extra, machine)
    }

    fn with_machine(allowed: &[String], extra: &[String], machine: Option<String>) -> Self {
        let entries = allowed
            .iter()
            .chain(extra)
            .filter_map(|e| split(e))
            .map(|(host, port)| Entry { host, port })
            .collect();
        Self {
            any: allowed.iter().any(|e| e == "*"),
            entries,
            machine,
        }
    }

    /// Whether `authority` (a `Host` header) names this server, for a connection that
    /// reached the local address `local`.
    pub fn allows(&self, authority: &str, local: IpAddr) -> bool {
        if self.any {
            return true;
        }
        let Some((host, port)) = split(authority) else {
            return false;
        };
        let local = canonical(local);
        let implicit = match &host {
            Host::Ip(ip) => {
                let ip = canonical(*ip);
                ip == local || (ip.is_loopback() && local.is_loopback())
            }
            Host::Name(name) => {
                ((name == "localhost" || name.ends_with(".localhost")) && local.is_loopback())
                    || self.machine.as_deref() == Some(name.as_str())
            }
        };
        implicit || self.listed(&host, port)
    }

    /// Whether an `allowed_hosts` (or extra) entry names `host` at `port`.
    fn listed(&self, host: &Host, port: Option<u16>) -> bool {
        let host = match host {
            Host::Ip(ip) => Host::Ip(canonical(*ip)),
            h => h.clone(),
        };
        self.entries.iter().any(|e| {
            let same = match (&e.host, &host) {
                (Host::Ip(a), Host::Ip(b)) => canonical(*a) == *b,
                (a, b) => a == b,
            };
            same && (e.port.is_none() || e.port == port)
        })
    }

    /// Whether a request with `Host: host` (when any) may come from a page of `origin`
    /// (an `Origin` header): the same origin, or an origin listed in `allowed_hosts`.
    /// `null` (a sandboxed page, a file) never may.
    pub fn allows_origin(&self, origin: &str, host: Option<&str>) -> bool {
        if self.any {
            return true;
        }
        let Some((scheme, authority)) = origin.trim().split_once("://") else {
            return false;
        };
        if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
            return false;
        }
        let authority = authority.strip_suffix('/').unwrap_or(authority);
        let Some((o_host, o_port)) = split(authority) else {
            return false;
        };
        let same = host
            .and_then(split)
            .is_some_and(|(h, p)| h == o_host && p == o_port);
        same || self.listed(&o_host, o_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allowed: &[&str]) -> HostRules {
        let allowed: Vec<String> = allowed.iter().map(|s| (*s).to_string()).collect();
        HostRules::with_machine(&allowed, &[], Some("gpu-box".into()))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn loopback_answers_to_its_addresses_and_localhost_only() {
        let r = rules(&[]);
        let lo = ip("127.0.0.1");
        for ok in [
            "127.0.0.1:8420",
            "127.0.0.1",
            "127.0.0.1:9999",
            "localhost:8420",
            "LOCALHOST",
            "localhost.",
            "app.localhost:1",
            "[::1]:8420",
            "gpu-box:8420",
        ] {
            assert!(r.allows(ok, lo), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8420",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "10.0.0.1:8420",
            "",
            "a b",
            "user@127.0.0.1",
            "[::1",
            "127.0.0.1:99999",
            "::1",
        ] {
            assert!(!r.allows(bad, lo), "{bad}");
        }
    }

    #[test]
    fn a_wildcard_listen_answers_to_the_address_reached_and_listed_names() {
        let r = rules(&["gantry.example.org", "proxy.example.org:443", "203.0.113.5"]);
        let reached = ip("10.0.0.1");
        assert!(r.allows("10.0.0.1:8420", reached));
        assert!(r.allows("10.0.0.1:8420", ip("::ffff:10.0.0.1")));
        assert!(!r.allows("10.0.0.2:8420", reached));
        assert!(
            !r.allows("localhost:8420", reached),
            "localhost off loopback"
        );
        assert!(r.allows("Gantry.Example.Org:8420", reached));
        assert!(r.allows("proxy.example.org:443", reached));
        assert!(!r.allows("proxy.example.org:8420", reached));
        assert!(r.allows("203.0.113.5:8420", reached));
        assert!(rules(&["*"]).allows("anything.example", reached));
    }

    #[test]
    fn origins_must_be_the_same_origin_or_listed() {
        let r = rules(&["dash.example.org"]);
        let host = Some("127.0.0.1:8420");
        assert!(r.allows_origin("http://127.0.0.1:8420", host));
        assert!(r.allows_origin("https://dash.example.org", host));
        assert!(!r.allows_origin("http://127.0.0.1:3000", host));
        assert!(!r.allows_origin("http://evil.example", host));
        assert!(!r.allows_origin("null", host));
        assert!(!r.allows_origin("file://", host));
        assert!(!r.allows_origin("http://127.0.0.1:8420", None));
    }
}
