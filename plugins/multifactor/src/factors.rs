//! The factors that need no history, each normalised to [0, 1]: age (time since
//! submit, saturating at `max_age_s`), job size (GPU demand against the cluster's GPUs),
//! a named factor from a config table (queue, QoS) normalised by the table's largest
//! value; plus reading the `nice` and `qos` labels and formatting numbers for notes.
//!
//! Owns: pure arithmetic on one job. Does not own fair-share (`fairshare`) or how the
//! factors are weighted and explained (`score`).

use gantry_sdk::{Cycle, Job};
use std::collections::BTreeMap;

/// Label whose value names the job's QoS.
pub const QOS_LABEL: &str = "qos";
/// Label whose integer value is subtracted from the score.
pub const NICE_LABEL: &str = "nice";
/// Largest |nice| honoured (SLURM's bound).
pub const NICE_LIMIT: i64 = 2_147_483_645;

/// Age factor: waiting time over `max_age_s`, at most 1 (0 for a future submit time).
pub fn age(now_ms: u64, submit_ms: u64, max_age_s: u64) -> f64 {
    if max_age_s == 0 {
        return 0.0;
    }
    let waited_s = now_ms.saturating_sub(submit_ms) as f64 / 1000.0;
    (waited_s / max_age_s as f64).min(1.0)
}

/// Job-size factor: `demand / total` (at most 1) when favouring large jobs, one minus
/// that when favouring small ones; 0 when the cluster has no GPUs up.
pub fn job_size(demand_milli: u64, total_milli: u64, favor_small: bool) -> f64 {
    if total_milli == 0 {
        return 0.0;
    }
    let ratio = (demand_milli as f64 / total_milli as f64).min(1.0);
    if favor_small { 1.0 - ratio } else { ratio }
}

/// A config table of raw factors, normalised by its largest value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    raw: BTreeMap<String, f64>,
    max: f64,
}

impl Table {
    /// Wraps raw values (all ≥ 0, checked by the config).
    pub fn new(raw: &BTreeMap<String, f64>) -> Self {
        Self {
            max: raw.values().copied().fold(0.0, f64::max),
            raw: raw.clone(),
        }
    }

    /// The normalised factor of `name`; None when unlisted.
    pub fn get(&self, name: &str) -> Option<f64> {
        let v = *self.raw.get(name)?;
        Some(if self.max > 0.0 { v / self.max } else { 0.0 })
    }
}

/// The value of the job's label `key`, if it has one.
pub fn label<'a>(ctx: &'a Cycle, job: &Job, key: &str) -> Option<&'a str> {
    job.labels
        .iter()
        .find(|l| ctx.text(l.key) == key)
        .map(|l| ctx.text(l.value))
}

/// The job's nice value: `Ok(0)` without the label, `Ok(n)` (clamped to ±[`NICE_LIMIT`])
/// for an integer, `Err(text)` for anything else (then ignored by the caller).
pub fn nice<'a>(ctx: &'a Cycle, job: &Job) -> Result<i64, &'a str> {
    match label(ctx, job, NICE_LABEL) {
        None => Ok(0),
        Some(text) => text
            .trim()
            .parse::<i64>()
            .map(|n| n.clamp(-NICE_LIMIT, NICE_LIMIT))
            .map_err(|_| text),
    }
}

/// A milli-GPU amount as GPUs: "4", "0.5", "2.25".
pub fn gpus(milli: u64) -> String {
    let whole = milli / 1000;
    let frac = milli % 1000;
    if frac == 0 {
        return whole.to_string();
    }
    let text = format!("{whole}.{frac:03}");
    text.trim_end_matches('0').to_string()
}

/// GPU-seconds as GPU-hours: "0.5", "40.0", "1.2k".
pub fn gpu_hours(gpu_seconds: f64) -> String {
    let h = gpu_seconds / 3600.0;
    if h >= 1000.0 {
        format!("{:.1}k", h / 1000.0)
    } else {
        format!("{h:.1}")
    }
}

