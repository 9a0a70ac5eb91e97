//! GPU use as measured: each round of a node's sampler (the controller's own node in
//! process, an agent's in its heartbeat) is attributed to the running tasks that hold the
//! sampled GPUs and added to each task's record (`TaskRecord::gpu_usage`). `gantry job`
//! shows it, accounting sums it at the task's end (`accounting.rs`) and the snapshot gives
//! it to policies as labels (`snapshot.rs`, `gantry_contract::gpu_usage`).
//!
//! A process counts for a task only when its cgroup names that task and the task holds
//! the GPU, or, for a process in no task's cgroup, when the task holds the whole GPU; a
//! task on a GPU the round did not sample gets no sample (its use is unknown, not idle).
//! Samples live in memory and are written with the record's next durable change: after a
//! controller restart a run's use starts again from its next sample.
//!
//! Owns: the attribution and applying rounds. Does not own sampling
//! (`gantry_node::inventory::gpu_usage`) or what a task's use adds up to
//! (`gantry_api::gpu_usage`).

use super::job_edit::Annotation;
use super::{Scheduler, lock};
use gantry_api::gpu_usage::{GpuUsageReport, TaskSample};
use gantry_api::model::JobRecord;

/// A round accounts for at most this many sampling periods since the previous one (a node
/// away longer is not taken to have been busy the whole time).
const MAX_GAP_PERIODS: u64 = 2;

/// A round names at most this many devices (64 GPUs with 7 MIG slices each fit) and uses.
const MAX_DEVICES: usize = 1024;
const MAX_USES: usize = 8192;

/// The sample of each task of `job` on `node` that `report` covers: (task index, sample).
pub(crate) fn task_samples(
    job: &JobRecord,
    node: &str,
    report: &GpuUsageReport,
) -> Vec<(usize, TaskSample)> {
    let mut out = Vec::new();
    for (i, t) in job.tasks.iter().enumerate() {
        let covered = t.gpus.iter().all(|g| report.gpus.contains(&g.index));
        if t.node != node || t.exit.is_some() || t.gpus.is_empty() || !covered {
            continue;
        }
        let me = Some((job.id, i as u32));
        let mut sample = TaskSample {
            at_ms: report.at_ms,
            ..Default::default()
        };
        for g in &t.gpus {
            let mut util = 0u32;
            for u in report.uses.iter().filter(|u| u.gpu == g.index) {
                if u.task == me || (u.task.is_none() && g.milli >= 1000) {
                    util = util.saturating_add(u.util_percent);
                    sample.memory_mib = sample.memory_mib.saturating_add(u.memory_mib);
                }
            }
            sample.util_per_gpu.push(util.min(100));
        }
        out.push((i, sample));
    }
    out
}

impl Scheduler {
    /// Samples the local node's GPU use (when its GPUs came from NVML and
    /// `node.gpu_sample_every_s > 0`), applying each round.
    pub(crate) fn start_gpu_usage_sampling(&self) {
        let me = self.clone();
        let node = self.inner.node.name.clone();
        gantry_node::inventory::gpu_usage::sample_node(
            &self.inner.node,
            &self.inner.config.node,
            move |report| me.apply_gpu_usage(&node, &report),
        );
    }

    /// Adds node `node`'s round `report` to the running tasks it covers, once per round.
    pub(crate) fn apply_gpu_usage(&self, node: &str, report: &GpuUsageReport) {
        if report.gpus.len() > MAX_DEVICES || report.uses.len() > MAX_USES {
            tracing::warn!(node, "a GPU use round with too many entries is ignored");
            return;
        }
        let fresh = self
            .with_control(node, |ctl| {
                let fresh = report.at_ms > ctl.gpu_usage_at_ms;
                if fresh {
                    ctl.gpu_usage_at_ms = report.at_ms;
                }
                fresh
            })
            .unwrap_or(false);
        if !fresh {
            return;
        }
        let max_gap_ms = report.every_ms.saturating_mul(MAX_GAP_PERIODS);
        let mut st = lock(&self.inner.state);
        for mut job in st.jobs.edit_running() {
            for (task, sample) in task_samples(&job, node, report) {
                job.annotate(Annotation::GpuSample {
                    task,
                    sample,
                    max_gap_ms,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_api::gpu_usage::GpuUse;
    use gantry_api::model::{GpuShareView, JobSpec, TaskRecord};

    fn job(id: u64, tasks: &[(&str, &[(u32, u32)])]) -> JobRecord {
        let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        let mut j = JobRecord::new(id, spec, 0);
        j.tasks = tasks
            .iter()
            .map(|(node, gpus)| TaskRecord {
                node: node.to_string(),
                gpus: gpus
                    .iter()
                    .map(|&(index, milli)| GpuShareView { index, milli })
                    .collect(),
                cpu_milli: 0,
                memory_mib: 0,
                pid: None,
                exit: None,
                started_ms: Some(0),
                ended_ms: None,
                usage: None,
                gpu_usage: None,
            })
            .collect();
        j
    }

    fn used(gpu: u32, task: Option<(u64, u32)>, util: u32, mib: u64) -> GpuUse {
        GpuUse {
            gpu,
            task,
            util_percent: util,
            memory_mib: mib,
            processes: 1,
        }
    }

    #[test]
    fn processes_count_for_the_task_whose_cgroup_holds_them() {
        let j = job(7, &[("n0", &[(0, 1000), (1, 1000)]), ("n1", &[(0, 1000)])]);
        let report = GpuUsageReport {
            at_ms: 5_000,
            every_ms: 1_000,
            gpus: vec![0, 1, 2],
            uses: vec![
                used(0, Some((7, 0)), 60, 100),
                used(0, Some((7, 0)), 60, 100),
                used(1, None, 30, 50),
                // Another job's process on a GPU this task holds is not its use.
                used(1, Some((8, 0)), 90, 900),
                used(2, Some((7, 0)), 90, 900),
            ],
        };
        let samples = task_samples(&j, "n0", &report);
        assert_eq!(samples.len(), 1, "only the task on n0");
        let (task, s) = &samples[0];
        assert_eq!(*task, 0);
        assert_eq!(s.util_per_gpu, vec![100, 30]);
        assert_eq!(s.memory_mib, 250);
    }

    #[test]
    fn a_shared_gpu_counts_only_attributed_processes_and_an_unsampled_gpu_none() {
        let shared = job(3, &[("n0", &[(0, 500)])]);
        let report = GpuUsageReport {
            at_ms: 1,
            every_ms: 1_000,
            gpus: vec![0],
            uses: vec![used(0, None, 80, 10)],
        };
        assert_eq!(
            task_samples(&shared, "n0", &report)[0].1.util_per_gpu,
            vec![0]
        );
        let elsewhere = job(4, &[("n0", &[(1, 1000)])]);
        assert!(task_samples(&elsewhere, "n0", &report).is_empty());
    }
}
