//! When will a pending job start? A forecast replays the queue from a cycle's snapshot on
//! a virtual clock (`replay.rs`), in the live pipeline's priority order (the cycle's
//! `order`), with each job's runtime drawn from a model learnt from history
//! (`runtime_model.rs`), several times with different draws: each pending job gets the
//! median and the 90th percentile of its starts, the job whose end makes room for it, and
//! how many jobs are ahead of it. A job that fits on no node even with the cluster idle
//! never starts, and says why.
//!
//! Owns the forecast and its band. Does not own where it runs (the daemon's background
//! thread, the simulator's benchmark), the order (the cycle) or the history.

pub mod replay;
pub mod runtime_model;

pub use replay::{ReplayInput, ReplayStart, replay};
pub use runtime_model::{EstimateSource, RuntimeModel};

use crate::snapshot::Snapshot;
use crate::submit::fits_empty_cluster;
use gantry_contract::{ClusterModel, Job, JobId};
use std::collections::HashMap;

/// How a forecast is made.
#[derive(Debug, Clone, Copy)]
pub struct ForecastOptions {
    /// Replays with different draws (the band); at least 1.
    pub replays: usize,
    /// 0: jobs start strictly in priority order (`first-fit`); else how many jobs behind a
    /// blocked one may start if they end before its reserved start (`backfill`).
    pub backfill_depth: usize,
    /// Nothing is forecast further than this past now, ms.
    pub horizon_ms: u64,
}

impl Default for ForecastOptions {
    fn default() -> Self {
        Self {
            replays: 5,
            backfill_depth: 0,
            horizon_ms: 30 * 24 * 3600 * 1000,
        }
    }
}

/// One pending job's forecast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobForecast {
    /// The job.
    pub job: JobId,
    /// Median start over the replays, ms since the epoch; none when it did not start in
    /// half of them (before the horizon).
    pub p50_ms: Option<u64>,
    /// 90th percentile start; none when it did not start in nine of ten.
    pub p90_ms: Option<u64>,
    /// The job whose end makes room for it in the median replay (none: room now).
    pub after: Option<JobId>,
    /// Jobs ahead of it in priority order.
    pub ahead: usize,
    /// Why it never starts: it fits on no node even with the cluster idle.
    pub never: Option<String>,
}

/// Forecasts every job of `order` (pending, admitted, in priority order) on `snap`.
/// `runtime_ms(job, replay)` draws a job's whole runtime for replay `replay` (running jobs
/// too: one past its draw is taken to end a tenth of its age later, at least a minute).
pub fn forecast(
    snap: &Snapshot,
    order: &[JobId],
    runtime_ms: &dyn Fn(&Job, usize) -> u64,
    opts: ForecastOptions,
) -> Vec<JobForecast> {
    let ctx = &snap.ctx;
    let now = ctx.now_ms;
    let pending: HashMap<JobId, &Job> = snap.pending.iter().map(|j| (j.id, j)).collect();
    let queue: Vec<&Job> = order
        .iter()
        .filter_map(|id| pending.get(id).copied())
        .collect();
    let model = ClusterModel::new(ctx, &snap.nodes);
    let replays = opts.replays.max(1);
    let mut starts: HashMap<JobId, Vec<ReplayStart>> = HashMap::new();
    for r in 0..replays {
        let running = snap
            .running
            .iter()
            .map(|rj| {
                let drawn = rj.start_ms.saturating_add(runtime_ms(&rj.job, r));
                let end = if drawn > now {
                    drawn
                } else {
                    now + (now.saturating_sub(rj.start_ms) / 10).max(60_000)
                };
                (rj.job.id, rj.tasks.as_slice(), end)
            })
            .collect();
        let input = ReplayInput {
            ctx,
            model: &model,
            running,
            queue: queue
                .iter()
                .map(|j| (*j, runtime_ms(j, r).max(1)))
                .collect(),
            backfill_depth: opts.backfill_depth,
            horizon_ms: now.saturating_add(opts.horizon_ms),
        };
        for (id, s) in replay(input) {
            starts.entry(id).or_default().push(s);
        }
    }
    queue
        .iter()
        .enumerate()
        .map(|(ahead, job)| {
            let mut seen = starts.remove(&job.id).unwrap_or_default();
            seen.sort_by_key(|s| s.at_ms);
            let nth = |q: f64| {
                let rank = (q * replays as f64).ceil() as usize;
                seen.get(rank.max(1) - 1).copied()
            };
            let (p50, p90) = (nth(0.5), nth(0.9));
            let never = match p50 {
                Some(_) => None,
                None => fits_empty_cluster(ctx, &snap.nodes, job)
                    .err()
                    .map(|r| r.message),
            };
            JobForecast {
                job: job.id,
                p50_ms: p50.map(|s| s.at_ms),
                p90_ms: p90.map(|s| s.at_ms),
                after: p50.and_then(|s| s.after),
                ahead,
                never,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