/// Seconds as the largest two units: "45s", "1h40m", "3d12h".
pub fn duration(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) if s == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, 0) => format!("{h}h"),
        (0, _, _) => format!("{h}h{m}m"),
        (_, 0, _) => format!("{d}d"),
        _ => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use gantry_sdk::Label;

    #[test]
    fn age_grows_linearly_and_saturates() {
        let week = 604_800;
        assert_eq!(age(1_000, 1_000, week), 0.0);
        // 6000 s of a 7-day horizon: 6000 / 604800.
        assert_eq!(age(36_000_000, 30_000_000, week), 6000.0 / 604_800.0);
        // Half the horizon.
        assert_eq!(age(302_400_000, 0, week), 0.5);
        // Beyond the horizon: 1.
        assert_eq!(age(2 * week * 1000, 0, week), 1.0);
        // A submit time in the future counts as no waiting.
        assert_eq!(age(0, 5_000, week), 0.0);
        assert_eq!(age(5_000, 0, 0), 0.0);
    }

    #[test]
    fn job_size_is_demand_over_cluster_either_way() {
        assert_eq!(job_size(2000, 8000, false), 0.25);
        assert_eq!(job_size(2000, 8000, true), 0.75);
        assert_eq!(job_size(500, 4000, false), 0.125);
        // Larger than the cluster that is up: capped.
        assert_eq!(job_size(16_000, 8000, false), 1.0);
        assert_eq!(job_size(16_000, 8000, true), 0.0);
        // CPU-only job.
        assert_eq!(job_size(0, 8000, false), 0.0);
        assert_eq!(job_size(0, 8000, true), 1.0);
        // No GPUs up.
        assert_eq!(job_size(1000, 0, false), 0.0);
        assert_eq!(job_size(1000, 0, true), 0.0);
    }

    #[test]
    fn tables_normalise_by_the_largest_value() {
        let raw: BTreeMap<String, f64> = [("gpu".into(), 40.0), ("debug".into(), 10.0)].into();
        let t = Table::new(&raw);
        assert_eq!(t.get("gpu"), Some(1.0));
        assert_eq!(t.get("debug"), Some(0.25));
        assert_eq!(t.get("other"), None);
        let zero = Table::new(&[("a".into(), 0.0)].into());
        assert_eq!(zero.get("a"), Some(0.0));
        assert_eq!(Table::default().get("a"), None);
    }

    fn labelled(pairs: &[(u32, u32)]) -> Job {
        Job {
            labels: pairs
                .iter()
                .map(|&(key, value)| Label { key, value })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn nice_and_qos_come_from_labels() {
        let ctx = Cycle {
            strings: vec![
                "nice".into(),
                "10".into(),
                "qos".into(),
                "high".into(),
                "-5".into(),
                "lots".into(),
                "99999999999".into(),
            ],
            ..Default::default()
        };
        let j = labelled(&[(0, 1), (2, 3)]);
        assert_eq!(nice(&ctx, &j), Ok(10));
        assert_eq!(label(&ctx, &j, QOS_LABEL), Some("high"));
        assert_eq!(nice(&ctx, &labelled(&[(0, 4)])), Ok(-5));
        assert_eq!(nice(&ctx, &labelled(&[(0, 5)])), Err("lots"));
        assert_eq!(nice(&ctx, &labelled(&[(0, 6)])), Ok(NICE_LIMIT));
        assert_eq!(nice(&ctx, &labelled(&[])), Ok(0));
        assert_eq!(label(&ctx, &labelled(&[]), QOS_LABEL), None);
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(gpus(4000), "4");
        assert_eq!(gpus(500), "0.5");
        assert_eq!(gpus(2250), "2.25");
        assert_eq!(gpu_hours(144_000.0), "40.0");
        assert_eq!(gpu_hours(4_320_000.0), "1.2k");
        assert_eq!(duration(45), "45s");
        assert_eq!(duration(6000), "1h40m");
        assert_eq!(duration(7200), "2h");
        assert_eq!(duration(90), "1m30s");
        assert_eq!(duration(120), "2m");
        assert_eq!(duration(604_800), "7d");
        assert_eq!(duration(302_400), "3d12h");
    }
}
