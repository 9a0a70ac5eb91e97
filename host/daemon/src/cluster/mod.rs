//! Multi-node: the warning about a plain `http://` link to an agent (`gantry_http::plain_link`'s,
//! called from `scheduler::remote`). The
//! `[cluster]` settings are `gantry_config::cluster`'s; the wire protocol, the token check,
//! the controller's term and its HTTP client for agents are in `gantry-api` (`cluster`,
//! `cluster_token`, `cluster_term`, `agent_client`), which both sides use.
//!
//! Owns: nothing of its own yet (the call stands here until `scheduler::remote` names
//! `gantry_http` itself). Does not own the controller's node table and reactions
//! (`scheduler::members`, `scheduler::remote`), its HTTP routes (`api::cluster`) or the agent
//! process (`gantry-agent`).

/// Warns when an agent link (`url`) is plain HTTP to a host that is not loopback
/// (`gantry_http::plain_link`, which the agent calls too).
pub fn warn_plain_link(what: &str, url: &str) {
    gantry_http::plain_link::warn_plain_link(what, url);
}
