//! What a timeline simulation reports: the fate of every job, GPU allocation over
//! time, faults, and summary statistics (wait percentiles, usage per account).
//!
//! Owns: result types and the arithmetic over them. Does not own rendering (the
//! daemon's `simulate` command writes JSON and plots).

use gantry_contract::ReasonCode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a job's story ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum JobEnd {
    /// Ran its whole duration.
    Completed,
    /// Stopped at its time limit.
    TimedOut,
    /// Evicted and not requeued.
    Preempted,
    /// Its node went down and it was not requeued.
    NodeFailed,
    /// Refused at submit (no node could ever hold it, or an admission plugin said no).
    Rejected {
        /// Who refused ("host" for the capacity check).
        by: String,
        /// Why.
        message: String,
    },
    /// Still waiting when the simulation ended.
    Pending {
        /// The last reason it was given.
        code: Option<ReasonCode>,
        /// Its message.
        message: String,
    },
    /// Still running when the simulation ended.
    Running,
}

/// One job's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    /// Workload name.
    pub name: String,
    /// User.
    pub user: String,
    /// Account.
    pub account: String,
    /// Submit time, ms.
    pub submit_ms: u64,
    /// First start, ms.
    pub start_ms: Option<u64>,
    /// End of the last run, ms.
    pub end_ms: Option<u64>,
    /// How it ended.
    pub end: JobEnd,
    /// Times it was evicted.
    pub evictions: u32,
    /// Times it went back to the queue.
    pub requeues: u32,
    /// GPU demand, milli-GPU.
    pub gpu_milli: u64,
    /// GPU-seconds it used over all its runs.
    pub gpu_seconds: f64,
}

impl JobResult {
    /// Wait from submit to first start, seconds.
    pub fn wait_s(&self) -> Option<f64> {
        self.start_ms
            .map(|s| s.saturating_sub(self.submit_ms) as f64 / 1000.0)
    }
}

/// The cluster at one point of virtual time (after that instant's decisions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Time, ms.
    pub t_ms: u64,
    /// Milli-GPU held by running jobs.
    pub gpu_milli_held: u64,
    /// Milli-GPU on nodes that are up.
    pub gpu_milli_total: u64,
    /// Running jobs.
    pub running: u32,
    /// Pending jobs.
    pub pending: u32,
}

/// Faults of one plugin and kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCount {
    /// Plugin name.
    pub plugin: String,
    /// Fault kind (kebab-case).
    pub kind: String,
    /// How many.
    pub count: u64,
}

/// Everything a timeline run produced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TimelineResult {
    /// One entry per workload job, in workload order.
    pub jobs: Vec<JobResult>,
    /// Allocation over time.
    pub samples: Vec<Sample>,
    /// Cycles run.
    pub cycles: u64,
    /// Events handled.
    pub events: u64,
    /// Evictions decided.
    pub evictions: u64,
    /// Faults by plugin and kind.
    pub faults: Vec<FaultCount>,
    /// Virtual time at the end, ms.
    pub end_ms: u64,
}

/// Summary figures of a timeline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Jobs in the workload.
    pub jobs: usize,
    /// Jobs that ran to completion or their time limit.
    pub finished: usize,
    /// Jobs refused at submit.
    pub rejected: usize,
    /// Jobs still pending at the end.
    pub never_started: usize,
    /// Mean wait to first start, seconds (started jobs).
    pub wait_mean_s: f64,
    /// Median wait, seconds.
    pub wait_p50_s: f64,
    /// 95th percentile wait, seconds.
    pub wait_p95_s: f64,
    /// 99th percentile wait, seconds.
    pub wait_p99_s: f64,
    /// Largest wait, seconds.
    pub wait_max_s: f64,
    /// Time-weighted mean GPU allocation, % of capacity up.
    pub gpu_allocation_mean_pct: f64,
    /// Last finish − first submit, hours.
    pub makespan_h: f64,
    /// Evictions.
    pub evictions: u64,
    /// Faults.
    pub faults: u64,
    /// GPU-hours per account.
    pub gpu_hours_by_account: BTreeMap<String, f64>,
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl TimelineResult {
    /// Waits of the started jobs, seconds, sorted.
    pub fn waits_s(&self) -> Vec<f64> {
        let mut w: Vec<f64> = self.jobs.iter().filter_map(JobResult::wait_s).collect();
        w.sort_by(f64::total_cmp);
        w
    }

    /// Summary figures.
    pub fn summary(&self) -> Summary {
        let waits = self.waits_s();
        let mean = if waits.is_empty() {
            0.0
        } else {
            waits.iter().sum::<f64>() / waits.len() as f64
        };
        let (mut area, mut cap) = (0.0, 0.0);
        for w in self.samples.windows(2) {
            let dt = (w[1].t_ms - w[0].t_ms) as f64;
            area += w[0].gpu_milli_held as f64 * dt;
            cap += w[0].gpu_milli_total as f64 * dt;
        }
        let mut by_account: BTreeMap<String, f64> = BTreeMap::new();
        for j in &self.jobs {
            *by_account.entry(j.account.clone()).or_default() += j.gpu_seconds / 3600.0;
        }
        let first_submit = self.jobs.iter().map(|j| j.submit_ms).min().unwrap_or(0);
        let last_end = self
            .jobs
            .iter()
            .filter_map(|j| j.end_ms)
            .max()
            .unwrap_or(first_submit);
        Summary {
            jobs: self.jobs.len(),
            finished: self
                .jobs
                .iter()
                .filter(|j| matches!(j.end, JobEnd::Completed | JobEnd::TimedOut))
                .count(),
            rejected: self
                .jobs
                .iter()
                .filter(|j| matches!(j.end, JobEnd::Rejected { .. }))
                .count(),
            never_started: self
                .jobs
                .iter()
                .filter(|j| matches!(j.end, JobEnd::Pending { .. }))
                .count(),
            wait_mean_s: mean,
            wait_p50_s: quantile(&waits, 0.5),
            wait_p95_s: quantile(&waits, 0.95),
            wait_p99_s: quantile(&waits, 0.99),
            wait_max_s: waits.last().copied().unwrap_or(0.0),
            gpu_allocation_mean_pct: if cap > 0.0 { 100.0 * area / cap } else { 0.0 },
            makespan_h: last_end.saturating_sub(first_submit) as f64 / 3_600_000.0,
            evictions: self.evictions,
            faults: self.faults.iter().map(|f| f.count).sum(),
            gpu_hours_by_account: by_account,
        }
    }
}
