//! Launching tasks on agents: each remote task of a started job becomes one idempotent
//! launch request (its [`TaskKey`] names the run), sent off the scheduling thread and retried
//! while the agent is unreachable; the answers record the tasks' pids. A gang whose rank 0
//! runs on an agent first gets its `MASTER_PORT` from that agent (a port free there).
//!
//! All or nothing: if one task of a gang cannot be launched (the agent refuses, or stays
//! unreachable past the node's down time), the job takes the launch-failed path, which stops
//! the tasks already started and requeues the job (or fails it) with the reason.
//!
//! Owns: building and sending launch requests, and applying their answers. Does not own the
//! local executor path (`launch.rs`), the environment (`task_env.rs`) or what heartbeats
//! report (`remote.rs`).

use super::transition::Transition;
use super::{Scheduler, lock};
use gantry_api::agent_client::{AgentCallError, AgentClient};
use gantry_api::cluster::{LaunchReply, LaunchRequest, PROTOCOL_VERSION, TaskKey};
use gantry_api::model::{JobRecord, JobState};
use gantry_api::task::TaskInput;
use std::time::{Duration, Instant};

/// First wait between launch retries; doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

impl Scheduler {
    /// The agent that runs node `node`'s tasks (`None`: the local executor, or no such node).
    pub(crate) fn agent_of(&self, node: &str) -> Option<AgentClient> {
        lock(&self.inner.members)
            .by_name(node)
            .and_then(|(_, m)| m.agent().cloned())
    }

    /// The key of the current run of task `i`.
    pub(crate) fn task_key(job: &JobRecord, i: usize) -> TaskKey {
        TaskKey {
            job: job.id,
            task: i as u32,
            run: job.tasks.get(i).and_then(|t| t.started_ms).unwrap_or(0),
        }
    }

    /// When rank 0 runs on an agent: asks that agent for ports free on its node, a gang's
    /// `MASTER_PORT` and, at a service's first start, its `PORT` (a restart keeps its port
    /// unless another process listens there).
    /// Blocking (short calls); on failure the controller's pick stays.
    pub(crate) fn ports_on_rank0_node(&self, job: &mut JobRecord) {
        let Some(agent) = job.tasks.first().and_then(|t| self.agent_of(&t.node)) else {
            return;
        };
        let auto_port = job.spec.kind == gantry_contract::JobKind::Service
            && job.spec.service.as_ref().is_none_or(|s| s.port == 0);
        // A restart keeps its port unless someone listens there now (its own run is over):
        // another account may have taken it (issue 43, finding 8).
        let taken = |port: u16| {
            let ask = gantry_api::cluster::PortOwnerRequest {
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
    }

    /// Sends the launches of tasks `indices` of `job` (all on agents) in the background.
    pub(crate) fn launch_remote(&self, job: &JobRecord, indices: &[usize]) {
        let mut requests = Vec::new();
        for &i in indices {
            let t = &job.tasks[i];
            let Some(agent) = self.agent_of(&t.node) else {
                continue;
            };
            let (stdout_file, stderr_file) = super::output_files::of_task(job, i);
            let request = LaunchRequest {
                protocol: PROTOCOL_VERSION,
                key: Self::task_key(job, i),
                argv: job.spec.argv.clone(),
                script: job.spec.script.clone(),
                env: self.task_env(job, i),
                workdir: job.spec.workdir.clone(),
                gpus: t.gpus.iter().map(|g| g.index).collect(),
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                user: job.spec.user.clone(),
                anonymous: job.spec.anonymous,
                input: if i == 0 {
                    job.spec.task_input()
                } else {
                    TaskInput::None
                },
                stdout_file,
                stderr_file,
                image: job.spec.image.clone(),
                mounts: job.spec.mounts.clone(),
            };
            lock(&self.inner.remote_runs).launch_sent(request.key);
            requests.push((agent, request));
        }
        let deadline = Duration::from_millis(self.inner.config.cluster.node_down_after_ms);
        for (agent, request) in requests {
            let me = self.clone();
            tokio::task::spawn_blocking(move || {
                let answer = send_launch(&agent, &request, deadline);
                lock(&me.inner.remote_runs).launch_answered(&request.key);
                me.launch_answered(request.key, answer);
            });
        }
    }

    /// Applies a launch answer: records the pid, or fails the gang's launch.
    fn launch_answered(&self, key: TaskKey, answer: Result<LaunchReply, AgentCallError>) {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(key.job) else {
            return;
        };
        let current = job.state == JobState::Running
            && Self::task_key(&job, key.task as usize) == key
            && job.tasks[key.task as usize].exit.is_none();
        let node = job.tasks.get(key.task as usize).map(|t| t.node.clone());
        if !current {
            // Requeued, ended or stopped meanwhile: a task that did start is not wanted.
            if let (Ok(reply), Some(node)) = (&answer, node) {
                tracing::info!(task = %key, pid = reply.pid, "launched after its run ended; stopping it");
                drop(job);
                drop(st);
                self.signal_remote(&node, key, libc::SIGKILL, Some(Duration::ZERO));
            }
            return;
        }
        match answer {
            Ok(reply) => {
                let launched = Transition::TaskLaunched {
                    task: key.task as usize,
                    pid: reply.pid,
                };
                job.apply_or_log(launched);
                if reply.replayed {
                    tracing::info!(task = %key, pid = reply.pid, "the agent already had this launch");
                }
                let stopping = job.stopping.is_some();
                let task_node = job.tasks[key.task as usize].node.clone();
                // Written before the lock goes (the edit's drop): no older snapshot of this
                // job, written by another thread after it, can replace this one in the store.
                drop(job);
                drop(st);
                self.flush();
                if stopping {
                    // A stop was asked while the launch was in flight: send it now.
                    let grace = Duration::from_secs(self.inner.config.kill_grace_s);
                    if let Some(node) = node {
                        self.signal_remote(&node, key, libc::SIGTERM, Some(grace));
                    }
                }
                if let Some(ended) = reply.ended {
                    self.remote_task_ended(&task_node, ended);
                }
            }
            Err(e) => {
                let message = format!("task {} failed to launch: {e}", key.task);
                self.launch_failed(&mut job, message);
                // Written before the lock goes (the edit's drop): no older snapshot of this
                // job, written by another thread after it, can replace this one in the store.
                drop(job);
                drop(st);
                self.flush();
                self.wake();
            }
        }
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
