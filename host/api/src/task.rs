//! How a task ended ([`TaskExit`]), what it used ([`TaskUsage`]) and what it reads as its
//! input ([`TaskInput`]): the plain records the node's executor writes (`task-N.exit`), the
//! job record keeps and the cluster protocol carries.
//!
//! Owns these data types only. Measuring and recording them is `gantry-node`'s executor,
//! which re-exports them as `gantry_node::executor::{TaskExit, TaskUsage, TaskInput}`.

/// How a task reads its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskInput {
    /// `/dev/null` (every batch task, and every task of a job but its first).
    #[default]
    None,
    /// A pipe fed with what the client sends, closed at its end of input.
    Pipe,
    /// A terminal of this size: the command's stdin, stdout and stderr and its controlling
    /// terminal; the output goes to the task's log as a terminal shows it.
    Tty { rows: u16, cols: u16 },
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TaskExit {
    /// The command exited with this code.
    Exited(i32),
    /// The command (or the shim, if it had to be killed) was killed by this signal.
    Signaled(i32),
    /// The process vanished with no exit record.
    Lost,
    /// The task's image could not be pulled or unpacked: its command never started (exit
    /// code 125, as `docker run` answers; a command's own exit 125 stays `Exited(125)`).
    ImageFailed,
}

/// What a task's processes used, measured when it ended (from its cgroup when it had one,
/// else from the kernel's accounting of the command's process tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskUsage {
    /// CPU time (user + system), milliseconds.
    pub cpu_ms: u64,
    /// Peak resident memory, MiB.
    pub memory_peak_mib: u64,
    /// The kernel's out-of-memory killer ended a process of the task.
    pub oom_killed: bool,
}
