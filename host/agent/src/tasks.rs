//! The agent's task table: one entry per task run ([`TaskKey`]) it has not yet had
//! acknowledged, running or ended, and the directory of every run,
//! `<data_dir>/agent-tasks/<job>.<task>.<run>/` (`log`, `exit`, `script`, `pid`, and `acked`
//! once the controller recorded its end). What the controller asks of a running task
//! (signals, stops) and what the executor reports (ends) meet here.
//!
//! Owns: the table, its lock, the per-run paths, ends, acknowledgements, stops and signals.
//! Does not own starting a task (`launch`), re-reading the table after a restart
//! (`recover`), nor processes (`executor`).

use gantry_api::cluster::{EndReport, PROTOCOL_VERSION, RunningReport, SignalRequest, TaskKey};
use gantry_node::executor::{ExecError, Executor, IdentityError, TaskEvent, TaskExit, TaskUsage};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// File in a run's directory that marks its end as acknowledged by the controller.
pub(crate) const ACKED: &str = "acked";

/// One run the controller has not yet forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The shim's pid (0: unknown, for a run that ended while the agent was down).
    pub pid: u32,
    /// How it ended and what it used, once it has.
    pub end: Option<(TaskExit, TaskUsage)>,
    /// A stop was already sent (the controller repeats its stops until the end is in).
    pub stop_sent: bool,
}

impl Entry {
    pub(crate) fn running(pid: u32) -> Self {
        Self {
            pid,
            end: None,
            stop_sent: false,
        }
    }

    pub(crate) fn ended(pid: u32, exit: TaskExit, usage: TaskUsage) -> Self {
        Self {
            pid,
            end: Some((exit, usage)),
            stop_sent: false,
        }
    }
}

/// Why a request about a task was refused; [`TaskError::status`] and [`TaskError::field`]
/// give the HTTP answer (4xx: the controller gives up; 5xx: it may retry).
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// The controller speaks another protocol version.
    #[error("protocol {given} is not this agent's protocol {PROTOCOL_VERSION}")]
    Protocol { given: u32 },
    /// The request body is not a valid request.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// Neither a command nor a script.
    #[error("the launch of task {0} has neither argv nor script")]
    NoCommand(TaskKey),
    /// A GPU index this node does not have.
    #[error("task {key} asks for GPU {index}, which is not on this node (GPUs: {have:?})")]
    NoSuchGpu {
        key: TaskKey,
        index: u32,
        have: Vec<u32>,
    },
    /// The job's user may not run tasks here.
    #[error("task {key} may not run as user {user:?}: {source}")]
    Identity {
        key: TaskKey,
        user: String,
        #[source]
        source: IdentityError,
    },
    /// The run's directory, script or working directory could not be prepared.
    #[error("cannot prepare task {key}: {what}: {source}")]
    Prepare {
        key: TaskKey,
        what: String,
        #[source]
        source: io::Error,
    },
    /// The executor could not start it.
    #[error("task {key} failed to launch: {source}")]
    Launch {
        key: TaskKey,
        #[source]
        source: ExecError,
    },
    /// Not a task this agent runs now.
    #[error("task {0} is not running on this agent")]
    NotRunning(TaskKey),
    /// Not a task this agent knows at all.
    #[error("task {0} is unknown on this agent")]
    Unknown(TaskKey),
    /// A signal number out of range.
    #[error("signal {0} is not a valid signal number")]
    BadSignal(i32),
    /// The signal could not be sent.
    #[error("cannot signal task {key}: {source}")]
    Signal {
        key: TaskKey,
        #[source]
        source: io::Error,
    },
}

impl TaskError {
    /// The HTTP status of this refusal.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Self::Protocol { .. } => 409,
            Self::Malformed(_) | Self::NoCommand(_) | Self::NoSuchGpu { .. } => 400,
            Self::BadSignal(_) => 400,
            Self::Identity { .. } => 403,
            Self::NotRunning(_) | Self::Unknown(_) => 404,
            Self::Launch { source, .. } => match source {
                ExecError::EmptyArgv | ExecError::NonUtf8Path(_) => 400,
                _ => 500,
            },
            Self::Signal { source, .. } if source.raw_os_error() == Some(libc::ESRCH) => 404,
            Self::Prepare { .. } | Self::Signal { .. } => 500,
        }
    }

    /// The request field concerned, when one is.
    pub(crate) fn field(&self) -> Option<&'static str> {
        match self {
            Self::Protocol { .. } => Some("protocol"),
            Self::NoCommand(_) => Some("argv"),
            Self::NoSuchGpu { .. } => Some("gpus"),
            Self::Identity { .. } => Some("user"),
            Self::NotRunning(_) | Self::Unknown(_) => Some("key"),
            Self::BadSignal(_) => Some("signal"),
            Self::Launch { source, .. } => match source {
                ExecError::EmptyArgv => Some("argv"),
                ExecError::NonUtf8Path(_) => Some("workdir"),
                _ => None,
            },
            Self::Malformed(_) | Self::Prepare { .. } | Self::Signal { .. } => None,
        }
    }
}

