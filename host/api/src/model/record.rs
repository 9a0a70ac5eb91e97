//! What the daemon keeps about a job once it is accepted: its state, the tasks of its current
//! (or last) run, why it waits or ended, and its place in an array.
//!
//! Owns: the stored record types. Does not own the submission and its validation
//! (`model`), or the transitions (`scheduler`).

use super::JobSpec;
use crate::task::{TaskExit, TaskUsage};
use gantry_contract::ReasonCode;
use serde::{Deserialize, Serialize};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting to start.
    Pending,
    /// Tasks are running.
    Running,
    /// All tasks exited 0.
    Succeeded,
    /// A task failed, or its process was lost.
    Failed,
    /// Cancelled by a user.
    Cancelled,
    /// Killed at its time limit.
    TimedOut,
    /// Evicted and not requeued.
    Preempted,
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Preempted => "preempted",
        }
    }
}

/// Why a running job is being stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// A user cancelled it.
    Cancel,
    /// It reached its time limit.
    TimeLimit,
    /// A preemption policy evicted it for another job.
    Evicted {
        /// The job it makes room for.
        for_job: u64,
    },
    /// Another task of the gang failed.
    GangFailed,
    /// A task of the gang could not be started; the rest are being stopped.
    LaunchFailed,
    /// A node the job ran on stopped answering; the rest of the gang is being stopped.
    NodeDown {
        /// The node.
        node: String,
    },
    /// Its owner or an operator asked for it to run again from the start (`scontrol
    /// requeue`): the tasks are stopped and the job goes back to the queue.
    Requeue,
    /// A GPU it held failed (a critical Xid, fallen off the bus, ECC): the gang is stopped
    /// and requeued, and the GPU time of this run is not charged to fair share.
    GpuFault {
        /// The node of the GPU.
        node: String,
        /// The GPU's index on that node.
        gpu: u32,
        /// The health rules' verdict.
        reason: String,
    },
}

/// The current reason a job waits (or why it ended).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReasonView {
    /// The stage that gave it ("admission", "placement", "host"...).
    pub stage: String,
    /// Machine-readable code.
    pub code: ReasonCode,
    /// Human message.
    pub message: String,
    /// The plugin that gave it.
    pub plugin: String,
    /// The cycle that gave it.
    pub cycle: u64,
    /// What the priority stage said about the job, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_note: Option<String>,
}

/// A GPU share on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuShareView {
    /// Device index.
    pub index: u32,
    /// Share in milli-GPU.
    pub milli: u32,
}

/// One task of a started job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskRecord {
    /// Node name.
    pub node: String,
    /// GPUs held.
    pub gpus: Vec<GpuShareView>,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Process group id of the task's shim, once launched.
    pub pid: Option<u32>,
    /// How it ended.
    pub exit: Option<TaskExit>,
    /// When its current (or last) process started, ms since the Unix epoch.
    #[serde(default)]
    pub started_ms: Option<u64>,
    /// When its last process ended, ms since the Unix epoch (the time its exit record was
    /// written where the daemon can see it, else when the daemon learnt of the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// CPU time and memory peak of its ended processes (summed over service restarts).
    #[serde(default)]
    pub usage: Option<TaskUsage>,
    /// Its GPUs' measured use in this run (NVML's process samples), when sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_usage: Option<crate::gpu_usage::TaskGpuUsage>,
}

