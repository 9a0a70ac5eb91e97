//! The warning about a plain `http://` link between controller and agent, which both sides
//! print: the controller for each agent's advertised URL, the agent for the controller's.
//!
//! It stands beside the cluster protocol ([`crate::cluster`]) that both sides speak.
//!
//! Owns: deciding that a link is plain HTTP off loopback and saying so (log and stderr).
//! Does not own the `[cluster]` settings (`gantry_config::cluster`) or TLS
//! (`gantry_config::tls`).

/// Warns when an agent link (`url`) is plain HTTP to a host that is not loopback: the cluster
/// token and every launch (argv, env) would cross the network in clear text.
pub fn warn_plain_link(what: &str, url: &str) {
    let Some(rest) = url.strip_prefix("http://") else {
        return;
    };
    let host = rest.split('/').next().unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        let text = format!(
            "{what} {url} is plain http:// off loopback: the cluster token, launches and logs travel in clear text (use https:// with [tls] and ca_cert)"
        );
        tracing::warn!("{text}");
        eprintln!("WARNING: {text}");
    }
}
