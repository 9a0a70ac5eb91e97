//! The agent's reports to the controller: a [`Heartbeat`] (node inventory, GPU faults, load,
//! running tasks, unacknowledged ends) on start and then every interval the controller sets,
//! and what its reply asks (forget acknowledged ends, stop unwanted tasks).
//!
//! A controller that cannot be reached is retried forever (warned once per outage), the
//! next of `--controller`'s comma-separated URLs each time, so an agent follows the leader
//! of several controllers (a standby answers 503); one that refuses the agent (401/403:
//! wrong token; 409: another protocol or a node name already taken) ends the agent with the
//! controller's reason. A reply of a term below the highest the agent has seen
//! (`gantry_api::cluster_term`) is ignored: it comes from a controller that no longer leads.
//!
//! Owns: the HTTP client of the controller, the loop and the node's load. Does not own the
//! task table (`tasks`) or the protocol (`gantry_api::cluster`).

use super::tasks::{TaskTable, lock};
use gantry_api::cluster::{
    HEARTBEAT_PATH, Heartbeat, HeartbeatReply, NODE_HEADER, NodeLoad, PROTOCOL_VERSION,
    PeerVersion, ProtoError,
};
use gantry_api::cluster_term::Highest;
use gantry_node::inventory::NodeInfo;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Interval until the controller names one, ms.
pub(crate) const FIRST_INTERVAL_MS: u64 = 1000;

/// Deadline of one heartbeat call.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a heartbeat failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BeatError {
    /// The controller refused this agent: no point in trying again.
    #[error("{0}")]
    Refused(String),
    /// Not delivered or not understood this time (unreachable, 5xx, bad answer).
    #[error("{0}")]
    Transient(String),
}

/// A blocking HTTP client of the controllers' heartbeat route.
#[derive(Debug, Clone)]
pub(crate) struct Controller {
    urls: Arc<Vec<String>>,
    /// The one tried now.
    current: Arc<AtomicUsize>,
    token: String,
    /// The node's name, sent in the protocol's node header.
    node: String,
    /// The cluster token the credential was derived from, if the agent has it: on a 401 it
    /// asks the controller, with it, whether it speaks this protocol at all.
    shared: Option<String>,
    http: ureq::Agent,
}

