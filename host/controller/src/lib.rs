//! `gantry-controller`: the controller's single owner of job, node, policy and service state.
//! It turns the server's calls into durable records, runs a cycle on every event and on a
//! timer (snapshot → engine → apply), launches and stops tasks through the executor or an
//! agent, and reacts to task ends. The server (`host/server`) reaches it only through the
//! facade ([`facade`]: [`Controller`] and its five handles); only its `serve.rs` opens the
//! [`Scheduler`] and runs its loop.
//!
//! Owns: in-memory job state (the active jobs and those ended within
//! `retention.min_job_age_s`, mirrored to the store, which keeps history), the live and
//! fallback pipelines, recent plugin faults, the node table, service records, accounting and
//! the controller's metrics ([`metrics`]). Does not own HTTP or axum (the server), the policy
//! logic (`gantry-engine` + plugins, run by `gantry-policy`), processes (`gantry-node`'s
//! executor) or the agent process (`gantry-agent`). Who may change each kind of state:
//! `ARCHITECTURE.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod accounting;
mod adopt;
mod apply;
mod cycle_inputs;
pub mod decisions;
pub mod enrolment;
mod evictions;
pub mod facade;
mod fault_log;
mod forecasts;
mod gpu_health;
mod gpu_usage;
mod holds;
mod image_check;
mod image_pin;
mod image_pull_view;
mod job_control;
mod job_edit;
pub mod job_input;
mod job_numbers;
mod job_paths;
mod job_table;
pub mod job_trace;
pub mod jobs;
mod jobs_in_memory;
mod launch;
mod lifecycle;
pub(crate) mod members;
pub mod metrics;
pub mod node_control;
mod node_down;
pub mod node_view;
pub mod nodes;
mod output_files;
pub mod policy_error;
mod policy_manager;
pub mod policy_ops;
mod reconcile;
mod remote;
mod remote_runs;
mod retention;
mod runner;
mod runner_agent;
mod runner_local;
#[cfg(test)]
mod runner_tests;
pub mod service;
mod service_rollout;
pub mod service_sets;
pub mod shadow;
pub mod signal_ops;
pub mod snapshot;
#[cfg(test)]
mod source_scan;
mod start_commit;
#[cfg(test)]
mod state_owner_tests;
mod submit_admission;
mod submit_limits;
pub mod submitter;
mod task_env;
mod transition;
mod user_requeue;
pub mod views;
mod what_if;

use gantry_config::Config;
use gantry_engine::FaultRecord;
use gantry_node::executor::{Executor, TaskEvent};
use gantry_node::inventory::NodeInfo;
use gantry_store::Store;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, mpsc};

pub use facade::{Admin, Controller, Jobs, Nodes, Policy, Services};
pub use job_control::{ControlError, JobUpdate};
pub use job_table::{JobPage, JobQuery};
pub use jobs as jobs_api;
pub use policy_ops as policy_api;
pub use policy_ops::PolicyView;
pub use remote::HeartbeatError;
pub use retention::GcReport;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A plugin fault as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct FaultView {
    /// Cycle (0 for submit-time and dry-run faults).
    pub cycle: u64,
    /// When.
    pub at_ms: u64,
    /// The fault.
    #[serde(flatten)]
    pub record: FaultRecord,
}

