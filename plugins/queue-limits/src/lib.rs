//! `queue-limits` (admission): per-queue job limits, like a SLURM partition's
//! `MaxTime`, `DefaultTime`, `MaxTRESPerJob` and a QOS that makes its jobs
//! preemptible. Checked at submit, where a job over a limit is rejected with the limit
//! and the numbers, and defaults are filled in; each cycle it admits every job (the
//! limits were enforced when the job came in).
//!
//! Config (every key optional):
//! ```json
//! {"queues": {"interactive": {"max_gpus_per_job": 1, "max_time_limit_s": 14400,
//!                             "default_time_limit_s": 14400, "kinds": ["interactive"],
//!                             "preemptible": true, "tier": 0},
//!             "training": {"tier": 1}},
//!  "unlisted": "accept"}
//! ```
//! * `max_gpus_per_job`: whole-GPU equivalents over all tasks (fractions count as
//!   their share); none = unlimited.
//! * `max_time_limit_s`: a job asking more, or asking none while there is no
//!   `default_time_limit_s`, is rejected.
//! * `default_time_limit_s`: given to jobs that ask no limit.
//! * `kinds`: job kinds the queue accepts (`batch`, `interactive`, `service`); empty = all.
//! * `preemptible`: when set, forces the job's flag (true: a preemption policy may evict it).
//! * `tier`: sets the job's tier.
//! * `unlisted`: `"accept"` (default) or `"reject"` jobs of queues not listed.
#![deny(missing_docs)]

use gantry_sdk::{
    Admission, Cycle, Job, JobKind, JobPatch, Metadata, Plugin, Stage, SubmitVerdict, Verdict,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Limits of one queue.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueLimits {
    /// Most GPUs one job may ask for (whole-GPU equivalents).
    pub max_gpus_per_job: Option<f64>,
    /// Longest time limit, seconds.
    pub max_time_limit_s: Option<u64>,
    /// Time limit given to jobs without one, seconds.
    pub default_time_limit_s: Option<u64>,
    /// Accepted job kinds (empty: all).
    pub kinds: Vec<JobKind>,
    /// Forces the preemptible flag.
    pub preemptible: Option<bool>,
    /// Sets the tier.
    pub tier: Option<i32>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Unlisted {
    #[default]
    Accept,
    Reject,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    queues: BTreeMap<String, QueueLimits>,
    unlisted: Unlisted,
}

/// Per-queue job limits checked at submit.
#[derive(Debug, Default)]
pub struct QueueLimitsPlugin {
    config: Config,
}

fn hours(s: u64) -> String {
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else {
        format!("{:.1}h", s as f64 / 3600.0)
    }
}

fn kind_name(k: JobKind) -> &'static str {
    match k {
        JobKind::Batch => "batch",
        JobKind::Interactive => "interactive",
        JobKind::Service => "service",
    }
}

impl Plugin for QueueLimitsPlugin {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "queue-limits",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Admission],
            r#"{"queues": {"<queue>": {"max_gpus_per_job"?: number, "max_time_limit_s"?: int, "default_time_limit_s"?: int, "kinds"?: ["batch"|"interactive"|"service"], "preemptible"?: bool, "tier"?: int}}, "unlisted"?: "accept"|"reject"}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let config: Config = gantry_sdk::parse_config(config_json)?;
        for (name, q) in &config.queues {
            if let (Some(d), Some(m)) = (q.default_time_limit_s, q.max_time_limit_s)
                && d > m
            {
                return Err(format!(
                    "queues.{name}.default_time_limit_s: {d} is above max_time_limit_s {m}"
                ));
            }
            if q.max_gpus_per_job
                .is_some_and(|g| !g.is_finite() || g < 0.0)
            {
                return Err(format!(
                    "queues.{name}.max_gpus_per_job: must be a number ≥ 0"
                ));
            }
        }
        self.config = config;
        Ok(())
    }
}

impl QueueLimitsPlugin {
    /// The verdict for `job` in queue `queue`.
    pub fn verdict(&self, queue: &str, job: &Job) -> SubmitVerdict {
        let Some(q) = self.config.queues.get(queue) else {
            return match self.config.unlisted {
                Unlisted::Accept => SubmitVerdict::Accept,
                Unlisted::Reject => SubmitVerdict::Reject(format!(
                    "queue {queue} does not exist (queues: {})",
                    self.config
                        .queues
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
        };
        if !q.kinds.is_empty() && !q.kinds.contains(&job.kind) {
            let kinds: Vec<&str> = q.kinds.iter().map(|k| kind_name(*k)).collect();
            return SubmitVerdict::Reject(format!(
                "queue {queue} takes {} jobs, not {}",
                kinds.join(" or "),
                kind_name(job.kind)
            ));
        }
        let gpus = job.gpu_milli_total() as f64 / 1000.0;
        if let Some(max) = q.max_gpus_per_job
            && gpus > max
        {
            return SubmitVerdict::Reject(format!(
                "queue {queue} allows at most {max} GPUs per job; this job asks {gpus}"
            ));
        }
        let mut patch = JobPatch::default();
        match (job.time_limit_s, q.max_time_limit_s, q.default_time_limit_s) {
            (0, _, Some(d)) => patch.time_limit_s = Some(d),
            (0, Some(m), None) => {
                return SubmitVerdict::Reject(format!(
                    "queue {queue} needs a time limit of at most {}",
                    hours(m)
                ));
            }
            (asked, Some(m), _) if asked > m => {
                return SubmitVerdict::Reject(format!(
                    "queue {queue} allows at most {} per job (asked {})",
                    hours(m),
                    hours(asked)
                ));
            }
            _ => {}
        }
        patch.preemptible = q.preemptible.filter(|p| *p != job.preemptible);
        patch.tier = q.tier.filter(|t| *t != job.tier);
        if patch == JobPatch::default() {
            SubmitVerdict::Accept
        } else {
            SubmitVerdict::AcceptWith(patch)
        }
    }
}

impl Admission for QueueLimitsPlugin {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, String> {
        Ok(self.verdict(ctx.text(job.queue), job))
    }

    fn admit(&mut self, _ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, String> {
        Ok(jobs.iter().map(|_| Verdict::Admit).collect())
    }
}

gantry_sdk::export_plugin!(QueueLimitsPlugin, stages: [admission]);

#[cfg(test)]
mod tests;