impl Controller {
    /// A client of the controllers at `urls` (comma-separated http:// or https:// URLs,
    /// trusting only `ca_cert` for https:// when given), sending `token`.
    pub(crate) fn new(
        urls: &str,
        token: &str,
        node: &str,
        ca_cert: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let urls: Vec<String> = urls
            .split(',')
            .map(|u| u.trim().trim_end_matches('/').to_owned())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            anyhow::bail!("--controller names no URL");
        }
        for url in &urls {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                anyhow::bail!("--controller must be http:// or https:// URLs, not {url:?}");
            }
            gantry_api::plain_link::warn_plain_link("the controller", url);
        }
        let tls = gantry_config::tls::ureq_tls("--ca-cert", ca_cert.as_deref())?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT))
            .tls_config(tls)
            .build();
        Ok(Self {
            urls: Arc::new(urls),
            current: Arc::default(),
            token: token.to_string(),
            node: node.to_string(),
            shared: None,
            http: ureq::Agent::new_with_config(config),
        })
    }

    /// Keeps the cluster token the credential was derived from (see `shared`).
    pub(crate) fn with_shared_token(mut self, token: String) -> Self {
        self.shared = Some(token).filter(|t| !t.is_empty());
        self
    }

    /// After a 401: a controller of an older protocol knows no node credential. Asked with
    /// the cluster token and no node header, a body of nothing but this protocol's number
    /// registers nothing anywhere: an older controller answers 409 naming its protocol, a
    /// current one 400 (not a heartbeat).
    fn older_controller(&self, url: &str) -> Option<String> {
        let shared = self.shared.as_ref()?;
        let mut response = self
            .http
            .post(format!("{url}{HEARTBEAT_PATH}"))
            .header("Authorization", &format!("Bearer {shared}"))
            .send_json(serde_json::json!({ "protocol": PROTOCOL_VERSION }))
            .ok()?;
        if response.status().as_u16() != 409 {
            return None;
        }
        let body = response.body_mut().read_to_vec().ok()?;
        let refusal = serde_json::from_slice::<ProtoError>(&body).ok()?;
        (refusal.field.as_deref() == Some("protocol")).then(|| version_refusal(url, &refusal))
    }

    /// The controller tried now.
    pub(crate) fn url(&self) -> &str {
        let i = self.current.load(Ordering::Relaxed) % self.urls.len();
        &self.urls[i]
    }

    /// Moves to the next controller (this one did not answer as the leader).
    pub(crate) fn next(&self) {
        if self.urls.len() > 1 {
            self.current.fetch_add(1, Ordering::Relaxed);
            tracing::info!(controller = %self.url(), "trying the next controller");
        }
    }

    /// Sends one heartbeat (blocking).
    pub(crate) fn send(&self, heartbeat: &Heartbeat) -> Result<HeartbeatReply, BeatError> {
        let url = self.url();
        let transient =
            |e: ureq::Error| BeatError::Transient(format!("controller {url} unreachable: {e}"));
        let mut response = self
            .http
            .post(format!("{url}{HEARTBEAT_PATH}"))
            .header("Authorization", &format!("Bearer {}", self.token))
            .header(NODE_HEADER, &self.node)
            .send_json(heartbeat)
            .map_err(transient)?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_vec().map_err(transient)?;
        let refusal = serde_json::from_slice::<ProtoError>(&body).ok();
        if status == 409
            && let Some(e) = refusal.filter(|e| e.field.as_deref() == Some("protocol"))
        {
            return Err(BeatError::Refused(version_refusal(url, &e)));
        }
        let reason = || {
            serde_json::from_slice::<ProtoError>(&body).map_or_else(
                |_| String::from_utf8_lossy(&body).chars().take(300).collect(),
                |e| match e.field {
                    Some(field) => format!("{} (field {field})", e.error),
                    None => e.error,
                },
            )
        };
        if status == 401
            && let Some(refusal) = self.older_controller(url)
        {
            return Err(BeatError::Refused(refusal));
        }
        match status {
            200..=299 => serde_json::from_slice(&body).map_err(|e| {
                BeatError::Transient(format!("controller answered a heartbeat with {e}"))
            }),
            401 | 403 => {
                // With the cluster token the probe above ruled an older controller out;
                // a joined node's credential alone cannot tell.
                let hint = if self.shared.is_none() {
                    format!(
                        " (or the controller is older than protocol {PROTOCOL_VERSION}, which knows no node credentials: upgrade it first)"
                    )
                } else {
                    String::new()
                };
                Err(BeatError::Refused(format!(
                    "the controller refused this agent's credential ({status}): {}{hint}",
                    reason()
                )))
            }
            409 => Err(BeatError::Refused(format!(
                "the controller refused this agent (409): {}",
                reason()
            ))),
            _ => Err(BeatError::Transient(format!(
                "controller answered a heartbeat with {status}: {}",
                reason()
            ))),
        }
    }
}

/// What an agent says when the controller does not speak its protocol: both sides' versions
/// (a controller of protocol 1 names only its protocol, in its message) and which to upgrade.
fn version_refusal(url: &str, refusal: &ProtoError) -> String {
    let agent = PeerVersion::this_build();
    match &refusal.controller {
        Some(controller) => {
            let which = if controller.protocol < agent.protocol {
                "upgrade the controller first"
            } else {
                "upgrade this agent"
            };
            format!(
                "this agent, {agent}, cannot work with the controller at {url}, {controller}: {which}"
            )
        }
        None => format!(
            "this agent, {agent}, cannot work with the controller at {url}, an older Gantry that answered \"{}\": upgrade the controller first",
            refusal.error
        ),
    }
}

/// Everything a heartbeat reports, and where.
#[derive(Debug)]
pub(crate) struct Beats {
    pub controller: Controller,
    pub node: NodeInfo,
    pub agent_url: String,
    pub addr: String,
    pub gpu_health: Arc<Mutex<super::gpu_health::GpuHealthReport>>,
    pub table: Arc<TaskTable>,
    /// Signalled when a task ends: the next heartbeat goes at once.
    pub ended: Arc<tokio::sync::Notify>,
    /// The highest controller term seen (shared with the routes: `server.rs`).
    pub terms: Arc<Highest>,
}

