//! Why a job does not fit: the pending reason of a job left out of the plan.
//!
//! Owns the reason code and message, with the codes and message forms of
//! `ClusterModel::explain` (model unavailable, short of GPUs with free/total numbers,
//! short of CPU or memory, or resources spread over nodes that cannot hold a task),
//! computed on the [`ClusterView`] of the call (usable nodes and GPUs, after the jobs
//! placed before it) from its running per-model totals, so a reason costs O(models),
//! not O(GPUs). Does not own placement.

use crate::node_view::ClusterView;
use gantry_sdk::cluster::fmt_gpus;
use gantry_sdk::{Cycle, Job, MILLI_PER_GPU, Reason, ReasonCode, TaskGroup};

/// Why `job` does not fit on `view` now, with numbers.
pub fn explain(ctx: &Cycle, view: &ClusterView, job: &Job) -> Reason {
    let gpu_groups: Vec<&TaskGroup> = job
        .tasks
        .iter()
        .filter(|t| t.gpu_milli_per_task() > 0)
        .collect();
    let (mut any_model, mut free_whole, mut free_milli, mut total_milli) =
        (false, 0u64, 0u64, 0u64);
    for (slot, t) in view.model_totals().iter().enumerate() {
        let model = (slot < 64).then_some(slot);
        if t.gpus > 0 && gpu_groups.iter().any(|g| g.allows_model(model)) {
            any_model = true;
            total_milli += t.gpus * u64::from(MILLI_PER_GPU);
            free_milli += t.free_milli;
            free_whole += t.free_whole;
        }
    }
    let models = model_names(ctx, job);
    let needed = job.gpu_milli_total();
    if needed > 0 && !any_model {
        return Reason::new(
            ReasonCode::GpuModelUnavailable,
            format!("needs GPUs of model {models}; no node that is up has one"),
        );
    }
    let whole_needed: u64 = job
        .tasks
        .iter()
        .map(|t| u64::from(t.gpus) * u64::from(t.count))
        .sum();
    if needed > free_milli || whole_needed > free_whole {
        return Reason::new(
            ReasonCode::InsufficientGpus,
            format!(
                "needs {} GPUs of model {models}; {} free of {} ({} whole GPUs free)",
                fmt_gpus(needed),
                fmt_gpus(free_milli),
                fmt_gpus(total_milli),
                free_whole
            ),
        );
    }
    let cpu_needed: u64 = job
        .tasks
        .iter()
        .map(|t| u64::from(t.cpu_milli) * u64::from(t.count))
        .sum();
    let cpu_free = view.cpu_free();
    if cpu_needed > cpu_free {
        return Reason::new(
            ReasonCode::InsufficientCpu,
            format!("needs {cpu_needed} milli-CPU; {cpu_free} free"),
        );
    }
    let mem_needed: u64 = job
        .tasks
        .iter()
        .map(|t| t.memory_mib * u64::from(t.count))
        .sum();
    let mem_free = view.memory_free();
    if mem_needed > mem_free {
        return Reason::new(
            ReasonCode::InsufficientMemory,
            format!("needs {mem_needed} MiB of memory; {mem_free} MiB free"),
        );
    }
    if needed == 0 {
        return Reason::new(
            ReasonCode::InsufficientCpu,
            format!(
                "needs {cpu_needed} milli-CPU and {mem_needed} MiB of memory in tasks that each fit on one node; free resources are spread over nodes that cannot hold a task"
            ),
        );
    }
    Reason::new(
        ReasonCode::InsufficientGpus,
        format!(
            "needs {} GPUs of model {models} with CPU and memory on the same node; free resources are spread over nodes that cannot hold a task",
            fmt_gpus(needed)
        ),
    )
}

fn model_names(ctx: &Cycle, job: &Job) -> String {
    let gpu_groups = job.tasks.iter().filter(|t| t.gpu_milli_per_task() > 0);
    let mask = gpu_groups.clone().fold(0u64, |m, t| m | t.gpu_model_mask);
    if mask == 0 || gpu_groups.clone().any(|t| t.gpu_model_mask == 0) {
        return "any".into();
    }
    let names: Vec<&str> = ctx
        .gpu_models
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 64 && mask & (1u64 << i) != 0)
        .map(|(_, m)| ctx.text(*m))
        .collect();
    names.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_view::tests::{ctx, node};

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