/// Everything the daemon keeps about a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobRecord {
    /// Job id.
    pub id: u64,
    /// What was submitted (after admission patches).
    pub spec: JobSpec,
    /// State.
    pub state: JobState,
    /// Submit time, ms since the Unix epoch.
    pub submit_ms: u64,
    /// Start time of the current or last run.
    pub start_ms: Option<u64>,
    /// End time.
    pub end_ms: Option<u64>,
    /// Tasks of the current or last run.
    pub tasks: Vec<TaskRecord>,
    /// Exit code of the job (the first failing task's, or 0).
    pub exit_code: Option<i32>,
    /// Why it waits, or why it ended.
    pub reason: Option<ReasonView>,
    /// Effective tier at the last cycle.
    pub tier: i32,
    /// Effective score at the last cycle.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub score: f64,
    /// Set while a stop is under way.
    pub stopping: Option<StopCause>,
    /// Times it went back to the queue after an eviction.
    pub requeues: u32,
    /// Its place in an array, if it was submitted as one.
    #[serde(default)]
    pub array: Option<ArrayMember>,
    /// Machine-readable cause of its end: `exit-code`, `out-of-memory`, `cancelled`,
    /// `time-limit`, `preempted`, `launch-failed`, `dependency-never-satisfied`...
    #[serde(default)]
    pub end_reason: Option<String>,
    /// Restarts of a service (or of its tasks) so far.
    #[serde(default)]
    pub restarts: u32,
    /// When a service waiting out its back-off restarts, ms since the Unix epoch.
    #[serde(default)]
    pub restart_at_ms: Option<u64>,
    /// The port a service listens on (on the node of its first task).
    #[serde(default)]
    pub service_port: Option<u16>,
    /// A service's health checks and restart back-off (none for other jobs).
    #[serde(default)]
    pub health: Option<super::ServiceHealth>,
    /// Whether the time-limit warning signal was sent in the current run.
    #[serde(default)]
    pub warned: bool,
    /// `MASTER_PORT` of the current run, chosen free when it started.
    #[serde(default)]
    pub rendezvous_port: Option<u16>,
    /// Who held this pending job (`gantry hold`, as `scontrol hold`): it does not start until
    /// released (`gantry release`).
    #[serde(default)]
    pub held_by: Option<String>,
    /// The role of whoever held it (`held_by`): a hold set by an `operator` or `admin` is
    /// released only by an operator or admin, never by the job's owner. A record written
    /// before holds carried it (or a job not held) has none; an old hold counts as its
    /// owner's.
    #[serde(default)]
    pub held_role: Option<HoldRole>,
    /// Who cancelled it (the caller's user name), as `sacct` shows `CANCELLED by UID`;
    /// none for a job not cancelled, or cancelled by the daemon itself.
    #[serde(default)]
    pub cancelled_by: Option<String>,
    /// An eviction's checkpoint signal not sent yet: the job was warned first
    /// (`eviction.warn-s`, contract 0.3) and is signalled when it is due.
    #[serde(default)]
    pub signal_due: Option<DueSignal>,
    /// When a pending job is expected to start (the controller's latest forecast; set on
    /// the API's answers only, never stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_forecast: Option<StartForecast>,
}

/// A pending job's expected start: the median and 90th percentile over the forecast's
/// replays of the queue, and why it waits until then (`docs/user/forecasts.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartForecast {
    /// Median start, ms since the Unix epoch; none when it is not expected to start
    /// within the forecast's horizon (or never: `reason` says).
    pub p50_ms: Option<u64>,
    /// 90th percentile start; none as above.
    pub p90_ms: Option<u64>,
    /// Why it waits until then ("when job 12 ends; 3 jobs ahead"), or why it never starts.
    pub reason: String,
    /// When the forecast was computed, ms since the Unix epoch.
    pub computed_ms: u64,
}

/// A signal the controller sends a running job later (`JobRecord::signal_due`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DueSignal {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// The signal number.
    pub signal: i32,
    /// Seconds from the signal to SIGKILL.
    pub grace_s: u32,
}

/// Who set a hold, for who may lift it (`JobRecord::held_role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HoldRole {
    /// The job's owner (or another caller with a user's rights): its owner may release it.
    User,
    /// An operator: only an operator or admin may release it.
    Operator,
    /// An administrator: only an operator or admin may release it.
    Admin,
}

impl HoldRole {
    /// Whether only an operator or admin may lift the hold.
    pub fn is_privileged(self) -> bool {
        self >= Self::Operator
    }

    /// Lower-case name, for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }
}

/// A job's place in an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArrayMember {
    /// Id of the array: the id of its first member.
    pub array_id: u64,
    /// This member's index (`GANTRY_ARRAY_INDEX`).
    pub index: u32,
    /// At most this many members run at once.
    pub max_running: Option<u32>,
    /// How many members the array has (`SLURM_ARRAY_TASK_COUNT`; 0 in records made before
    /// it was kept).
    #[serde(default)]
    pub count: u32,
    /// The array's lowest index (`SLURM_ARRAY_TASK_MIN`).
    #[serde(default)]
    pub min: u32,
    /// The array's highest index (`SLURM_ARRAY_TASK_MAX`).
    #[serde(default)]
    pub max: u32,
}

impl JobRecord {
    /// GPU share its current (or last) run holds, in milli-GPU.
    pub fn gpu_milli_held(&self) -> u64 {
        self.tasks
            .iter()
            .flat_map(|t| &t.gpus)
            .map(|g| u64::from(g.milli))
            .sum()
    }

    /// A freshly accepted job.
    pub fn new(id: u64, spec: JobSpec, submit_ms: u64) -> Self {
        let tier = spec.tier;
        Self {
            id,
            spec,
            state: JobState::Pending,
            submit_ms,
            start_ms: None,
            end_ms: None,
            tasks: Vec::new(),
            exit_code: None,
            reason: None,
            tier,
            score: 0.0,
            stopping: None,
            requeues: 0,
            array: None,
            end_reason: None,
            restarts: 0,
            restart_at_ms: None,
            service_port: None,
            health: None,
            warned: false,
            rendezvous_port: None,
            held_by: None,
            held_role: None,
            cancelled_by: None,
            signal_due: None,
            start_forecast: None,
        }
    }
}