pub(crate) struct State {
    pub(crate) jobs: job_table::JobTable,
    pub(crate) cycle: u64,
    /// Pending jobs of submissions under way, by user, not yet in `jobs`
    /// (`submit_limits::PendingReservation`).
    pub(crate) reserved_pending: BTreeMap<String, u64>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    /// The controller's own node (its executor's GPUs), whether or not it runs tasks.
    pub(crate) node: NodeInfo,
    /// Every node: the local one (first, when it runs tasks) and the agents; with each its
    /// drain and GPU health (`members.rs`, `nodes.rs`). Locked after `state`.
    pub(crate) members: Mutex<members::Members>,
    /// The cluster token agents must present (empty: no agent may join).
    pub(crate) cluster_token: String,
    /// How `https://` agents are checked (`[cluster] ca_cert`, else the public roots).
    pub(crate) agent_tls: ureq::tls::TlsConfig,
    /// Remote task runs whose launch is in flight or whose agent stopped reporting them
    /// (`remote_runs.rs`); locked after `state`.
    pub(crate) remote_runs: Mutex<remote_runs::RemoteRuns>,
    pub(crate) store: Store,
    pub(crate) executor: Executor,
    /// Where the local node keeps each job's files (`job_paths.rs`).
    pub(crate) paths: job_paths::JobPaths,
    pub(crate) state: Mutex<State>,
    pub(crate) policy: Mutex<policy_manager::PolicyManager>,
    pub(crate) wake: Notify,
    /// Counts wake-ups, for those who wait for a job to change (an attached `gantry run`
    /// learns of its job's end at once instead of at its next poll).
    pub(crate) changed: tokio::sync::watch::Sender<u64>,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    pub(crate) decisions: Mutex<decisions::DecisionLog>,
    /// Recent plugin faults and their counts (`fault_log.rs`); locked after `state`.
    pub(crate) faults: Mutex<fault_log::FaultLog>,
    pub(crate) recorder: Mutex<shadow::Recorder>,
    /// Pending jobs' start forecasts and the runtime model (`forecasts.rs`).
    pub(crate) forecaster: forecasts::Forecaster,
    /// Decayed GPU usage of closed task runs (`accounting.rs`); locked after `state`.
    pub(crate) ledger: Mutex<accounting::Ledger>,
    /// The submit time of the newest job: ids are given under it with a time never
    /// below it, so job ids grow with submit time (a list's time range stops early).
    pub(crate) submit_clock: Mutex<u64>,
    /// Replicated services (`service_sets.rs`); never held while another lock is taken.
    pub(crate) services: Mutex<service_sets::ServiceSets>,
    /// What each job of the last snapshot was numbered from (`job_numbers.rs`); taken
    /// alone, after the snapshot is built.
    pub(crate) job_numbers: Mutex<job_numbers::JobNumbers>,
}

