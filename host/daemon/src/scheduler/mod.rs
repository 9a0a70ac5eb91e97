//! The scheduler: the daemon's single owner of job state. It turns API calls into
//! durable records, runs a cycle on every event and on a timer (snapshot → engine →
//! apply), launches and stops tasks through the executor, and reacts to task ends.
//!
//! Owns: in-memory job state (mirrored to the store), the live and fallback
//! pipelines, recent plugin faults. Does not own HTTP (`api`), the policy logic
//! (`gantry-engine` + plugins) or processes (`executor`).

mod apply;
pub mod jobs;
pub mod policy_ops;
pub mod snapshot;

use crate::config::Config;
use crate::executor::{Executor, TaskEvent};
use crate::inventory::NodeInfo;
use crate::model::JobRecord;
use crate::policy::{PipelineVersion, Registry};
use crate::store::Store;
use gantry_engine::{FaultRecord, Pipeline};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, mpsc};

pub use jobs as jobs_api;
pub use jobs::{JobFilter, NodeView};
pub use policy_ops as policy_api;
pub use policy_ops::PolicyView;

/// Faults kept for the API.
const RECENT_FAULTS: usize = 200;

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
    pub(crate) jobs: BTreeMap<u64, JobRecord>,
    pub(crate) cycle: u64,
    pub(crate) faults: VecDeque<FaultView>,
    pub(crate) fault_counts: BTreeMap<String, u64>,
}

pub(crate) struct PolicyState {
    pub(crate) registry: Registry,
    pub(crate) live: Pipeline,
    /// Whether the live pipeline's last cycle that decided something had no fault.
    pub(crate) live_good: bool,
    /// Answers for a stage whose live plugin fails: the last good pipeline (the one
    /// live before the latest swap, if it had proved itself), else the built-in default.
    pub(crate) fallback: Pipeline,
    /// Version of the fallback pipeline (`None`: the built-in default).
    pub(crate) fallback_version: Option<u64>,
    pub(crate) active: PipelineVersion,
    pub(crate) history: Vec<PipelineVersion>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) node: NodeInfo,
    pub(crate) store: Store,
    pub(crate) executor: Executor,
    pub(crate) state: Mutex<State>,
    pub(crate) policy: Mutex<PolicyState>,
    pub(crate) wake: Notify,
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

impl State {
    pub(crate) fn record_faults(&mut self, cycle: u64, faults: &[FaultRecord], store: &Store) {
        for f in faults {
            tracing::warn!(
                stage = %f.stage, plugin = %f.plugin.name, kind = f.fault.kind.as_str(), fell_back = f.fell_back,
                "plugin fault: {}", f.fault.message
            );
            *self
                .fault_counts
                .entry(format!(
                    "{}/{}/{}",
                    f.plugin.name,
                    f.stage,
                    f.fault.kind.as_str()
                ))
                .or_default() += 1;
            let at_ms = now_ms();
            let _ = store.event(
                at_ms,
                None,
                "fault",
                format!("{} at {}: {}", f.plugin.name, f.stage, f.fault),
            );
            if self.faults.len() >= RECENT_FAULTS {
                self.faults.pop_front();
            }
            self.faults.push_back(FaultView {
                cycle,
                at_ms,
                record: f.clone(),
            });
        }
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
        std::fs::create_dir_all(&config.data_dir)?;
        let store = Store::open(&config.data_dir)?;
        let node = crate::inventory::discover(&config.node);
        tracing::info!(
            node = %node.name, gpus = node.gpus.len(), source = %node.gpu_source,
            cpu_milli = node.cpu_milli, memory_mib = node.memory_mib, "local node"
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let executor = Executor::new(shim_exe, tx);
        let policy = policy_ops::load_policy(&config, &store)?;
        let jobs: BTreeMap<u64, JobRecord> = store.jobs()?.into_iter().map(|j| (j.id, j)).collect();
        let inner = Inner {
            config,
            node,
            store,
            executor,
            state: Mutex::new(State {
                jobs,
                cycle: 0,
                faults: VecDeque::new(),
                fault_counts: BTreeMap::new(),
            }),
            policy: Mutex::new(policy),
            wake: Notify::new(),
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
    }

    /// The scheduling loop: a cycle on every wake-up and every `cycle_interval_ms`;
    /// task ends, time limits and adoption of surviving tasks are handled here too.
    pub async fn run(self, mut events: mpsc::UnboundedReceiver<TaskEvent>) {
        self.adopt_survivors();
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
                }
            }
            self.enforce_time_limits();
            let me = self.clone();
            if let Err(e) = tokio::task::spawn_blocking(move || me.cycle()).await {
                tracing::error!("scheduling cycle panicked: {e}");
            }
        }
    }

    /// One cycle: snapshot, engine, apply.
    pub fn cycle(&self) {
        let snap = {
            let mut st = lock(&self.inner.state);
            st.cycle += 1;
            snapshot::build(st.jobs.values(), &self.inner.node, st.cycle, now_ms())
        };
        let outcome = {
            let mut pol = lock(&self.inner.policy);
            let PolicyState { live, fallback, .. } = &mut *pol;
            let outcome = gantry_engine::run_cycle(&snap, live, Some(fallback));
            if !outcome.faults.is_empty() {
                pol.live_good = false;
            } else if !outcome.order.is_empty() {
                pol.live_good = true;
            }
            outcome
        };
        self.apply(outcome);
    }
}
