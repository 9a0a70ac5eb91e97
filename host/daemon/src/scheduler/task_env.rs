//! The environment of a task: what it was given (`CUDA_VISIBLE_DEVICES`, its GPU share), who
//! and where it is (`GANTRY_*`), and the rendezvous variables of a gang (`RANK`, `WORLD_SIZE`,
//! `MASTER_ADDR`, `MASTER_PORT`...) that `torchrun` and `torch.distributed` read.
//!
//! Owns: variable names and values. Does not own launching (`launch`).

use super::Scheduler;
use crate::model::{GpuShareView, JobRecord};

/// Base of the rendezvous port given to gangs (`MASTER_PORT`).
const MASTER_PORT_BASE: u64 = 29_500;

impl Scheduler {
    pub(crate) fn task_env(&self, job: &JobRecord, task: usize) -> Vec<(String, String)> {
        let t = &job.tasks[task];
        let mut env: Vec<(String, String)> = job
            .spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let world = job.tasks.len();
        let gpu_milli: u32 = t.gpus.iter().map(|g| g.milli).sum();
        env.extend([
            ("CUDA_VISIBLE_DEVICES".into(), gpu_list(&t.gpus)),
            ("GANTRY_JOB_ID".into(), job.id.to_string()),
            ("GANTRY_JOB_NAME".into(), job.spec.name.clone()),
            ("GANTRY_TASK_INDEX".into(), task.to_string()),
            ("GANTRY_NODE".into(), t.node.clone()),
            ("GANTRY_GPU_MILLI".into(), gpu_milli.to_string()),
            ("GANTRY_USER".into(), job.spec.user.clone()),
            ("GANTRY_ACCOUNT".into(), job.spec.account.clone()),
            ("GANTRY_QUEUE".into(), job.spec.queue.clone()),
            ("WORLD_SIZE".into(), world.to_string()),
            ("RANK".into(), task.to_string()),
            ("LOCAL_RANK".into(), task.to_string()),
            ("NODE_RANK".into(), "0".into()),
            ("MASTER_ADDR".into(), "127.0.0.1".into()),
            (
                "MASTER_PORT".into(),
                (MASTER_PORT_BASE + job.id % 10_000).to_string(),
            ),
        ]);
        env.extend(fraction_env(&t.gpus, &self.inner.node.gpus));
        env
    }
}

/// For a task holding a fraction of one GPU: its device and share
/// (`GANTRY_GPU_SHARE=<index>:<milli>`), the device memory its share entitles it to
/// (`GANTRY_GPU_MEMORY_LIMIT_MIB`, when the device's memory is known) and the same
/// limits in the variables NVIDIA MPS clients honour (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`
/// for visible device 0, `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`). Whole GPUs get nothing.
pub(crate) fn fraction_env(
    gpus: &[GpuShareView],
    devices: &[crate::inventory::GpuInfo],
) -> Vec<(String, String)> {
    let [share] = gpus else {
        return Vec::new();
    };
    if share.milli >= 1000 {
        return Vec::new();
    }
    let mut env = vec![
        (
            "GANTRY_GPU_SHARE".to_string(),
            format!("{}:{}", share.index, share.milli),
        ),
        (
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".to_string(),
            (share.milli / 10).max(1).to_string(),
        ),
    ];
    let memory = devices
        .iter()
        .find(|d| d.index == share.index)
        .map_or(0, |d| d.memory_mib);
    if memory > 0 {
        let limit = memory * u64::from(share.milli) / 1000;
        env.push(("GANTRY_GPU_MEMORY_LIMIT_MIB".into(), limit.to_string()));
        env.push((
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT".into(),
            format!("0={limit}M"),
        ));
    }
    env
}

pub(crate) fn gpu_list(gpus: &[GpuShareView]) -> String {
    gpus.iter()
        .map(|g| g.index.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
