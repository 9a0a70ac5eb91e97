//! One health-check probe of a service: an HTTP GET of `http://127.0.0.1:<port><path>` on the
//! service's node — its own port, held by its user, nothing else (a 2xx answer is healthy) —
//! or a command
//! run exactly as the service's tasks run (its user, its rank-0 task's cgroup, the job's
//! environment only, its working directory entered as that user: `Executor::check_command`;
//! exit 0 is healthy) — by the agent of the service's node when it runs on one — each bounded
//! by the check's interval.
//!
//! This is the controller's half: choosing where a probe runs and asking the agent; running
//! one on this node and why it failed are `gantry_node::health_probe`'s (which an agent runs
//! too).
//!
//! Owns: sending one probe where it runs. Does not own when probes run or what failures lead
//! to (`service`), or running it on a node (`gantry_node::health_probe`).

use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::{CheckRequest, TaskKey};
use gantry_api::model::job_options::HealthCheck;
use gantry_node::executor::Executor;
use gantry_node::health_probe::{CommandRun, ProbeError, http_on_this_node, run_command};
use std::path::PathBuf;
use std::time::Duration;

/// Where a service's probes go.
pub(crate) struct ProbeTarget {
    /// On an agent's node: that agent and the rank-0 run, where a check command runs.
    pub agent: Option<(AgentClient, TaskKey)>,
    /// The service's port (for HTTP checks).
    pub port: Option<u16>,
    /// Working directory of a check command (the job's).
    pub workdir: PathBuf,
    /// Variables given to a check command on top of the base a task gets.
    pub env: Vec<(String, String)>,
    /// The job's user, and whether it was submitted without an identity (the check command
    /// runs as the job's tasks do: `Executor::identity`).
    pub user: (String, bool),
    /// The checked task (job id, rank 0): the check command joins its cgroup.
    pub task: (u64, u32),
    /// On the daemon's own node, when tasks run as their users: the uid the service's port
    /// must be held by (an HTTP check goes nowhere else).
    pub port_owner: Option<u32>,
}

/// Runs `check` once against `target`; `executor` kills a command that outlives the interval.
pub(crate) async fn probe(
    check: &HealthCheck,
    target: &ProbeTarget,
    executor: &Executor,
) -> Result<(), ProbeError> {
    let limit = Duration::from_secs(u64::from(check.interval_s.max(1)));
    match &check.http_path {
        Some(path) => {
            let port = target.port.ok_or(ProbeError::NoPort)?;
            match &target.agent {
                // On an agent's node the agent probes, as the controller does here.
                Some((agent, key)) => {
                    let request = CheckRequest {
                        http_path: Some(path.clone()),
                        port: Some(port),
                        ..check_request(*key, &[], target, limit)
                    };
                    remote_check(agent, request).await
                }
                None => http_on_this_node(path, port, target.port_owner, limit).await,
            }
            .map_err(|e| match e {
                ProbeError::Timeout(_) => ProbeError::Timeout(check.interval_s),
                e => e,
            })
        }
        None => match &target.agent {
            Some((agent, key)) => remote_command(agent, *key, &check.command, target, limit).await,
            None => {
                let run = CommandRun {
                    argv: &check.command,
                    user: (&target.user.0, target.user.1),
                    task: target.task,
                    env: &target.env,
                    workdir: &target.workdir,
                };
                run_command(&run, limit, executor).await
            }
        }
        .map_err(|e| match e {
            ProbeError::Timeout(_) => ProbeError::Timeout(check.interval_s),
            e => e,
        }),
    }
}

/// The check request for the agent of the service's node: run `argv` (a command check).
fn check_request(
    key: TaskKey,
    argv: &[String],
    target: &ProbeTarget,
    limit: Duration,
) -> CheckRequest {
    CheckRequest {
        key,
        command: argv.to_vec(),
        env: target.env.clone(),
        user: target.user.0.clone(),
        anonymous: target.user.1,
        workdir: Some(target.workdir.to_string_lossy().into_owned()).filter(|w| !w.is_empty()),
        timeout_ms: limit.as_millis() as u64,
        http_path: None,
        port: None,
    }
}

/// Runs the check command on the agent of the service's node.
async fn remote_command(
    agent: &AgentClient,
    key: TaskKey,
    argv: &[String],
    target: &ProbeTarget,
    limit: Duration,
) -> Result<(), ProbeError> {
    remote_check(agent, check_request(key, argv, target, limit)).await
}

/// Sends `request` to the agent of the service's node and reads its verdict.
async fn remote_check(agent: &AgentClient, request: CheckRequest) -> Result<(), ProbeError> {
    let agent = agent.clone();
    let answer = tokio::task::spawn_blocking(move || agent.check(&request))
        .await
        .map_err(|e| ProbeError::Remote(e.to_string()))?;
    match answer {
        Ok(reply) if reply.healthy => Ok(()),
        Ok(reply) => Err(ProbeError::Remote(reply.message.unwrap_or_default())),
        Err(e) => Err(ProbeError::Remote(e.to_string())),
    }
}
