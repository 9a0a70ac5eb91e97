//! Joining a node to the cluster (`gantry agent join`), on the wire: the two controller routes
//! an agent calls before it has any credential, and their bodies.
//!
//! 1. `GET /cluster/v1/join/ca` ([`JOIN_CA_PATH`]): the cluster CA's certificate (PEM),
//!    public. The joining node fetches it without checking the server, then checks it
//!    against the `--ca-hash` the administrator copied from `gantry init` (`sha256:` of the
//!    certificate's DER), as `kubeadm join --discovery-token-ca-cert-hash` does. From then on
//!    it trusts that CA only.
//! 2. `POST /cluster/v1/join` ([`JOIN_PATH`], [`JoinRequest`] → [`JoinReply`]), over TLS
//!    checked against that CA: the join token (single-purpose, short-lived, a bounded number
//!    of uses) buys the node its credential and a server certificate for its agent.
//!
//! Owns: these types and paths. Does not own the token's format or store
//! (`gantry-enrol`), the controller's checks (`gantry-controller`'s `enrolment`) or either
//! command.

use serde::{Deserialize, Serialize};

/// The CA certificate, unauthenticated.
pub const JOIN_CA_PATH: &str = "/cluster/v1/join/ca";
/// A join.
pub const JOIN_PATH: &str = "/cluster/v1/join";

/// Node → controller: join me.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JoinRequest {
    /// The join token, `gjt_<id>.<secret>`.
    pub token: String,
    /// The node's name in the cluster (unique; the host name by default).
    pub node: String,
    /// Names and addresses the controller reaches the agent at (its certificate's
    /// subject alternative names), at most 16.
    pub addresses: Vec<String>,
    /// The node's Gantry version.
    pub version: String,
    /// The node's protocol version.
    pub protocol: u32,
}

/// Controller → node: what the agent needs to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinReply {
    /// The node's name, as accepted.
    pub node: String,
    /// The node's credential (`cluster_token::node_credential`): its agent's bearer token.
    pub credential: String,
    /// The agent's server certificate (PEM), signed by the cluster CA.
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The controller's Gantry version.
    pub controller_version: String,
}

/// A join token as `gantry token list` shows it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinTokenView {
    /// The public part, `gjt_<id>.` (what `gantry token revoke` takes).
    pub id: String,
    /// `valid`, `expired`, `used` or `revoked`.
    pub state: String,
    /// Made, ms since the epoch.
    pub created_ms: u64,
    /// Expires, ms since the epoch.
    pub expires_ms: u64,
    /// Nodes it may still join.
    pub uses_left: u32,
    /// Nodes that joined with it.
    pub used_by: Vec<String>,
    /// Who made it.
    pub created_by: String,
}

/// `POST /v1/join-tokens`: a new join token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinTokenRequest {
    /// How long it is valid, seconds (60 to 604800; default 3600).
    #[serde(default = "default_ttl_s")]
    pub ttl_s: u64,
    /// How many nodes may join with it (1 to 1000; default 1).
    #[serde(default = "default_uses")]
    pub uses: u32,
}

fn default_ttl_s() -> u64 {
    3600
}

fn default_uses() -> u32 {
    1
}

/// The answer to [`JoinTokenRequest`]: the token (shown once) and the command to run on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinTokenCreated {
    /// The token, `gjt_<id>.<secret>`: shown once, never stored.
    pub token: String,
    /// What was stored.
    pub view: JoinTokenView,
    /// `gantry agent join URL --token T --ca-hash H`, when `[cluster] join_url` and the CA
    /// are configured.
    pub command: Option<String>,
}

/// The command a node runs to join.
pub fn join_command(url: &str, token: &str, ca_hash: &str) -> String {
    format!("gantry agent join {url} --token {token} --ca-hash {ca_hash}")
}