impl Beats {
    /// The heartbeat to send now.
    pub(crate) fn heartbeat(&self) -> Heartbeat {
        let (running, ended) = self.table.report();
        let gpu_health = lock(&self.gpu_health).clone();
        Heartbeat {
            protocol: PROTOCOL_VERSION,
            version: gantry_api::cluster::GANTRY_VERSION.to_string(),
            node: gpu_health.node_now(&self.node),
            agent_url: self.agent_url.clone(),
            addr: self.addr.clone(),
            gpu_faults: gpu_health.faults,
            gpu_checks: gpu_health.checks,
            gpu_usage: gpu_health.usage,
            load: load(),
            running,
            ended,
        }
    }

    /// Sends heartbeats until the controller refuses the agent (the only way it returns).
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let mut interval = Duration::from_millis(FIRST_INTERVAL_MS);
        let mut failing = false;
        let mut registered = false;
        loop {
            let heartbeat = self.heartbeat();
            let controller = self.controller.clone();
            let sent = tokio::task::spawn_blocking(move || controller.send(&heartbeat))
                .await
                .unwrap_or_else(|e| Err(BeatError::Transient(format!("heartbeat failed: {e}"))));
            match sent {
                Ok(reply) if !self.terms.admits(reply.term) => {
                    tracing::warn!(
                        controller = %self.controller.url(),
                        term = reply.term,
                        newest = self.terms.get(),
                        "a controller that no longer leads answered; its reply is ignored"
                    );
                    self.controller.next();
                    failing = true;
                }
                Ok(reply) => {
                    if failing {
                        tracing::info!(controller = %self.controller.url(), "controller reachable again");
                    } else if !registered {
                        tracing::info!(controller = %self.controller.url(), "registered with the controller");
                    }
                    failing = false;
                    registered = true;
                    self.table.acknowledge(&reply.acknowledged);
                    self.table.stop(&reply.stop);
                    if reply.heartbeat_interval_ms > 0 {
                        interval =
                            Duration::from_millis(reply.heartbeat_interval_ms.clamp(50, 60_000));
                    }
                }
                Err(BeatError::Refused(reason)) => {
                    tracing::error!("{reason}");
                    anyhow::bail!(reason);
                }
                Err(BeatError::Transient(reason)) => {
                    if !failing {
                        tracing::warn!("{reason}; retrying every {} ms", interval.as_millis());
                    }
                    failing = true;
                    self.controller.next();
                }
            }
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = self.ended.notified(), if !failing => {}
            }
        }
    }
}

/// The node's load now (zeros where `/proc` cannot say).
pub(crate) fn load() -> NodeLoad {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    NodeLoad {
        load_1m: parse_loadavg(&loadavg).unwrap_or(0.0),
        memory_available_mib: parse_mem_available_mib(&meminfo).unwrap_or(0),
    }
}

/// The one-minute load average from `/proc/loadavg`.
pub(crate) fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `MemAvailable` from `/proc/meminfo`, in MiB.
pub(crate) fn parse_mem_available_mib(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[cfg(test)]
mod version_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_refused_protocol_names_both_versions_and_which_to_upgrade() {
        let older = ProtoError {
            error: "protocol version 2 is not spoken here; this controller speaks 1".into(),
            field: Some("protocol".into()),
            controller: None,
        };
        let said = version_refusal("https://c:8420", &older);
        assert!(
            said.contains(&PeerVersion::this_build().to_string()),
            "{said}"
        );
        assert!(
            said.contains("this controller speaks 1")
                && said.contains("upgrade the controller first"),
            "{said}"
        );
        let newer = ProtoError {
            controller: Some(PeerVersion {
                version: "9.0.0".into(),
                oldest_protocol: PROTOCOL_VERSION + 1,
                protocol: PROTOCOL_VERSION + 2,
            }),
            ..older
        };
        let said = version_refusal("https://c:8420", &newer);
        assert!(
            said.contains("gantry 9.0.0 (protocols") && said.contains("upgrade this agent"),
            "{said}"
        );
    }
}
