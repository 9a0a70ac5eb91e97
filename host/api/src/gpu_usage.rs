//! GPU use as measured, not as booked: what a node's sampler saw on its GPUs in one round
//! ([`GpuUsageReport`], sent by an agent in its heartbeat and handed over in process on the
//! controller's own node) and what a task's run has used so far ([`TaskGpuUsage`], kept on
//! the task's record, shown by `gantry job`, summed into accounting and given to policies
//! as labels, `gantry_contract::gpu_usage`).
//!
//! Owns these data types and how one round's samples add to a task's usage. Does not own
//! sampling (`gantry_node::inventory::gpu_usage`) nor which task holds which GPU (the
//! controller's `gpu_usage.rs` attributes the samples).

use gantry_contract::BusyMarks;
use serde::{Deserialize, Serialize};

/// One round of a node's sampler.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUsageReport {
    /// When the round was taken, ms since the Unix epoch.
    pub at_ms: u64,
    /// The node's time between rounds, ms (`node.gpu_sample_every_s`).
    pub every_ms: u64,
    /// The GPU indices sampled (a MIG slice by its slice index, `mig.rs`): a task on one of
    /// them with no entry in `uses` used it not at all.
    pub gpus: Vec<u32>,
    /// Use per GPU and per task found on it.
    pub uses: Vec<GpuUse>,
}

/// What the processes of one task (or of no known task) did on one GPU in a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUse {
    /// The GPU's index.
    pub gpu: u32,
    /// The task whose cgroup holds the processes, `(job, task index)`; `None` for processes
    /// in no task's cgroup.
    pub task: Option<(u64, u32)>,
    /// Their summed SM utilization in percent over the last sample period (capped at 100).
    pub util_percent: u32,
    /// GPU memory they hold, MiB.
    pub memory_mib: u64,
    /// How many processes.
    pub processes: u32,
}

/// A task's measured GPU use in its current run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskGpuUsage {
    /// The run's first sample, ms since the Unix epoch.
    pub sampled_since_ms: u64,
    /// The latest sample.
    pub last_sample_ms: u64,
    /// Samples taken.
    pub samples: u32,
    /// Utilization at the latest sample: the busiest of the task's GPUs, percent.
    pub util_percent: u32,
    /// GPU memory held at the latest sample, summed over its GPUs, MiB.
    pub memory_mib: u64,
    /// The most GPU memory held at one sample, MiB.
    pub memory_peak_mib: u64,
    /// GPU time used: Σ utilization × time between samples, in milli-GPU-seconds (a GPU
    /// busy at 50 % for an hour is 1,800,000).
    pub used_gpu_milli_seconds: u64,
    /// For each utilization level, the last sample that reached it.
    pub busy: BusyMarks,
}

/// One sample of one task: its GPUs' utilizations (percent) and memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSample {
    /// When, ms since the Unix epoch.
    pub at_ms: u64,
    /// Utilization of each of the task's GPUs, percent.
    pub util_per_gpu: Vec<u32>,
    /// Memory over all its GPUs, MiB.
    pub memory_mib: u64,
}

impl TaskGpuUsage {
    /// Adds a sample; one not after the latest is ignored. The time since the previous
    /// sample, at most `max_gap_ms`, counts as used at this sample's utilization.
    pub fn add(&mut self, s: &TaskSample, max_gap_ms: u64) {
        if self.samples > 0 && s.at_ms <= self.last_sample_ms {
            return;
        }
        let busiest = s.util_per_gpu.iter().copied().max().unwrap_or(0).min(100);
        if self.samples == 0 {
            self.sampled_since_ms = s.at_ms;
        } else {
            let gap = s.at_ms.saturating_sub(self.last_sample_ms).min(max_gap_ms);
            let util_sum: u64 = s
                .util_per_gpu
                .iter()
                .map(|u| u64::from((*u).min(100)))
                .sum();
            // percent × 10 = milli-GPU; × ms / 1000 = milli-GPU-seconds.
            self.used_gpu_milli_seconds = self
                .used_gpu_milli_seconds
                .saturating_add(util_sum * 10 * gap / 1000);
        }
        self.samples = self.samples.saturating_add(1);
        self.last_sample_ms = s.at_ms;
        self.util_percent = busiest;
        self.memory_mib = s.memory_mib;
        self.memory_peak_mib = self.memory_peak_mib.max(s.memory_mib);
        self.busy.record(s.at_ms, busiest);
    }

    /// GPU-seconds used (one GPU fully busy for one second is 1.0).
    pub fn used_gpu_seconds(&self) -> f64 {
        self.used_gpu_milli_seconds as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, util: &[u32], memory_mib: u64) -> TaskSample {
        TaskSample {
            at_ms,
            util_per_gpu: util.to_vec(),
            memory_mib,
        }
    }

    #[test]
    fn samples_add_up_to_used_gpu_time() {
        let mut u = TaskGpuUsage::default();
        u.add(&sample(1_000, &[100, 0], 500), 60_000);
        assert_eq!(
            u.used_gpu_milli_seconds, 0,
            "the first sample starts the clock"
        );
        u.add(&sample(11_000, &[100, 50], 800), 60_000);
        // 10 s × (1.0 + 0.5) GPU = 15 GPU-seconds.
        assert_eq!(u.used_gpu_seconds(), 15.0);
        assert_eq!(u.util_percent, 100);
        assert_eq!((u.memory_mib, u.memory_peak_mib), (800, 800));
        u.add(&sample(11_000, &[0, 0], 0), 60_000);
        assert_eq!(u.samples, 2, "a repeated sample is ignored");
        // A gap longer than the cap (the node was away) counts only up to the cap.
        u.add(&sample(1_011_000, &[10, 0], 100), 60_000);
        assert_eq!(u.used_gpu_seconds(), 15.0 + 6.0);
        assert_eq!(u.memory_peak_mib, 800);
        assert_eq!(u.busy.last_at_least(11), Some(11_000));
        assert_eq!(u.sampled_since_ms, 1_000);
    }
}
