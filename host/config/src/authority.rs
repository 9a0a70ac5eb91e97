//! The authorities (`host[:port]`) that `[http] allowed_hosts` names: their parsing, shared
//! by the check of the setting here and by the daemon's `Host` and `Origin` rules
//! (`http_server/host.rs` in `gantry-server`).
//!
//! Owns: parsing an authority. Does not own which hosts a request may name (the daemon).

use std::net::{IpAddr, Ipv6Addr};

/// A parsed host: an IP literal or a lower-case name without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An IP literal (IPv6 without its brackets).
    Ip(IpAddr),
    /// A host name.
    Name(String),
}

/// Splits `host[:port]` (IPv6 in brackets) into its parts; `None` when malformed.
pub fn split(authority: &str) -> Option<(Host, Option<u16>)> {
    let a = authority.trim();
    if a.is_empty() || a.len() > 300 || a.contains(['@', '/', '\\', ' ', '\t']) {
        return None;
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let ip: Ipv6Addr = inside.parse().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        return Some((Host::Ip(IpAddr::V6(ip)), port));
    } else {
        match a.split_once(':') {
            Some((h, p)) => (h, Some(p.parse::<u16>().ok()?)),
            None => (a, None),
        }
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some((Host::Ip(ip), port));
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    valid.then_some((Host::Name(name), port))
}

/// Checks one `allowed_hosts` entry (`*`, `name` or `name:port`).
pub fn parse_entry(entry: &str) -> Result<(), String> {
    if entry == "*" {
        return Ok(());
    }
    split(entry)
        .map(|_| ())
        .ok_or_else(|| "not a host name or `name:port` (no scheme, no path)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_checked() {
        for ok in [
            "*",
            "gantry.example.org",
            "gantry.example.org:8420",
            "[::1]:1",
        ] {
            assert_eq!(parse_entry(ok), Ok(()), "{ok}");
        }
        for bad in ["http://x", "x/y", "", "x:port"] {
            assert!(parse_entry(bad).is_err(), "{bad}");
        }
    }
}
