//! How busy a running job's GPUs have been, as the host measures it (NVML's process
//! samples on the job's node, `docs/user/gpu-usage.md`) and as a policy reads it: two
//! labels the host sets on a running job in the snapshot, [`GPU_SAMPLED_SINCE_LABEL`] and
//! [`GPU_BUSY_LABEL`]. Users cannot set labels under `gantry.io/`, so a job cannot
//! claim to be busy.
//!
//! The measure is threshold-free: [`BusyMarks`] keeps, for every utilization level, the
//! last time the job's GPUs reached it, so one snapshot answers "idle below 5 % for 30
//! minutes" as well as "below 20 % for an hour" ([`GpuUsageLabels::idle_for_ms`]).
//!
//! Owns: the marks, their text form and the label names. Does not own sampling (the
//! host's `gantry_node::inventory::gpu_usage`) or what a policy does with it (for example
//! `plugins/idle-reclaim`).

use crate::types::{Cycle, Job};
use serde::{Deserialize, Serialize};

/// The label holding the time (ms since the Unix epoch) of the job's first GPU sample in
/// its current run. A running job without it has not been sampled.
pub const GPU_SAMPLED_SINCE_LABEL: &str = "gantry.io/gpu-sampled-since-ms";

/// The label holding the job's [`BusyMarks`] in text form (`PERCENT@MS,...`).
pub const GPU_BUSY_LABEL: &str = "gantry.io/gpu-busy";

/// At most this many marks are kept (one per percent level, 0 to 100).
const MAX_MARKS: usize = 101;

/// One step of the staircase: the last time (`at_ms`) utilization was at least
/// `percent`, for every level above the previous mark's percent up to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BusyMark {
    /// Utilization level, 0–100.
    pub percent: u8,
    /// The last sample at that level or above, ms since the Unix epoch.
    pub at_ms: u64,
}

/// For each utilization level, the last time it was reached: marks in ascending percent
/// and descending time. `[{5, t1}, {60, t2}]` says: at least 1–5 % last at `t1`, at least
/// 6–60 % last at `t2` (before `t1`), never above 60 %.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct BusyMarks(Vec<BusyMark>);

/// Why a [`BusyMarks`] text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarksError(String);

impl std::fmt::Display for MarksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed GPU busy marks `{}`", self.0)
    }
}

impl std::error::Error for MarksError {}

impl BusyMarks {
    /// Records a sample: utilization `percent` (capped at 100) at `at_ms`. Samples must
    /// come in time order; an older one is ignored.
    pub fn record(&mut self, at_ms: u64, percent: u32) {
        let percent = percent.min(100) as u8;
        if self.0.first().is_some_and(|m| m.at_ms > at_ms) {
            return;
        }
        self.0.retain(|m| m.percent > percent);
        self.0.insert(0, BusyMark { percent, at_ms });
    }

    /// The last time utilization was at least `percent` (capped at 100), if ever.
    pub fn last_at_least(&self, percent: u32) -> Option<u64> {
        let percent = percent.min(100) as u8;
        self.0
            .iter()
            .find(|m| m.percent >= percent)
            .map(|m| m.at_ms)
    }

    /// The highest level ever reached, 0 when never sampled.
    pub fn peak_percent(&self) -> u8 {
        self.0.last().map_or(0, |m| m.percent)
    }

    /// The marks of several tasks as one job's: each level's latest time among them.
    pub fn merge(&mut self, other: &BusyMarks) {
        let mut last = [None::<u64>; MAX_MARKS];
        for marks in [&*self, other] {
            let mut below = 0usize;
            for m in &marks.0 {
                for slot in &mut last[below..=usize::from(m.percent)] {
                    *slot = Some(slot.map_or(m.at_ms, |t| t.max(m.at_ms)));
                }
                below = usize::from(m.percent) + 1;
            }
        }
        let mut out: Vec<BusyMark> = Vec::new();
        for (p, at) in last.iter().enumerate() {
            let Some(at_ms) = *at else { break };
            let percent = p as u8;
            match out.last_mut() {
                Some(m) if m.at_ms == at_ms => m.percent = percent,
                _ => out.push(BusyMark { percent, at_ms }),
            }
        }
        self.0 = out;
    }

    /// The marks, ascending in percent.
    pub fn marks(&self) -> &[BusyMark] {
        &self.0
    }

    /// The text form: `PERCENT@MS` joined by commas, ascending in percent.
    pub fn to_text(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|m| format!("{}@{}", m.percent, m.at_ms))
            .collect();
        parts.join(",")
    }

    /// Reads the text form; the percents must ascend (at most 100) and the times descend.
    pub fn parse(text: &str) -> Result<Self, MarksError> {
        let bad = || MarksError(text.chars().take(64).collect());
        let mut out: Vec<BusyMark> = Vec::new();
        for part in text.split(',').filter(|p| !p.is_empty()) {
            let (p, t) = part.split_once('@').ok_or_else(bad)?;
            let percent: u8 = p.parse().map_err(|_| bad())?;
            let at_ms: u64 = t.parse().map_err(|_| bad())?;
            let in_order = out
                .last()
                .is_none_or(|m| m.percent < percent && m.at_ms > at_ms);
            if percent > 100 || !in_order {
                return Err(bad());
            }
            out.push(BusyMark { percent, at_ms });
        }
        Ok(Self(out))
    }
}

