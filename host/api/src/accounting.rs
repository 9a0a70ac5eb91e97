//! Accounting as stored and served: one [`AccountingRecord`] per ended task process (kept in
//! the daemon's store) and the `GET /v1/accounting` answer ([`AccountingReport`]: the
//! records and [`Totals`] per user, per account and overall).
//!
//! Owns these data types. Writing records (the daemon's `scheduler::accounting`,
//! `store::accounting`) and summing them (`api::accounting`) are the daemon's.

use crate::model::GpuShareView;
use crate::task::TaskExit;
use serde::{Deserialize, Serialize};

/// What one ended process of a task used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountingRecord {
    /// Job id.
    pub job_id: u64,
    /// The task's index in its job.
    pub task_index: u32,
    /// Which run of the job: its requeues plus restarts when the process ended.
    pub run: u32,
    /// The job's name.
    pub job_name: String,
    /// Who submitted the job.
    pub user: String,
    /// The account charged.
    pub account: String,
    /// The job's queue.
    pub queue: String,
    /// The node the task ran on.
    pub node: String,
    /// GPU shares held (device index and milli-GPU).
    pub gpus: Vec<GpuShareView>,
    /// CPU allocated, milli-cores.
    pub cpu_milli: u32,
    /// Memory allocated, MiB.
    pub memory_mib: u64,
    /// When the process started, ms since the Unix epoch.
    pub start_ms: u64,
    /// When it ended, ms since the Unix epoch.
    pub end_ms: u64,
    /// Σ milli-GPU held × wall seconds (1000 = one GPU for one second).
    pub gpu_milli_seconds: u64,
    /// CPU time the process tree used (user + system), seconds.
    pub cpu_seconds: f64,
    /// Peak resident memory, MiB (0 when it was not measured).
    pub memory_peak_mib: u64,
    /// How it ended.
    pub exit: TaskExit,
    /// The out-of-memory killer ended a process of the task.
    pub oom_killed: bool,
    /// Why this run is not charged to fair share (a GPU of the job failed under it), or
    /// `None` when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncharged: Option<String>,
    /// GPU time the task's processes used (NVML's samples, `TaskGpuUsage`), milli-GPU-
    /// seconds; `None` when its GPUs were not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_used_milli_seconds: Option<u64>,
}

impl AccountingRecord {
    /// GPU-seconds (one GPU for one second is 1.0).
    pub fn gpu_seconds(&self) -> f64 {
        self.gpu_milli_seconds as f64 / 1000.0
    }

    /// Wall seconds from start to end.
    pub fn elapsed_s(&self) -> f64 {
        self.end_ms.saturating_sub(self.start_ms) as f64 / 1000.0
    }
}

/// Sums over a set of records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    /// The user or account (empty for the grand total).
    pub name: String,
    /// GPU-seconds (milli-GPU-seconds / 1000).
    pub gpu_seconds: f64,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// GPU-hours used, as sampled (`gpu_used_milli_seconds`), over the records that were.
    #[serde(default)]
    pub gpu_used_hours: f64,
    /// GPU-hours allocated to the records whose use was sampled: `gpu_used_hours` of this
    /// is the share of allocated GPU time the jobs used.
    #[serde(default)]
    pub gpu_hours_sampled: f64,
    /// CPU-seconds used.
    pub cpu_seconds: f64,
    /// CPU-hours used.
    pub cpu_hours: f64,
    /// Records (ended task processes).
    pub records: u64,
    /// Distinct jobs.
    pub jobs: u64,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AccountingReport {
    /// Matching records, oldest end first (the newest `limit` of them).
    pub records: Vec<AccountingRecord>,
    /// Whether records were left out by `limit`.
    pub truncated: bool,
    /// Over all matching records.
    pub total: Totals,
    /// Per user, by name.
    pub users: Vec<Totals>,
    /// Per account, by name.
    pub accounts: Vec<Totals>,
}
