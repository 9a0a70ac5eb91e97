//! Numbers of a day for the `RESULT` lines: submit-call latency, throughput end to end,
//! samples taken every second while the day runs (backlog, load, cycle histogram) and the
//! cycle-time quantiles over the largest backlog, the wide gang, and node losses.
//!
//! Owns: the arithmetic. Does not own where the numbers come from.

use super::day::{DayLog, Kind, jobs_in};
use super::gantry_api::bucket_quantile;
use serde_json::{Value, json};

/// Nearest-rank quantile of `v` (sorted here).
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((v.len() as f64) * q).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Submit calls (interactive ones are not submit calls on SLURM) and throughput.
pub fn day_numbers(log: &DayLog, items: &[Kind]) -> Value {
    let mut took: Vec<f64> = log
        .submitted
        .iter()
        .filter(|s| s.kind != Kind::Interactive)
        .map(|s| s.took_s)
        .collect();
    let jobs = jobs_in(items);
    let span = log.all_done_s - log.first_submit_s;
    let requeued = log.submitted.iter().filter(|s| s.requeued).count();
    json!({
        "items": items.len(),
        "jobs": jobs,
        "submit_calls": took.len(),
        "submit_p50_ms": quantile(&mut took, 0.5) * 1e3,
        "submit_p99_ms": quantile(&mut took, 0.99) * 1e3,
        "submit_max_ms": quantile(&mut took, 1.0) * 1e3,
        "submitting_s": log.last_submit_s - log.first_submit_s,
        "first_submit_to_all_done_s": span,
        "jobs_per_s": jobs as f64 / span.max(1e-9),
        "requeues_accepted": requeued,
        "errors": log.errors.len(),
        "first_errors": log.errors.iter().take(5).collect::<Vec<_>>(),
    })
}

/// One sample of the day, taken every second.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub at_s: f64,
    pub pending: usize,
    pub load1: f64,
    /// The cycle histogram then (Gantry only): cumulative counts by upper bound.
    pub cycles: Vec<(f64, f64)>,
}

/// Cycle quantiles over the whole day and over the samples with at least half the largest
/// backlog (bucket upper bounds, seconds).
pub fn cycle_numbers(samples: &[Sample]) -> Value {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return json!({});
    };
    let max_pending = samples.iter().map(|s| s.pending).max().unwrap_or(0);
    let busy: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.pending * 2 >= max_pending && max_pending > 0)
        .collect();
    let mut f = json!({
        "max_pending": max_pending,
        "load1_max": samples.iter().map(|s| s.load1).fold(0.0, f64::max),
        "day_cycle_p50_le_s": bucket_quantile(&first.cycles, &last.cycles, 0.5),
        "day_cycle_p99_le_s": bucket_quantile(&first.cycles, &last.cycles, 0.99),
    });
    if let (Some(a), Some(b)) = (busy.first(), busy.last()) {
        f["backlog_window_s"] = json!(b.at_s - a.at_s);
        f["backlog_cycle_p50_le_s"] = json!(bucket_quantile(&a.cycles, &b.cycles, 0.5));
        f["backlog_cycle_p99_le_s"] = json!(bucket_quantile(&a.cycles, &b.cycles, 0.99));
        let cycles = |s: &Sample| s.cycles.iter().map(|(_, n)| *n).fold(0.0, f64::max);
        f["backlog_cycles"] = json!(cycles(b) - cycles(a));
        f["backlog_load1_mean"] =
            json!(busy.iter().map(|s| s.load1).sum::<f64>() / busy.len() as f64);
    }
    f
}

/// The node losses as JSON.
pub fn losses(log: &DayLog) -> Value {
    json!(
        log.losses
            .iter()
            .map(|l| json!({
                "node": l.node, "jobs_on_it": l.jobs_on_it,
                "noticed_down_after_s": l.noticed_after_s,
                "jobs_off_it_after_s": l.requeued_after_s,
                "restarted_after_s": l.down_for_s,
            }))
            .collect::<Vec<_>>()
    )
}