/// A running job's GPU usage as its labels give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUsageLabels {
    /// The first sample of the current run, ms since the Unix epoch.
    pub sampled_since_ms: u64,
    /// The marks.
    pub busy: BusyMarks,
}

impl GpuUsageLabels {
    /// The labels' values: (`GPU_SAMPLED_SINCE_LABEL`, `GPU_BUSY_LABEL`).
    pub fn to_label_values(&self) -> [(&'static str, String); 2] {
        [
            (GPU_SAMPLED_SINCE_LABEL, self.sampled_since_ms.to_string()),
            (GPU_BUSY_LABEL, self.busy.to_text()),
        ]
    }

    /// Whether the latest sample was below `percent` (false when there was none).
    pub fn latest_below(&self, percent: u32) -> bool {
        self.busy
            .marks()
            .first()
            .is_some_and(|m| u32::from(m.percent) < percent)
    }

    /// How long, at `now_ms`, the job's GPUs have stayed below `threshold_percent`: since
    /// its last sample at or above it, or since sampling began when there was none.
    pub fn idle_for_ms(&self, now_ms: u64, threshold_percent: u32) -> u64 {
        let since = if threshold_percent == 0 {
            None
        } else {
            self.busy.last_at_least(threshold_percent)
        };
        now_ms.saturating_sub(since.unwrap_or(self.sampled_since_ms))
    }
}

impl Job {
    /// The job's GPU usage from its labels: `None` when it has not been sampled (or the
    /// labels are malformed, which the host never sends).
    pub fn gpu_usage(&self, ctx: &Cycle) -> Option<GpuUsageLabels> {
        let label = |name: &str| {
            self.labels
                .iter()
                .find(|l| ctx.text(l.key) == name)
                .map(|l| ctx.text(l.value))
        };
        let sampled_since_ms = label(GPU_SAMPLED_SINCE_LABEL)?.parse().ok()?;
        let busy = BusyMarks::parse(label(GPU_BUSY_LABEL).unwrap_or_default()).ok()?;
        Some(GpuUsageLabels {
            sampled_since_ms,
            busy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(samples: &[(u64, u32)]) -> BusyMarks {
        let mut m = BusyMarks::default();
        for &(t, p) in samples {
            m.record(t, p);
        }
        m
    }

    #[test]
    fn each_level_remembers_its_last_time() {
        let m = marks(&[(10, 90), (20, 30), (30, 2)]);
        assert_eq!(m.to_text(), "2@30,30@20,90@10");
        assert_eq!(m.last_at_least(1), Some(30));
        assert_eq!(m.last_at_least(3), Some(20));
        assert_eq!(m.last_at_least(31), Some(10));
        assert_eq!(m.last_at_least(91), None);
        assert_eq!(m.peak_percent(), 90);
        // A busier sample supersedes every lower level.
        let m2 = marks(&[(10, 90), (20, 30), (30, 2), (40, 50)]);
        assert_eq!(m2.to_text(), "50@40,90@10");
    }

    #[test]
    fn text_round_trips_and_bad_text_is_refused() {
        let m = marks(&[(10, 90), (20, 30), (30, 0)]);
        assert_eq!(BusyMarks::parse(&m.to_text()), Ok(m));
        assert_eq!(BusyMarks::parse(""), Ok(BusyMarks::default()));
        for bad in ["x", "5@", "101@3", "5@3,4@2", "5@3,6@4", "5@1,5@0"] {
            assert!(BusyMarks::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn merging_takes_each_levels_latest_time() {
        let mut a = marks(&[(10, 80), (30, 5)]);
        let b = marks(&[(20, 40)]);
        a.merge(&b);
        assert_eq!(a.last_at_least(5), Some(30));
        assert_eq!(a.last_at_least(6), Some(20));
        assert_eq!(a.last_at_least(41), Some(10));
        assert_eq!(a.last_at_least(81), None);
        let mut empty = BusyMarks::default();
        empty.merge(&b);
        assert_eq!(empty, b);
    }

    #[test]
    fn idle_time_counts_from_the_last_busy_sample_or_the_first_sample() {
        let u = GpuUsageLabels {
            sampled_since_ms: 1_000,
            busy: marks(&[(5_000, 50), (9_000, 3)]),
        };
        assert_eq!(u.idle_for_ms(10_000, 5), 5_000);
        assert_eq!(u.idle_for_ms(10_000, 60), 9_000);
        assert_eq!(u.idle_for_ms(10_000, 3), 1_000);
        assert_eq!(u.idle_for_ms(10_000, 0), 9_000);
    }
}
