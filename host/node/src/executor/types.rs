//! The executor's public types: what starts a task ([`TaskLaunch`]), how it ended
//! ([`TaskExit`]), what it used ([`TaskUsage`]), the event that reports both ([`TaskEvent`]),
//! a started task ([`RunningTask`]) and why a start failed ([`ExecError`]).
//!
//! Owns these definitions only; the behaviour is in `mod.rs` and its siblings. `TaskExit` and
//! `TaskUsage` are defined in `gantry-api` (they are on the wire) and re-exported here.

use std::io;
use std::path::PathBuf;

use super::cgroup::CgroupError;
use super::identity::TaskIdentity;

pub use gantry_api::task::{TaskExit, TaskUsage};

/// Everything needed to start one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLaunch {
    /// The job the task belongs to.
    pub job_id: u64,
    /// The task's index within its job (its gang rank).
    pub task_index: u32,
    /// The command; `argv[0]` is resolved via `PATH` (the task's `PATH` if `env` sets one).
    pub argv: Vec<String>,
    /// The scheduler's variables (`CUDA_VISIBLE_DEVICES` etc.) and the job's `env`, on top of the
    /// base the executor chooses (`environment.rs`); nothing else of the daemon's environment.
    pub env: Vec<(String, String)>,
    /// The command's working directory; the daemon's if `None`.
    pub workdir: Option<PathBuf>,
    /// File that stdout and stderr are both appended to; parent directories are created.
    pub log_path: PathBuf,
    /// File where the shim records the exit status as JSON (`{"exit": {"Exited": 0}}`).
    pub exit_path: PathBuf,
    /// The node's GPUs (indices) the task was given; it is denied the others' device nodes.
    pub gpus: Vec<u32>,
    /// CPU, milli-cores (the cgroup's CPU quota).
    pub cpu_milli: u32,
    /// Memory, MiB (the cgroup's hard limit).
    pub memory_mib: u64,
    /// Who the command runs as (see [`super::Executor::identity`]); the daemon's user when `None`.
    pub identity: Option<TaskIdentity>,
    /// The command's stdin: `/dev/null`, or a pipe or terminal fed through
    /// [`super::task_input::send`] (an interactive job's first task).
    pub input: super::task_input::TaskInput,
    /// Files for stdout and stderr instead of the log (`sbatch --output/--error`), opened
    /// by the task as its user, relative to its working directory.
    pub stdout_file: Option<PathBuf>,
    pub stderr_file: Option<PathBuf>,
    /// The image the command runs in (`container`); the host's root file system when `None`.
    pub image: Option<String>,
    /// Host paths mounted inside the image (checked by the daemon against `allowed_mounts`).
    pub mounts: Vec<gantry_api::model::ContainerMount>,
}

/// The end of one task, sent on the executor's event channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent {
    /// The job the task belongs to.
    pub job_id: u64,
    /// The task's index within its job.
    pub task_index: u32,
    /// How it ended.
    pub exit: TaskExit,
    /// What it used.
    pub usage: TaskUsage,
}

/// A task that was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningTask {
    /// The shim's pid, which is also the id of the task's process group.
    pub pid: u32,
}

/// Why a task could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The launch has no command.
    #[error("task has an empty argv")]
    EmptyArgv,
    /// A path that goes on the shim's command line is not valid UTF-8.
    #[error("path is not valid UTF-8: {}", .0.display())]
    NonUtf8Path(PathBuf),
    /// `launch` was called outside a tokio runtime.
    #[error("launch must be called from within a tokio runtime")]
    NoRuntime,
    /// A directory for the log or exit file could not be created, or a stale record removed.
    #[error("cannot prepare {}: {source}", path.display())]
    Prepare {
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The shim process could not be started.
    #[error("cannot start the task shim {}: {source}", exe.display())]
    Spawn {
        /// The shim executable.
        exe: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The task asks for an image and this node cannot run one.
    #[error("cannot run an image on this node: {0}")]
    Container(String),
    /// The shim started but its pid could not be obtained.
    #[error("the task shim started but has no pid")]
    NoPid,
    /// The task's cgroup could not be set up.
    #[error("cannot set up the task's cgroup: {0}")]
    Cgroup(#[from] CgroupError),
}