/// A handle to the scheduler; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Opens the store, discovers the node, loads plugins and the active pipeline,
    /// re-attaches to tasks that survived a restart, and returns the scheduler with
    /// the receiver of task events (to pass to [`Scheduler::run`]).
    pub fn open(
        config: Config,
        shim_exe: std::path::PathBuf,
    ) -> anyhow::Result<(Self, mpsc::UnboundedReceiver<TaskEvent>)> {
        Self::open_fenced(config, shim_exe, None)
    }

    /// As [`Scheduler::open`], with every write of the store's active state fenced by
    /// `fence` (this controller leads a cluster on etcd: `crate::leadership`).
    pub fn open_fenced(
        config: Config,
        shim_exe: std::path::PathBuf,
        fence: Option<gantry_store::Fence>,
    ) -> anyhow::Result<(Self, mpsc::UnboundedReceiver<TaskEvent>)> {
        gantry_private_files::restrict_umask();
        gantry_private_files::dir_with_mode(&config.data_dir, gantry_private_files::TRAVERSE_ONLY)?;
        let history = config.history.backend().map_err(anyhow::Error::msg)?;
        let store = Store::open_with(
            &config.data_dir,
            config.retention.store_cache_mib,
            &config.store.backend().map_err(anyhow::Error::msg)?,
            &history,
        )?;
        store.set_fence(fence);
        let node = gantry_node::inventory::discover(&config.node);
        let cluster_token = config.cluster.effective_token();
        tracing::info!(
            node = %node.name, gpus = node.gpus.len(), source = %node.gpu_source,
            cpu_milli = node.cpu_milli, memory_mib = node.memory_mib, "local node"
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let node_gpus = node.gpus.iter().map(|g| g.index).collect();
        let isolation = gantry_node::executor::Isolation::setup(&config.execution, node_gpus)?
            .with_mig_caps(gantry_node::executor::MigCaps::read(&node.gpus));
        let executor = Executor::with_isolation(shim_exe, tx, isolation)
            .with_log_limit(config.limits.max_log_bytes())
            .with_scratch_limit(config.execution.work_dir_mib)
            .with_containers(gantry_node::container::Containers::detect(
                &config.containers,
                &config.data_dir,
            ));
        let paths = job_paths::JobPaths::under(&config.data_dir);
        if config.cluster.local_node {
            executor.warn_if_tasks_cannot_reach(&config.data_dir);
        }
        let local = match config.cluster.local_node {
            true => Some(members::Member {
                control: node_control::NodeControl::load(&store, &node)?,
                info: node.clone(),
                addr: config.cluster.advertise_addr.clone(),
                runner: Arc::new(runner_local::LocalRunner::new(
                    executor.clone(),
                    paths.clone(),
                )),
                liveness: members::Liveness::Up,
                last_heartbeat_ms: 0,
                load: Default::default(),
                unwanted: 0,
                removed: false,
            }),
            false => None,
        };
        let agent_tls =
            gantry_config::tls::ureq_tls("cluster.ca_cert", config.cluster.ca_cert.as_deref())?;
        let launch_deadline = Duration::from_millis(config.cluster.node_down_after_ms);
        // Until its first heartbeat says which protocol it speaks, an agent is taken to speak
        // this build's (its node's own credential); the heartbeat corrects both.
        let agent = |name: &str, url: &str| -> Arc<dyn runner::Runner> {
            let credential = gantry_api::cluster_token::node_credential(&cluster_token, name);
            let client = gantry_api::agent_client::AgentClient::new(url, &credential, &agent_tls);
            Arc::new(runner_agent::AgentRunner::new(client, launch_deadline))
        };
        let members = members::Members::load(&store, local, agent, now_ms())?;
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let policy = policy_ops::load_policy(&config, &store, metrics.clone())?;
        let recorder = shadow::Recorder::new(config.record_snapshots);
        let min_age_ms = config.retention.min_job_age_s * 1000;
        let jobs = job_table::JobTable::load(&store, now_ms(), min_age_ms)?;
        let ledger = accounting::Ledger::load(&store, config.usage_half_life_s as f64)?;
        let services = service_sets::ServiceSets::load(&store)?;
        let inner = Inner {
            config,
            node,
            members: Mutex::new(members),
            cluster_token,
            agent_tls,
            remote_runs: Mutex::default(),
            store,
            executor,
            paths,
            state: Mutex::new(State {
                jobs,
                cycle: 0,
                reserved_pending: BTreeMap::new(),
            }),
            policy: Mutex::new(policy),
            wake: Notify::new(),
            changed: tokio::sync::watch::Sender::new(0),
            metrics,
            decisions: Mutex::new(decisions::DecisionLog::default()),
            faults: Mutex::default(),
            recorder: Mutex::new(recorder),
            forecaster: forecasts::Forecaster::default(),
            ledger: Mutex::new(ledger),
            submit_clock: Mutex::new(0),
            services: Mutex::new(services),
            job_numbers: Mutex::default(),
        };
        Ok((
            Self {
                inner: Arc::new(inner),
            },
            rx,
        ))
    }

    /// Asks for a cycle soon.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
        self.inner.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The scheduling loop: a cycle on every wake-up and every `cycle_interval_ms`;
    /// task ends, time limits and adoption of surviving tasks are handled here too.
    pub async fn run(self, mut events: mpsc::UnboundedReceiver<TaskEvent>) {
        lock(&self.inner.members).await_agents_from(now_ms());
        self.adopt_survivors();
        self.release_stale_scratch();
        self.start_gpu_health_watch();
        self.start_gpu_usage_sampling();
        self.start_node_watch();
        self.start_collector();
        self.start_forecaster();
        let interval = Duration::from_millis(self.inner.config.cycle_interval_ms);
        loop {
            tokio::select! {
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep(interval) => {}
                Some(ev) = events.recv() => {
                    self.task_ended(ev);
                    while let Ok(ev) = events.try_recv() {
                        self.task_ended(ev);
                    }
                    // One flush for the batch (group commit of task ends).
                    let me = self.clone();
                    if let Err(e) = tokio::task::spawn_blocking(move || me.flush()).await {
                        tracing::error!("flushing task ends panicked: {e}");
                    }
                }
            }
            self.enforce_time_limits();
            self.send_due_signals();
            self.restart_due_services();
            let me = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || {
                me.reconcile_services();
                me.cycle();
            })
            .await
            {
                tracing::error!("scheduling cycle panicked: {e}");
            }
        }
    }

    /// One cycle: snapshot, engine (live, then the shadow if any), apply. Traced as a
    /// `cycle` span with a `plugin_call` child per stage call and an event per changed
    /// decision.
    pub fn cycle(&self) {
        let t0 = std::time::Instant::now();
        // The jobs and nodes are copied under the locks (pointers and a few hundred bytes a
        // node); converting them for the engine happens after, off every lock.
        let inputs = self.cycle_inputs(true, |jobs| self.apply_holds(jobs));
        let mut snap = inputs.snapshot(now_ms(), &self.inner.job_numbers);
        drop(inputs);
        let drain_note = nodes::apply_node_control(&lock(&self.inner.members), &mut snap);
        let snap = Arc::new(snap);
        let span = tracing::info_span!(
            "cycle",
            cycle_id = snap.ctx.id,
            snapshot_pending = snap.pending.len(),
            snapshot_running = snap.running.len(),
            snapshot_nodes = snap.nodes.len(),
            jobs_started = tracing::field::Empty,
            jobs_evicted = tracing::field::Empty,
            jobs_held = tracing::field::Empty,
            faults = tracing::field::Empty,
        );
        let _enter = span.enter();
        let (outcome, live) = { lock(&self.inner.policy).decide(&snap, drain_note.as_deref()) };
        let held = outcome
            .pending
            .iter()
            .filter(|(_, r)| r.stage == gantry_contract::Stage::Admission)
            .count();
        span.record("jobs_started", outcome.starts.len());
        span.record("jobs_evicted", outcome.evictions.len());
        span.record("jobs_held", held);
        span.record("faults", outcome.faults.len());
        self.trace_decisions(snap.ctx.id, &live);
        lock(&self.inner.recorder).record(snap.clone(), live);
        let m = &self.inner.metrics;
        m.cycles.inc();
        m.evictions.inc_by(outcome.evictions.len() as u64);
        for f in &outcome.faults {
            let labels = crate::metrics::PluginFault {
                plugin: f.plugin.name.clone(),
                stage: f.stage.as_str().to_string(),
                kind: f.fault.kind.as_str().to_string(),
            };
            m.plugin_faults.get_or_create(&labels).inc();
        }
        self.offer_forecast(&snap, &outcome);
        self.apply(outcome);
        self.evict_ended_jobs();
        self.retry_queued_accounting();
        m.cycle_duration.observe(t0.elapsed().as_secs_f64());
    }

    /// Logs (and traces) the decisions that changed since the job's last one.
    fn trace_decisions(&self, cycle: u64, live: &BTreeMap<u64, decisions::Decision>) {
        let changed = lock(&self.inner.decisions).record(cycle, now_ms(), live);
        for (job, d, previous) in changed {
            match (d.decision, previous) {
                ("hold", p) if p != Some("hold") => {
                    job_trace::job_event(job, "held", cycle, &d.message)
                }
                ("pending", p) if p != Some("pending") => {
                    let detail = format!("admitted; waiting: {}", d.message);
                    job_trace::job_event(job, "admitted", cycle, &detail)
                }
                _ => {}
            }
            tracing::info!(
                target: "gantry::decision",
                job_id = job,
                decision = d.decision,
                reason_code = %d.reason_code,
                reason_message = %d.message,
                plugin = %d.plugin,
                "job {job}: {}",
                d.summary()
            );
        }
    }
}
