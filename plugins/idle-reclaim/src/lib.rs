//! `idle-reclaim`: a preemption policy that takes GPUs back from jobs that sit on them
//! idle (a notebook left open overnight) when another job of the same queue waits for
//! them. The host measures each running job's GPU use (NVML's process samples) and gives
//! it to policies as labels (`gantry_sdk::gpu_usage`); this plugin reads them.
//!
//! Per queue, a rule says what idle means: GPUs below `threshold_percent` for at least
//! `window_s`, for jobs of the listed `kinds`. When the highest-priority blocked job that a
//! rule covers cannot start, the plugin evicts the longest-idle jobs of its queue, in
//! that order, until it fits (none when even all of them would not make room). The host
//! then warns each one (its `gantry run` terminal and its events), sends its checkpoint
//! signal (`--signal`, else SIGTERM) `warn_s` later (contract 0.3's `eviction.warn-s`) and
//! ends it `grace_s` after the signal. A job unmeasured, or busy
//! at its latest sample, is never evicted; the host refuses an eviction of a job that did
//! not consent to preemption unless it is interactive and measured idle now.
//!
//! Config (every field optional):
//! `{"rules": [{"queue": "*", "threshold_percent": 5, "window_s": 1800,
//!   "kinds": ["interactive"], "warn_s": 300, "grace_s": 60}]}`: the first rule whose `queue` is the
//! job's queue, or `"*"`, applies. `threshold_percent` is 1..=10 (the host's ceiling for
//! evicting a job that did not consent, `IDLE_EVICTION_CEILING_PERCENT`).
#![deny(missing_docs)]

use gantry_sdk::{
    ClusterModel, Cycle, Eviction, Job, JobKind, Metadata, Node, Plugin, Preemption, Reason,
    ReasonCode, RunningJob, Stage,
};
use serde::Deserialize;

/// The highest `threshold_percent` a rule may set.
pub const MAX_THRESHOLD_PERCENT: u32 = 10;

/// One queue's idea of idle.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Rule {
    /// The queue it covers, or `*` for any.
    queue: String,
    /// GPUs below this utilization (percent) count as idle.
    threshold_percent: u32,
    /// For at least this long.
    window_s: u64,
    /// Which kinds of job it may reclaim.
    kinds: Vec<JobKind>,
    /// Seconds between the warning and the checkpoint signal (at most `MAX_WARN_S`).
    warn_s: u32,
    /// Seconds between the checkpoint signal and SIGKILL.
    grace_s: u32,
}

impl Default for Rule {
    fn default() -> Self {
        Self {
            queue: "*".into(),
            threshold_percent: 5,
            window_s: 1800,
            kinds: vec![JobKind::Interactive],
            warn_s: 300,
            grace_s: 60,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    rules: Vec<Rule>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            rules: vec![Rule::default()],
        }
    }
}

/// Idle-GPU reclaim.
#[derive(Debug, Default)]
pub struct IdleReclaim {
    config: Config,
}

impl Plugin for IdleReclaim {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "idle-reclaim",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Preemption],
            r#"{"rules": [{"queue": "*", "threshold_percent": 1..=10 (5), "window_s": u64 (1800), "kinds": ["interactive"], "warn_s": 0..=3600 (300), "grace_s": u32 (60)}]}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let config: Config = gantry_sdk::parse_config(config_json)?;
        for (i, r) in config.rules.iter().enumerate() {
            if r.threshold_percent == 0 || r.threshold_percent > MAX_THRESHOLD_PERCENT {
                return Err(format!(
                    "rules[{i}].threshold_percent must be 1..={MAX_THRESHOLD_PERCENT}"
                ));
            }
            if r.warn_s > gantry_sdk::MAX_WARN_S {
                return Err(format!(
                    "rules[{i}].warn_s must be at most {} (an hour)",
                    gantry_sdk::MAX_WARN_S
                ));
            }
            if r.kinds.is_empty() || r.queue.is_empty() {
                return Err(format!("rules[{i}]: queue and kinds must not be empty"));
            }
        }
        self.config = config;
        Ok(())
    }
}

impl IdleReclaim {
    fn rule_for(&self, queue: &str) -> Option<&Rule> {
        self.config
            .rules
            .iter()
            .find(|r| r.queue == "*" || r.queue == queue)
    }
}

/// A running job idle under `rule` at `now_ms`, with how long it has been idle.
fn idle_for(ctx: &Cycle, rule: &Rule, r: &RunningJob) -> Option<u64> {
    if !rule.kinds.contains(&r.job.kind) {
        return None;
    }
    let usage = r.job.gpu_usage(ctx)?;
    let idle_ms = usage.idle_for_ms(ctx.now_ms, rule.threshold_percent);
    (usage.latest_below(rule.threshold_percent) && idle_ms >= rule.window_s.saturating_mul(1000))
        .then_some(idle_ms)
}

fn fits_without(ctx: &Cycle, nodes: &[Node], victims: &[(&RunningJob, u64)], job: &Job) -> bool {
    let mut model = ClusterModel::new(ctx, nodes);
    for (v, _) in victims {
        for a in &v.tasks {
            model.release(a);
        }
    }
    model.fit_gang(ctx, job).is_ok()
}

impl Preemption for IdleReclaim {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        _blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, String> {
        for job in blocked {
            let queue = ctx.text(job.queue);
            let Some(rule) = self.rule_for(queue) else {
                continue;
            };
            let mut idle: Vec<(&RunningJob, u64)> = running
                .iter()
                .filter(|r| ctx.text(r.job.queue) == queue)
                .filter_map(|r| idle_for(ctx, rule, r).map(|ms| (r, ms)))
                .collect();
            // Longest idle first; the job id breaks ties.
            idle.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.job.id.cmp(&b.0.job.id)));
            let mut victims: Vec<(&RunningJob, u64)> = Vec::new();
            for candidate in idle {
                victims.push(candidate);
                if fits_without(ctx, nodes, &victims, job) {
                    return Ok(evictions(&victims, job, queue, rule));
                }
            }
        }
        Ok(Vec::new())
    }
}

fn evictions(victims: &[(&RunningJob, u64)], job: &Job, queue: &str, rule: &Rule) -> Vec<Eviction> {
    victims
        .iter()
        .map(|(v, idle_ms)| Eviction {
            job: v.job.id,
            for_job: job.id,
            reason: Reason::new(
                ReasonCode::Preempted,
                format!(
                    "idle GPU reclaim: its GPUs stayed below {}% for {} (queue {queue} allows {}) while job {} waits",
                    rule.threshold_percent,
                    duration(*idle_ms / 1000),
                    duration(rule.window_s),
                    job.id
                ),
            ),
            grace_s: rule.grace_s,
            warn_s: rule.warn_s,
        })
        .collect()
}

/// `45 s` under two minutes, else `31 min`.
fn duration(s: u64) -> String {
    if s < 120 {
        format!("{s} s")
    } else {
        format!("{} min", s / 60)
    }
}

gantry_sdk::export_plugin!(IdleReclaim, stages: [preemption]);

#[cfg(test)]
mod tests;
