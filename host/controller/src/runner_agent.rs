//! The runner of an agent's node: each task becomes one idempotent launch request (its
//! [`TaskKey`] names the run) sent off the caller's thread and retried while the agent is
//! unreachable, up to the node's down time; signals are sent in the background (three
//! tries); input goes to the agent's input route. A gang whose rank 0 runs here gets its
//! `MASTER_PORT` (and a service its `PORT`) from this agent: a port free on its machine.
//!
//! Owns: talking to one agent about its runs. Does not own what the answers mean
//! (`launch.rs`), heartbeats (`remote.rs`) nor the wire types (`gantry_api::cluster`).

use super::runner::{Answered, InputRefused, OnAnswer, Recovered, Runner};
use base64::Engine;
use gantry_api::agent_client::{AgentCallError, AgentClient};
use gantry_api::cluster::{self, LaunchReply, LaunchRequest, SignalRequest, TaskKey};
use gantry_api::model::JobRecord;
use gantry_api::model::job_options::SignalScope;
use gantry_node::container::pull_progress::PullProgress;
use std::time::{Duration, Instant};

/// First wait between launch retries; doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// An agent's node.
#[derive(Debug, Clone)]
pub(crate) struct AgentRunner {
    client: AgentClient,
    /// How long a launch is retried (`cluster.node_down_after_ms`).
    launch_deadline: Duration,
}

impl AgentRunner {
    pub(crate) fn new(client: AgentClient, launch_deadline: Duration) -> Self {
        Self {
            client,
            launch_deadline,
        }
    }
}

impl Runner for AgentRunner {
    /// Asks the agent for ports free on its node: a gang's `MASTER_PORT` and, at a
    /// service's first start, its `PORT` (a restart keeps its port unless another process
    /// listens there). Blocking (short calls); on failure the controller's pick stays.
    fn choose_ports(&self, job: &mut JobRecord) -> bool {
        let agent = &self.client;
        let auto_port = job.spec.kind == gantry_contract::JobKind::Service
            && job.spec.service.as_ref().is_none_or(|s| s.port == 0);
        // A restart keeps its port unless someone listens there now (its own run is over):
        // another account may have taken it (issue 43, finding 8).
        let taken = |port: u16| {
            let ask = cluster::PortOwnerRequest {
                port,
                user: job.spec.user.clone(),
                anonymous: job.spec.anonymous,
            };
            agent
                .port_owner(&ask)
                .is_ok_and(|reply| !reply.holders.is_empty())
        };
        let auto_service_port =
            auto_port && (job.restarts == 0 || job.service_port.is_some_and(taken));
        let wanted = [
            (job.tasks.len() >= 2, &mut job.rendezvous_port),
            (auto_service_port, &mut job.service_port),
        ];
        for (want, port) in wanted {
            if !want {
                continue;
            }
            match agent.free_port() {
                Ok(p) => *port = Some(p),
                Err(e) => tracing::warn!(job = job.id, "no free port from rank 0's agent: {e}"),
            }
        }
        true
    }

    fn launch(&self, requests: Vec<LaunchRequest>, answer: OnAnswer) {
        for request in requests {
            let (agent, answer) = (self.client.clone(), answer.clone());
            let deadline = self.launch_deadline;
            tokio::task::spawn_blocking(move || {
                let result = send_launch(&agent, &request, deadline)
                    .map_err(|e| format!("task {} failed to launch: {e}", request.key.task));
                answer(Answered {
                    key: request.key,
                    result: Some(result),
                    durable_first: true,
                });
            });
        }
    }

    fn signal(
        &self,
        key: TaskKey,
        _pid: Option<u32>,
        signal: i32,
        grace: Option<Duration>,
        scope: SignalScope,
    ) -> std::io::Result<bool> {
        let request = SignalRequest {
            key,
            signal,
            grace_ms: grace.map(|g| g.as_millis() as u64),
            scope,
        };
        let agent = self.client.clone();
        tokio::task::spawn_blocking(move || send_signal(&agent, &request));
        Ok(true)
    }

    fn input(
        &self,
        key: TaskKey,
        data: &[u8],
        resize: Option<(u16, u16)>,
        eof: bool,
    ) -> Result<usize, InputRefused> {
        let wire = cluster::InputRequest {
            data: base64::engine::general_purpose::STANDARD.encode(data),
            resize,
            eof,
        };
        self.client.input(key, &wire).map_err(|e| match e {
            AgentCallError::Refused { status: 409, .. } => InputRefused::NotOpen,
            e => InputRefused::Failed(e.to_string()),
        })
    }

    /// The agent reports its runs in its heartbeats (`reconcile.rs`).
    fn recover(&self, _key: TaskKey, _pid: Option<u32>, _since_ms: u64) -> Recovered {
        Recovered::Reported
    }

    /// The agent's log carries the pull's progress lines instead.
    fn pull_progress(&self, _key: TaskKey) -> Option<PullProgress> {
        None
    }

    fn agent(&self) -> Option<&AgentClient> {
        Some(&self.client)
    }
}

/// Sends one launch, retrying transient failures until `deadline` has passed.
fn send_launch(
    agent: &AgentClient,
    request: &LaunchRequest,
    deadline: Duration,
) -> Result<LaunchReply, AgentCallError> {
    let t0 = Instant::now();
    let mut wait = RETRY_FIRST;
    loop {
        match agent.launch(request) {
            Ok(reply) => return Ok(reply),
            Err(e) if e.is_transient() && t0.elapsed() + wait < deadline => {
                tracing::warn!(task = %request.key, "launch will be retried: {e}");
                std::thread::sleep(wait);
                wait = (wait * 2).min(RETRY_MAX);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Sends one signal request, trying three times while the agent is unreachable.
fn send_signal(agent: &AgentClient, request: &SignalRequest) {
    for attempt in 0..3u32 {
        match agent.signal(request) {
            Ok(()) => return,
            Err(e) if e.is_transient() && attempt < 2 => {
                std::thread::sleep(Duration::from_millis(200 << attempt));
            }
            Err(e) => {
                tracing::warn!(task = %request.key, signal = request.signal, "signal not delivered: {e}");
                return;
            }
        }
    }
}
