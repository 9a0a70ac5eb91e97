//! What each stage returns, mirroring `wit/0.1.0/stages.wit` and `wit/0.1.0/plugin.wit`.

use crate::types::{JobId, Reason, TaskAllocation};
use serde::{Deserialize, Serialize};

/// The four policy stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Admission (submit-time and per-cycle).
    Admission,
    /// Priority scores.
    Priority,
    /// Placement.
    Placement,
    /// Preemption.
    Preemption,
}

impl Stage {
    /// All stages in cycle order.
    pub const ALL: [Stage; 4] = [
        Stage::Admission,
        Stage::Priority,
        Stage::Placement,
        Stage::Preemption,
    ];

    /// Lower-case name, as in pipeline files and the WIT interface name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Admission => "admission",
            Stage::Priority => "priority",
            Stage::Placement => "placement",
            Stage::Preemption => "preemption",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Describes a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// Short name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// Contract version it was built against.
    pub contract: String,
    /// Stages it implements.
    pub stages: Vec<Stage>,
    /// Describes the JSON config.
    pub config_hint: String,
}

/// Defaults an admission plugin fills in at submit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobPatch {
    /// New queue.
    pub queue: Option<String>,
    /// New tier.
    pub tier: Option<i32>,
    /// New time limit in seconds (0 clears it).
    pub time_limit_s: Option<u64>,
    /// New preemptible flag.
    pub preemptible: Option<bool>,
    /// Labels to add or overwrite.
    #[serde(default)]
    pub labels: Vec<(String, String)>,
}

/// The answer at submit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmitVerdict {
    /// Accept as is.
    Accept,
    /// Accept with a patch.
    AcceptWith(JobPatch),
    /// Reject with a message for the client.
    Reject(String),
}

/// The answer for one job in a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Consider it for placement.
    Admit,
    /// Keep it pending.
    Hold(Reason),
}

/// A priority score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// Higher first within a tier.
    pub score: f64,
    /// Tier override.
    pub tier: Option<i32>,
    /// Why, shown with the job while it waits.
    #[serde(default)]
    pub note: Option<String>,
}

/// Start a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    /// The job.
    pub job: JobId,
    /// One allocation per task, in task order.
    pub tasks: Vec<TaskAllocation>,
}

/// Why a job does not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The job.
    pub job: JobId,
    /// The reason.
    pub reason: Reason,
}

/// A placement plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Plan {
    /// Jobs to start.
    pub starts: Vec<Start>,
    /// Jobs not started, with reasons.
    pub pending: Vec<Pending>,
    /// Placement stopped at this job (strict order): later jobs without a reason of
    /// their own wait behind it.
    #[serde(default)]
    pub stopped_at: Option<JobId>,
}

/// Evict a running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eviction {
    /// The victim.
    pub job: JobId,
    /// The blocked job it makes room for.
    pub for_job: JobId,
    /// Why.
    pub reason: Reason,
    /// Seconds between SIGTERM and SIGKILL.
    pub grace_s: u32,
    /// Seconds between the warning and the checkpoint signal (contract 0.3; plugins of
    /// older versions are read as 0: the signal comes with the warning). At most
    /// [`MAX_WARN_S`].
    #[serde(default)]
    pub warn_s: u32,
}

/// The longest warning an eviction may give before its checkpoint signal.
pub const MAX_WARN_S: u32 = 3600;

/// Log level of the `host.log` import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Trace.
    Trace,
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Warn.
    Warn,
    /// Error.
    Error,
}
