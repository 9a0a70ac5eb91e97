//! Why a job does not fit: the pending reason of a job left out of the plan.
//!
//! Owns the reason code and message, with the codes and message forms of
//! `ClusterModel::explain` (model unavailable, short of GPUs with free/total numbers,
//! short of CPU or memory, or resources spread over nodes that cannot hold a task),
//! computed on the [`ClusterView`] of the call (usable nodes and GPUs, after the jobs
//! placed before it) from its running per-model totals, so a reason costs O(models),
//! not O(GPUs). Does not own placement.

use crate::node_view::ClusterView;
use gantry_sdk::cluster::{FreeTotals, explain_shortage, spread_reason};
use gantry_sdk::{Cycle, Job, MILLI_PER_GPU, Reason, ReasonCode};

/// Why `job` does not fit on `view` now, with numbers.
pub fn explain(ctx: &Cycle, view: &ClusterView, job: &Job) -> Reason {
    let mut totals = FreeTotals {
        cpu_free: view.cpu_free(),
        memory_free: view.memory_free(),
        ..FreeTotals::default()
    };
    for (slot, t) in view.model_totals().iter().enumerate() {
        let model = (slot < 64).then_some(slot);
        let allowed = job
            .tasks
            .iter()
            .filter(|g| g.gpu_milli_per_task() > 0)
            .any(|g| g.allows_model(model));
        if t.gpus > 0 && allowed {
            totals.any_model = true;
            totals.gpu_milli_total += t.gpus * u64::from(MILLI_PER_GPU);
            totals.gpu_milli_free += t.free_milli;
            totals.whole_free += t.free_whole;
        }
    }
    explain_shortage(ctx, job, &totals).unwrap_or_else(|| {
        if job.gpu_milli_total() > 0 {
            return spread_reason(ctx, job);
        }
        let (cpu, mem) = job.tasks.iter().fold((0u64, 0u64), |(c, m), t| {
            (
                c + u64::from(t.cpu_milli) * u64::from(t.count),
                m + t.memory_mib * u64::from(t.count),
            )
        });
        Reason::new(
            ReasonCode::InsufficientCpu,
            format!(
                "needs {cpu} milli-CPU and {mem} MiB of memory in tasks that each fit on one node; free resources are spread over nodes that cannot hold a task"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_view::tests::{ctx, node};
    use gantry_sdk::TaskGroup;

    fn job(gpus: u32, gpu_milli: u32, cpu: u32, mask: u64, count: u32) -> Job {
        Job {
            id: 1,
            tasks: vec![TaskGroup {
                count,
                gpus,
                gpu_milli,
                cpu_milli: cpu,
                memory_mib: 1,
                gpu_model_mask: mask,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn codes_and_numbers() {
        let mut v = ClusterView::default();
        v.rebuild(
            &ctx(),
            &[node(0, 0, &[1000, 500], 4000), node(1, 0, &[1000], 4000)],
            1,
        );
        let r = explain(&ctx(), &v, &job(1, 0, 1, 0b10, 1));
        assert_eq!(r.code, ReasonCode::GpuModelUnavailable);
        assert!(r.message.contains("model B"), "{}", r.message);
        let r = explain(&ctx(), &v, &job(3, 0, 1, 0, 1));
        assert_eq!(r.code, ReasonCode::InsufficientGpus);
        assert_eq!(
            r.message,
            "needs 3 GPUs of model any; 2.5 free of 3 (2 whole GPUs free)"
        );
        let r = explain(&ctx(), &v, &job(0, 0, 5000, 0, 2));
        assert_eq!(r.code, ReasonCode::InsufficientCpu);
        assert_eq!(r.message, "needs 10000 milli-CPU; 8000 free");
        let r = explain(&ctx(), &v, &job(2, 0, 1, 0, 1));
        assert_eq!(r.code, ReasonCode::InsufficientGpus);
        assert!(r.message.contains("same node"), "{}", r.message);
        let r = explain(&ctx(), &v, &job(0, 0, 3000, 0, 2));
        assert_eq!(r.code, ReasonCode::InsufficientCpu);
        assert!(r.message.contains("spread"), "{}", r.message);
    }
}
