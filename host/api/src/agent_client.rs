//! The controller's HTTP client for one agent: launch, signal, free port and log reads, each
//! a blocking call with a deadline (callers run them off the async threads), with the
//! cluster token.
//!
//! Owns: request building, deadlines and turning answers into [`AgentCallError`]. Does not
//! own retries or what a failure means for the job (the daemon's `scheduler::remote`). Behind
//! the `client` feature, like the daemon's own client (`client`).

use crate::cluster::{
    CHECK_PATH, CheckReply, CheckRequest, FREE_PORT_PATH, FreePort, IMAGES_PATH, InputReply,
    InputRequest, LAUNCH_PATH, LaunchReply, LaunchRequest, NodeImages, PORT_OWNER_PATH,
    PortOwnerReply, PortOwnerRequest, ProtoError, SIGNAL_PATH, SignalRequest, TaskKey,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Deadline of one call.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a call to an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentCallError {
    /// The agent could not be reached or did not answer in time (worth a retry).
    #[error("agent {url} unreachable: {message}")]
    Unreachable {
        /// The agent.
        url: String,
        /// The transport error.
        message: String,
    },
    /// The agent answered with an error (a retry gets the same answer).
    #[error("agent {url} refused ({status}): {message}")]
    Refused {
        /// The agent.
        url: String,
        /// HTTP status.
        status: u16,
        /// Its `error` field, or the body.
        message: String,
    },
    /// The answer was not the expected JSON.
    #[error("agent {url} answered something unexpected: {message}")]
    BadAnswer {
        /// The agent.
        url: String,
        /// The decoding error.
        message: String,
    },
}

impl AgentCallError {
    /// Whether trying again may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
            || matches!(self, Self::Refused { status, .. } if *status >= 500)
    }
}

/// A client for the agent at `url`.
#[derive(Debug, Clone)]
pub struct AgentClient {
    url: String,
    token: String,
    /// The protocol the agent speaks (its last heartbeat's), stamped on launches.
    protocol: u32,
    http: ureq::Agent,
}

impl AgentClient {
    /// A client for `url` (e.g. `http://127.0.0.1:8421`, or `https://` checked with `tls`,
    /// `gantry-config`'s `tls::ureq_tls`) that sends `token`.
    pub fn new(url: &str, token: &str, tls: &ureq::tls::TlsConfig) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(CALL_TIMEOUT))
            .tls_config(tls.clone())
            .build();
        Self {
            url: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            protocol: crate::cluster::PROTOCOL_VERSION,
            http: ureq::Agent::new_with_config(config),
        }
    }

    /// The same client for an agent of protocol `protocol` (an older agent, still served).
    pub fn speaking(mut self, protocol: u32) -> Self {
        self.protocol = protocol;
        self
    }

    /// Whether this client sends `token` in `protocol`.
    pub fn sends(&self, token: &str, protocol: u32) -> bool {
        self.token == token && self.protocol == protocol
    }

    /// The agent's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts a task, or answers with the one already started under its key.
    pub fn launch(&self, request: &LaunchRequest) -> Result<LaunchReply, AgentCallError> {
        if request.protocol != self.protocol {
            let request = LaunchRequest {
                protocol: self.protocol,
                ..request.clone()
            };
            return self.post(LAUNCH_PATH, &request);
        }
        self.post(LAUNCH_PATH, request)
    }

    /// Sends a signal (with `grace_ms`: a stop, SIGKILL after the grace). A task the agent
    /// does not know (already gone) is not an error.
    pub fn signal(&self, request: &SignalRequest) -> Result<(), AgentCallError> {
        match self.post::<_, serde_json::Value>(SIGNAL_PATH, request) {
            Ok(_) => Ok(()),
            Err(AgentCallError::Refused { status: 404, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Runs a service's health-check command on the agent's node (blocking for up to the
    /// request's timeout plus the call's own deadline).
    pub fn check(&self, request: &CheckRequest) -> Result<CheckReply, AgentCallError> {
        let deadline = CALL_TIMEOUT + std::time::Duration::from_millis(request.timeout_ms);
        let response = self
            .http
            .post(format!("{}{CHECK_PATH}", self.url))
            .config()
            .timeout_global(Some(deadline))
            .build()
            .header("Authorization", &format!("Bearer {}", self.token))
            .header(
                crate::cluster_term::TERM_HEADER,
                &crate::cluster_term::current().to_string(),
            )
            .send_json(request)
            .map_err(|e| self.unreachable(e))?;
        self.answer(response)
    }

    /// Who listens on a service's port on the agent's node (issue 43, finding 8).
    pub fn port_owner(&self, request: &PortOwnerRequest) -> Result<PortOwnerReply, AgentCallError> {
        self.post(PORT_OWNER_PATH, request)
    }

    /// The agent's node's image cache.
    pub fn images(&self) -> Result<NodeImages, AgentCallError> {
        self.get::<NodeImages>(IMAGES_PATH)
    }

    /// A TCP port free on the agent's node now.
    pub fn free_port(&self) -> Result<u16, AgentCallError> {
        self.get::<FreePort>(FREE_PORT_PATH).map(|p| p.port)
    }

    /// Up to `limit` bytes of a task's log from byte `offset`.
    pub fn log(&self, key: TaskKey, offset: u64, limit: u64) -> Result<Vec<u8>, AgentCallError> {
        let path = format!(
            "/agent/v1/tasks/{}/{}/{}/log?offset={offset}&limit={limit}",
            key.job, key.task, key.run
        );
        let mut response = self
            .http
            .get(format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .map_err(|e| self.unreachable(e))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| self.unreachable(e))?;
        if status == 200 {
            Ok(body)
        } else {
            Err(self.refused(status, &body))
        }
    }

    /// Delivers input to an interactive task; returns the data bytes taken (409 when its
    /// input is not open).
    pub fn input(&self, key: TaskKey, request: &InputRequest) -> Result<usize, AgentCallError> {
        let path = format!("/agent/v1/tasks/{}/{}/{}/input", key.job, key.task, key.run);
        self.post::<_, InputReply>(&path, request)
            .map(|r| r.accepted)
    }

    fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<R, AgentCallError> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .header(
                crate::cluster_term::TERM_HEADER,
                &crate::cluster_term::current().to_string(),
            )
            .send_json(body)
            .map_err(|e| self.unreachable(e))?;
        self.answer(response)
    }

    fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R, AgentCallError> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()
            .map_err(|e| self.unreachable(e))?;
        self.answer(response)
    }

    fn answer<R: DeserializeOwned>(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> Result<R, AgentCallError> {
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| self.unreachable(e))?;
        if !(200..300).contains(&status) {
            return Err(self.refused(status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| AgentCallError::BadAnswer {
            url: self.url.clone(),
            message: e.to_string(),
        })
    }

    fn unreachable(&self, e: ureq::Error) -> AgentCallError {
        AgentCallError::Unreachable {
            url: self.url.clone(),
            message: e.to_string(),
        }
    }

    fn refused(&self, status: u16, body: &[u8]) -> AgentCallError {
        let message = serde_json::from_slice::<ProtoError>(body).map_or_else(
            |_| String::from_utf8_lossy(body).chars().take(300).collect(),
            |e| e.error,
        );
        AgentCallError::Refused {
            url: self.url.clone(),
            status,
            message,
        }
    }
}
