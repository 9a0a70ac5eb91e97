//! The controller's side of agents: signals and stops routed to the node a task runs on, and
//! heartbeats (registration, inventory, GPU health, load, reported ends).
//!
//! Rules: an end is applied once, and only to the run its key names; a node name belongs to
//! one live agent (another is refused until the first falls silent).
//!
//! Owns: these reactions. Does not own the node table (`members.rs`), comparing what an
//! agent runs with what is wanted (`reconcile.rs`), silent nodes (`node_down.rs`), the wire
//! types (`gantry_api::cluster`), HTTP (`api::cluster`) or launching (`launch.rs`, `runner_agent.rs`).

use super::members::{Liveness, Member};
use super::runner::Runner;
use super::runner_agent::AgentRunner;
use super::{Scheduler, lock, now_ms};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::{EndReport, Heartbeat, HeartbeatReply, TaskKey};
use gantry_api::model::JobState;
use gantry_api::model::job_options::SignalScope;
use gantry_node::executor::TaskEvent;
use std::sync::Arc;
use std::time::Duration;

/// Why a heartbeat was refused.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The name is the controller's own node.
    #[error("node name {0} is the controller's own node; give the agent another --name")]
    NameTaken(String),
    /// Another agent, alive, already runs under this name.
    #[error(
        "node name {name} is in use by the agent at {url}, heard from {ago_ms} ms ago; give this agent another --name (or stop that one: its node is free to take after {down_after_ms} ms of silence)"
    )]
    NameInUse {
        /// The name.
        name: String,
        /// The agent that has it.
        url: String,
        /// Since its last heartbeat.
        ago_ms: u64,
        /// `cluster.node_down_after_ms`.
        down_after_ms: u64,
    },
    /// The name is empty or not printable.
    #[error("node name must be 1-64 printable characters without spaces")]
    BadName,
    /// The store failed.
    #[error("{0}")]
    Store(#[from] gantry_store::StoreError),
}

impl Scheduler {
    /// Sends `signal` to the run `key` on node `node` (`pid`, when known); with `grace`,
    /// SIGKILL follows after it if the task is still alive.
    pub(crate) fn signal_task(
        &self,
        node: &str,
        key: TaskKey,
        pid: Option<u32>,
        signal: i32,
        grace: Option<Duration>,
    ) -> std::io::Result<()> {
        self.signal_on_node(node, key, pid, signal, grace, SignalScope::Group)
            .map(|_| ())
    }

    /// As [`Scheduler::signal_task`]; whether there was something to signal.
    fn signal_on_node(
        &self,
        node: &str,
        key: TaskKey,
        pid: Option<u32>,
        signal: i32,
        grace: Option<Duration>,
        scope: SignalScope,
    ) -> std::io::Result<bool> {
        let Some(runner) = self.runner_of(node) else {
            tracing::warn!(task = %key, node, signal, "no such node; the signal is not sent");
            return Ok(false);
        };
        runner.signal(key, pid, signal, grace, scope)
    }

    /// Sends `signal` (with `grace`: a stop) to every task of `job` that has not ended, on
    /// whichever node it runs; returns how many were signalled (a local task not yet launched
    /// is not).
    pub(crate) fn signal_running_tasks(
        &self,
        job: &gantry_api::model::JobRecord,
        signal: i32,
        grace: Option<Duration>,
    ) -> usize {
        self.signal_running_tasks_in(job, signal, grace, SignalScope::Group)
    }

