//! Nodes joining and join tokens, the controller's side: `POST /cluster/v1/join` spends a
//! join token (`gantry_enrol::join_token`) for a node name that no live node has, and
//! answers with the node's credential (derived from the cluster token,
//! `gantry_api::cluster_token::node_credential`) and an agent certificate signed by the
//! cluster CA (`[cluster] ca_cert` and `ca_key`, `gantry_enrol::pki`). Administrators make,
//! list and revoke tokens through [`JoinTokenAction`].
//!
//! Owns: the checks of a join and the token actions' answers. Does not own the tokens' store
//! writes (`gantry_enrol::join_token`, their one writer), the routes (the server's
//! `api::cluster_join`, `api::join_tokens`) or membership (`members.rs`: a joined node
//! becomes a member at its first heartbeat).

use super::{Scheduler, lock, now_ms};
use gantry_api::cluster::{OLDEST_PROTOCOL, PROTOCOL_VERSION};
use gantry_api::cluster_join::{
    JoinReply, JoinRequest, JoinTokenCreated, JoinTokenView, join_command,
};
use gantry_enrol::join_token::{self, JoinRefusal, MakeError};
use gantry_enrol::pki::{ClusterCa, MAX_NAMES, PkiError};

/// Why a join, or a token action, was refused.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The token was refused.
    #[error("{0}")]
    Token(#[from] JoinRefusal),
    /// A live node, or the controller's own, has the name.
    #[error(
        "node name {0} is taken by a node of this cluster: join with another --name, or remove that node first (gantry remove-node)"
    )]
    NameTaken(String),
    /// A malformed request.
    #[error("{message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// Another protocol.
    #[error(
        "this node speaks protocol {0}; this controller speaks {OLDEST_PROTOCOL} to {PROTOCOL_VERSION}"
    )]
    Protocol(u32),
    /// The controller was not set up for joins.
    #[error(
        "this controller cannot take joins: {0} (run `gantry init`, or set it in the configuration)"
    )]
    NotSetUp(&'static str),
    /// The CA could not be read or used.
    #[error("the cluster CA: {0}")]
    Pki(#[from] PkiError),
    /// The store failed.
    #[error("{0}")]
    Store(#[from] gantry_store::StoreError),
}

impl From<MakeError> for JoinError {
    fn from(e: MakeError) -> Self {
        match e {
            MakeError::Store(s) => Self::Store(s),
            MakeError::Random(io) => Self::Store(gantry_store::StoreError::Directory(io)),
        }
    }
}

/// What an administrator asks of join tokens.
#[derive(Debug, Clone)]
pub enum JoinTokenAction {
    /// A new token.
    Create {
        /// Validity, seconds.
        ttl_s: u64,
        /// Nodes it may join.
        uses: u32,
        /// Who asks.
        by: String,
    },
    /// Every token.
    List,
    /// Revoke one by id.
    Revoke(String),
}

/// A step of a join: the CA a node checks first (none configured: `None`), or the join's
/// answer.
#[derive(Debug, Clone)]
pub enum JoinStep {
    /// The CA certificate, PEM.
    Ca(Option<String>),
    /// Joined.
    Joined(Box<JoinReply>),
}

/// The answer to a [`JoinTokenAction`].
#[derive(Debug, Clone)]
pub enum JoinTokenAnswer {
    /// Made.
    Created(JoinTokenCreated),
    /// Listed.
    Listed(Vec<JoinTokenView>),
    /// Whether one was revoked.
    Revoked(bool),
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

fn is_loopback(address: &str) -> bool {
    address == "localhost"
        || address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn valid_address(a: &str) -> bool {
    !a.is_empty() && a.len() <= 253 && !a.contains([' ', '/', '@', '\\', ','])
}

impl Scheduler {
    fn cluster_ca(&self) -> Result<ClusterCa, JoinError> {
        let cluster = &self.inner.config.cluster;
        let cert = cluster
            .ca_cert
            .as_deref()
            .ok_or(JoinError::NotSetUp("no [cluster] ca_cert"))?;
        let key = cluster
            .ca_key
            .as_deref()
            .ok_or(JoinError::NotSetUp("no [cluster] ca_key"))?;
        Ok(ClusterCa::load(cert, key)?)
    }

    /// The names and addresses the controller answers by (lower case, without ports).
    fn controller_names(&self) -> Vec<String> {
        let config = &self.inner.config;
        let mut names: Vec<String> = config
            .http
            .allowed_hosts
            .iter()
            .filter_map(|h| gantry_config::authority::split(h))
            .map(|(host, _)| match host {
                gantry_config::authority::Host::Ip(ip) => ip.to_string(),
                gantry_config::authority::Host::Name(n) => n,
            })
            .collect();
        names.push(config.cluster.advertise_addr.to_ascii_lowercase());
        let join = config.cluster.join_url.trim_start_matches("https://");
        if let Some((host, _)) =
            gantry_config::authority::split(join.split('/').next().unwrap_or(""))
        {
            names.push(match host {
                gantry_config::authority::Host::Ip(ip) => ip.to_string(),
                gantry_config::authority::Host::Name(n) => n,
            });
        }
        names
    }

    /// The CA certificate nodes fetch before they join (PEM), if one is configured.
    pub(crate) fn join_ca_pem(&self) -> Option<String> {
        let path = self.inner.config.cluster.ca_cert.as_deref()?;
        std::fs::read_to_string(path).ok()
    }

    /// A node's join: checks, spends the token, issues its credential and certificate.
    pub(crate) fn join(&self, request: JoinRequest) -> Result<JoinReply, JoinError> {
        if !(OLDEST_PROTOCOL..=PROTOCOL_VERSION).contains(&request.protocol) {
            return Err(JoinError::Protocol(request.protocol));
        }
        if !valid_name(&request.node) {
            return Err(JoinError::Invalid {
                field: "node",
                message: "a node name is 1-64 letters, digits, '-', '.' or '_'".into(),
            });
        }
        if request.addresses.is_empty()
            || request.addresses.len() > MAX_NAMES
            || !request.addresses.iter().all(|a| valid_address(a))
        {
            return Err(JoinError::Invalid {
                field: "addresses",
                message: format!("1 to {MAX_NAMES} host names or addresses"),
            });
        }
        if self.inner.cluster_token.is_empty() {
            return Err(JoinError::NotSetUp("no [cluster] token"));
        }
        let ca = self.cluster_ca()?;
        {
            let members = lock(&self.inner.members);
            if members.by_name(&request.node).is_some() {
                return Err(JoinError::NameTaken(request.node));
            }
            // A node's certificate is signed by the CA agents check the controller with: it
            // must not be valid for the controller's names, nor for another node's address
            // (a token holder could then answer in their place). Loopback is exempt: only
            // this machine reaches it, and one-machine clusters use it for every process.
            let controller = self.controller_names();
            for address in &request.addresses {
                let bare = address.trim_matches(['[', ']']).to_ascii_lowercase();
                if is_loopback(&bare) {
                    continue;
                }
                if controller.contains(&bare) {
                    return Err(JoinError::Invalid {
                        field: "addresses",
                        message: format!(
                            "{address} is the controller's name: a node's certificate cannot be for it"
                        ),
                    });
                }
                if let Some((_, other)) = members
                    .all()
                    .find(|(_, m)| m.addr.eq_ignore_ascii_case(&bare))
                {
                    return Err(JoinError::Invalid {
                        field: "addresses",
                        message: format!("{address} is node {}'s address", other.info.name),
                    });
                }
            }
        }
        let now = now_ms();
        let spent = join_token::consume(&self.inner.store, &request.token, &request.node, now)??;
        let (cert_pem, key_pem) = ca.issue(&request.node, &request.addresses)?;
        let message = format!(
            "node {} joined with join token {}{} (gantry {}, protocol {})",
            request.node,
            join_token::PREFIX,
            spent.id,
            request.version,
            request.protocol
        );
        tracing::info!("{message}");
        let _ = self.inner.store.event(now, None, "node", message);
        Ok(JoinReply {
            credential: gantry_api::cluster_token::node_credential(
                &self.inner.cluster_token,
                &request.node,
            ),
            node: request.node,
            cert_pem,
            key_pem,
            ca_pem: ca.cert_pem().to_string(),
            controller_version: gantry_api::cluster::GANTRY_VERSION.to_string(),
        })
    }

    /// Makes, lists or revokes join tokens.
    pub(crate) fn join_tokens(
        &self,
        action: JoinTokenAction,
    ) -> Result<JoinTokenAnswer, JoinError> {
        let store = &self.inner.store;
        let now = now_ms();
        match action {
            JoinTokenAction::Create { ttl_s, uses, by } => {
                let hash = self.cluster_ca()?.hash()?;
                let (token, record) = join_token::create(store, ttl_s, uses, &by, now)??;
                let url = &self.inner.config.cluster.join_url;
                Ok(JoinTokenAnswer::Created(JoinTokenCreated {
                    command: (!url.is_empty()).then(|| join_command(url, &token, &hash)),
                    token,
                    view: record.view(now),
                }))
            }
            JoinTokenAction::List => Ok(JoinTokenAnswer::Listed(
                join_token::list(store)?
                    .iter()
                    .map(|t| t.view(now))
                    .collect(),
            )),
            JoinTokenAction::Revoke(id) => {
                Ok(JoinTokenAnswer::Revoked(join_token::revoke(store, &id)?))
            }
        }
    }
}