/// The task runs of this agent.
#[derive(Debug)]
pub(crate) struct TaskTable {
    pub(crate) root: PathBuf,
    pub(crate) executor: Executor,
    pub(crate) node_gpus: BTreeSet<u32>,
    kill_grace: Duration,
    /// Held across "is the key known?" and the start, so a key starts at most once.
    pub(crate) entries: Mutex<BTreeMap<TaskKey, Entry>>,
}

impl TaskTable {
    /// A table whose runs live under `root` (created if missing).
    pub(crate) fn new(
        root: PathBuf,
        executor: Executor,
        node_gpus: BTreeSet<u32>,
        kill_grace: Duration,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(&root)?;
        Ok(Self {
            root,
            executor,
            node_gpus,
            kill_grace,
            entries: Mutex::default(),
        })
    }

    /// The directory of one run.
    pub(crate) fn dir(&self, key: TaskKey) -> PathBuf {
        self.root.join(key.to_string())
    }

    /// The exit record of one run.
    pub(crate) fn exit_path(dir: &Path) -> PathBuf {
        dir.join("exit")
    }

    /// The log of one run (stdout and stderr).
    pub(crate) fn log_path(dir: &Path) -> PathBuf {
        dir.join("log")
    }

    /// Records an executor event: the running run of that job and task has ended. When more
    /// than one run of it is running (an old one still stopping), the one whose shim is gone.
    pub(crate) fn task_ended(&self, event: &TaskEvent) {
        let mut entries = lock(&self.entries);
        let candidates: Vec<TaskKey> = entries
            .iter()
            .filter(|(k, e)| k.job == event.job_id && k.task == event.task_index && e.end.is_none())
            .map(|(k, _)| *k)
            .collect();
        let gone = |k: &&TaskKey| {
            entries
                .get(*k)
                .is_some_and(|e| !Path::new(&format!("/proc/{}", e.pid)).exists())
        };
        let Some(key) = candidates.iter().find(gone).or(candidates.first()).copied() else {
            tracing::debug!(
                job = event.job_id,
                task = event.task_index,
                "end of a task this agent does not list as running"
            );
            return;
        };
        if let Some(entry) = entries.get_mut(&key) {
            entry.end = Some((event.exit, event.usage));
            tracing::info!(%key, exit = ?event.exit, "task ended");
            if let Err(e) = self.executor.release_workdir(&self.dir(key)) {
                tracing::warn!(%key, error = %e, "cannot unmount the run's scratch directory");
            }
        }
    }

    /// What the next heartbeat reports: the running runs and the ends not yet acknowledged.
    pub(crate) fn report(&self) -> (Vec<RunningReport>, Vec<EndReport>) {
        let entries = lock(&self.entries);
        let mut running = Vec::new();
        let mut ended = Vec::new();
        for (key, e) in entries.iter() {
            match e.end {
                None => running.push(RunningReport {
                    key: *key,
                    pid: e.pid,
                }),
                Some((exit, usage)) => ended.push(EndReport {
                    key: *key,
                    exit,
                    usage,
                }),
            }
        }
        (running, ended)
    }

    /// The controller recorded these ends: mark them on disk and forget them. An end whose
    /// marker cannot be written stays (and is reported again).
    pub(crate) fn acknowledge(&self, keys: &[TaskKey]) {
        let mut entries = lock(&self.entries);
        for key in keys {
            if entries.get(key).is_none_or(|e| e.end.is_none()) {
                continue;
            }
            match std::fs::write(self.dir(*key).join(ACKED), b"") {
                Ok(()) => {
                    entries.remove(key);
                }
                Err(e) => {
                    tracing::warn!(%key, error = %e, "cannot mark the task's end acknowledged")
                }
            }
        }
    }

    /// The controller does not want these runs: SIGTERM, then SIGKILL after `kill_grace_s`
    /// (once per run).
    pub(crate) fn stop(&self, keys: &[TaskKey]) {
        let mut entries = lock(&self.entries);
        for key in keys {
            let Some(entry) = entries.get_mut(key) else {
                continue;
            };
            if entry.end.is_some() || entry.stop_sent || entry.pid <= 1 {
                continue;
            }
            tracing::info!(%key, pid = entry.pid, "stopping a task the controller does not want");
            self.executor
                .terminate_with(entry.pid, libc::SIGTERM, self.kill_grace);
            entry.stop_sent = true;
        }
    }

    /// A signal from the controller: with `grace_ms` a stop (SIGKILL after the grace), else
    /// the signal alone.
    pub(crate) fn signal(&self, request: &SignalRequest) -> Result<(), TaskError> {
        let key = request.key;
        if !(1..=64).contains(&request.signal) {
            return Err(TaskError::BadSignal(request.signal));
        }
        let pid = {
            let entries = lock(&self.entries);
            match entries.get(&key) {
                Some(e) if e.end.is_none() && e.pid > 1 => e.pid,
                _ => return Err(TaskError::NotRunning(key)),
            }
        };
        match request.grace_ms {
            Some(ms) => {
                self.executor
                    .terminate_with(pid, request.signal, Duration::from_millis(ms));
                Ok(())
            }
            None => self
                .executor
                .signal_scoped(pid, request.signal, request.scope)
                .map_err(|source| TaskError::Signal { key, source }),
        }
    }
}

/// Locks `m`, recovering the data of a poisoned lock (every update leaves it consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