    /// [`Self::signal_running_tasks`] reaching the processes `scope` names; a job given as
    /// a command (no script, no shell of its own) is signalled whole whatever the scope.
    pub(crate) fn signal_running_tasks_in(
        &self,
        job: &gantry_api::model::JobRecord,
        signal: i32,
        grace: Option<Duration>,
        scope: SignalScope,
    ) -> usize {
        let scope = if job.spec.script.is_some() && job.spec.image.is_none() {
            scope
        } else {
            SignalScope::Group
        };
        let mut sent = 0;
        for (i, t) in job
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.exit.is_none())
        {
            let key = Self::task_key(job, i);
            match self.signal_on_node(&t.node, key, t.pid, signal, grace, scope) {
                Ok(true) => sent += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(job = job.id, task = i, signal, error = %e, "signal failed")
                }
            }
        }
        sent
    }

    /// The runner of the agent at `url`, which speaks `protocol` and is sent `credential`
    /// (its node's, or the cluster token for protocol 1), checked against `[cluster] ca_cert`.
    pub(crate) fn agent_runner(
        &self,
        url: &str,
        credential: &str,
        protocol: u32,
    ) -> Arc<dyn Runner> {
        let client = AgentClient::new(url, credential, &self.inner.agent_tls).speaking(protocol);
        let deadline = Duration::from_millis(self.inner.config.cluster.node_down_after_ms);
        Arc::new(AgentRunner::new(client, deadline))
    }

    /// An end reported by node `node`: applied when it is the current run of a running task.
    pub(crate) fn remote_task_ended(&self, node: &str, end: EndReport) {
        let current = {
            let st = lock(&self.inner.state);
            st.jobs.get(end.key.job).is_some_and(|j| {
                j.state == JobState::Running
                    && j.tasks.get(end.key.task as usize).is_some_and(|t| {
                        t.node == node && t.exit.is_none() && t.started_ms == Some(end.key.run)
                    })
            })
        };
        if current {
            self.task_ended(TaskEvent {
                job_id: end.key.job,
                task_index: end.key.task,
                exit: end.exit,
                usage: end.usage,
            });
            // Durable before the agent is told it may forget the end.
            self.flush();
        }
    }

    /// A heartbeat from an agent: registers or refreshes its node, applies its ends, and
    /// answers with what was recorded and what to stop.
    pub(crate) fn heartbeat(
        &self,
        hb: Heartbeat,
        credential: String,
    ) -> Result<HeartbeatReply, HeartbeatError> {
        let name = hb.node.name.clone();
        if name.is_empty()
            || name.len() > 64
            || name.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(HeartbeatError::BadName);
        }
        self.register(&hb, &credential)?;
        if self.apply_agent_gpu_health(&name, &hb.node, &hb.gpu_faults, &hb.gpu_checks) {
            self.wake();
        }
        if let Some(report) = &hb.gpu_usage {
            self.apply_gpu_usage(&name, report);
        }
        for end in &hb.ended {
            self.remote_task_ended(&name, *end);
        }
        let acknowledged = hb.ended.iter().map(|e| e.key).collect();
        let stop = self.reconcile(&name, &hb);
        Ok(HeartbeatReply {
            acknowledged,
            stop,
            heartbeat_interval_ms: self.inner.config.cluster.heartbeat_interval_ms,
            term: gantry_api::cluster_term::current(),
        })
    }

    /// Adds the node or refreshes it; a node that was down or awaited is up again.
    fn register(&self, hb: &Heartbeat, credential: &str) -> Result<(), HeartbeatError> {
        let name = &hb.node.name;
        let now = now_ms();
        let mut members = lock(&self.inner.members);
        // MIG slices the node no longer reports: their jobs stop as on a failed GPU.
        let mut vanished = Vec::new();
        let (changed, back) = match members.by_name_mut(name) {
            Some(m) if m.agent().is_none() => {
                return Err(HeartbeatError::NameTaken(name.clone()));
            }
            Some(m) => {
                let url_changed = m.agent().is_none_or(|a| a.url() != hb.agent_url);
                let ago_ms = now.saturating_sub(m.last_heartbeat_ms);
                let down_after_ms = self.inner.config.cluster.node_down_after_ms;
                if url_changed && m.liveness == Liveness::Up && ago_ms <= down_after_ms {
                    return Err(HeartbeatError::NameInUse {
                        name: name.clone(),
                        url: m.agent().map_or_else(String::new, |a| a.url().to_string()),
                        ago_ms,
                        down_after_ms,
                    });
                }
                let changed = url_changed || m.info != hb.node || m.addr != hb.addr;
                let link_changed = m.agent().is_none_or(|a| !a.sends(credential, hb.protocol));
                if url_changed || link_changed {
                    m.runner = self.agent_runner(&hb.agent_url, credential, hb.protocol);
                }
                vanished = gantry_api::mig::vanished_slices(&m.info, &hb.node);
                m.info = hb.node.clone();
                m.addr = hb.addr.clone();
                m.last_heartbeat_ms = now;
                m.load = hb.load;
                let back = std::mem::replace(&mut m.liveness, Liveness::Up);
                if back != Liveness::Up {
                    // Until this heartbeat is reconciled, count every task it reports as
                    // unwanted, so that no cycle places work on GPUs an orphan may hold.
                    m.unwanted = hb.running.len();
                }
                (changed, (back != Liveness::Up).then_some(back))
            }
            None => {
                let control = super::node_control::NodeControl::load(&self.inner.store, &hb.node)?;
                members.push(Member {
                    info: hb.node.clone(),
                    addr: hb.addr.clone(),
                    runner: self.agent_runner(&hb.agent_url, credential, hb.protocol),
                    liveness: Liveness::Up,
                    last_heartbeat_ms: now,
                    load: hb.load,
                    control,
                    unwanted: 0,
                    removed: false,
                });
                let message = format!(
                    "node {name} joined: {} GPUs, agent {}",
                    hb.node.gpus.len(),
                    hb.agent_url
                );
                tracing::info!("{message}");
                gantry_api::plain_link::warn_plain_link("the agent of node", &hb.agent_url);
                let _ = self.inner.store.event(now, None, "node", message);
                (true, None)
            }
        };
        if changed {
            members.save(&self.inner.store)?;
        }
        drop(members);
        if !vanished.is_empty() {
            self.slices_vanished(name, vanished);
        }
        let woke = changed || back.is_some();
        if let Some(was) = back {
            let message = match was {
                Liveness::Down { reason, .. } => {
                    format!("node {name} is back (was down: {reason})")
                }
                _ => format!("node {name} reported after the controller's restart"),
            };
            tracing::warn!("{message}");
            let _ = self.inner.store.event(now, None, "node", message);
        }
        if woke {
            self.wake();
        }
        Ok(())
    }
}
