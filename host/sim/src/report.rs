//! Reports of timeline runs: a JSON report (summary, every job's fate, allocation over
//! time), a Markdown summary table with one row per pipeline, and SVG plots of GPU
//! allocation over time, the wait-time CDF and GPU-hours per account, each with every
//! pipeline side by side.
//!
//! Owns: turning [`TimelineResult`]s into files. Does not own running them.

use anyhow::Context;
use gantry_engine::sim::{Summary, TimelineResult};
use gantry_plot::{BarChart, LineChart, Series};
use serde::Serialize;
use std::path::Path;

/// One pipeline's run.
#[derive(Debug, Serialize)]
pub struct PipelineRun {
    /// The pipeline's label.
    pub label: String,
    /// Wall time of the run, s.
    pub wall_s: f64,
    /// Summary figures.
    pub summary: Summary,
    /// Everything the run produced.
    pub result: TimelineResult,
}

/// The Markdown summary table.
pub fn summary_table(runs: &[PipelineRun]) -> String {
    let mut md = String::from(
        "| pipeline | jobs | finished | rejected | never started | wait mean | p50 | p95 | p99 | max | GPU allocation (mean) | makespan | evictions | faults | wall time |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let s = &r.summary;
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} % | {:.1} h | {} | {} | {:.1} s |\n",
            r.label,
            s.jobs,
            s.finished,
            s.rejected,
            s.never_started,
            human_s(s.wait_mean_s),
            human_s(s.wait_p50_s),
            human_s(s.wait_p95_s),
            human_s(s.wait_p99_s),
            human_s(s.wait_max_s),
            s.gpu_allocation_mean_pct,
            s.makespan_h,
            s.evictions,
            s.faults,
            r.wall_s,
        ));
    }
    md
}

/// "42 s", "3.5 min", "2.1 h", "4.0 d".
pub fn human_s(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.1} d", s / 86_400.0),
    }
}

/// Allocation over time, per pipeline, in % of the capacity up at the time.
fn allocation_series(r: &PipelineRun, unit_s: f64) -> Series {
    Series {
        name: r.label.clone(),
        points: r
            .result
            .samples
            .iter()
            .map(|s| {
                let pct = if s.gpu_milli_total == 0 {
                    0.0
                } else {
                    100.0 * s.gpu_milli_held as f64 / s.gpu_milli_total as f64
                };
                (s.t_ms as f64 / 1000.0 / unit_s, pct)
            })
            .collect(),
    }
}

/// Writes `report.json`, `summary.md`, `allocation.svg`, `wait-cdf.svg` and
/// `usage-by-account.svg` into `dir`.
pub fn write(dir: &Path, runs: &[PipelineRun]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let json = serde_json::to_string(&runs)?;
    std::fs::write(dir.join("report.json"), json)?;
    std::fs::write(dir.join("summary.md"), summary_table(runs))?;
    let span_s = runs
        .iter()
        .map(|r| r.result.end_ms as f64 / 1000.0)
        .fold(0.0, f64::max);
    let (unit_s, unit) = if span_s > 4.0 * 86_400.0 {
        (86_400.0, "days")
    } else if span_s > 4.0 * 3600.0 {
        (3600.0, "hours")
    } else {
        (60.0, "minutes")
    };
    let allocation = LineChart {
        title: "GPU allocation over time".into(),
        x_label: format!("simulated time ({unit})"),
        y_label: "GPUs allocated (% of capacity up)".into(),
        series: runs.iter().map(|r| allocation_series(r, unit_s)).collect(),
        y_range: Some((0.0, 100.0)),
        step: true,
        ..Default::default()
    };
    std::fs::write(dir.join("allocation.svg"), allocation.to_svg())?;
    let cdf = LineChart {
        title: "Wait from submit to start (CDF)".into(),
        x_label: "wait (seconds, log scale)".into(),
        y_label: "share of started jobs".into(),
        series: runs
            .iter()
            .map(|r| Series {
                name: r.label.clone(),
                // log scale: a zero wait is drawn at 1 s.
                points: gantry_plot::cdf(
                    &r.result
                        .waits_s()
                        .iter()
                        .map(|w| w.max(1.0))
                        .collect::<Vec<_>>(),
                ),
            })
            .collect(),
        y_range: Some((0.0, 1.0)),
        step: true,
        x_log: true,
        ..Default::default()
    };
    std::fs::write(dir.join("wait-cdf.svg"), cdf.to_svg())?;
    let mut accounts: Vec<String> = runs
        .iter()
        .flat_map(|r| r.summary.gpu_hours_by_account.keys().cloned())
        .collect();
    accounts.sort();
    accounts.dedup();
    let usage = BarChart {
        title: "GPU-hours per account".into(),
        y_label: "GPU-hours".into(),
        categories: accounts.clone(),
        groups: runs
            .iter()
            .map(|r| gantry_plot::BarGroup {
                name: r.label.clone(),
                values: accounts
                    .iter()
                    .map(|a| {
                        r.summary
                            .gpu_hours_by_account
                            .get(a)
                            .copied()
                            .unwrap_or(0.0)
                    })
                    .collect(),
            })
            .collect(),
    };
    std::fs::write(dir.join("usage-by-account.svg"), usage.to_svg())?;
    Ok(())
}
