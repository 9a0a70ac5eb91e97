//! The environment of a task: what it was given (`CUDA_VISIBLE_DEVICES`, its GPU share), who
//! and where it is (`GANTRY_*`), and the rendezvous variables of a gang (`RANK`, `WORLD_SIZE`,
//! `MASTER_ADDR`, `MASTER_PORT`...) that `torchrun` and `torch.distributed` read.
//!
//! Owns: variable names and values. Does not own launching (`launch`).

use super::{Scheduler, lock};
use gantry_api::model::{GpuShareView, JobRecord};

/// Base of the rendezvous port given to gangs (`MASTER_PORT`).
const MASTER_PORT_BASE: u64 = 29_500;

impl Scheduler {
    /// The variables of task `task` of `job`, on top of the daemon's environment.
    pub(crate) fn task_env(&self, job: &JobRecord, task: usize) -> Vec<(String, String)> {
        let t = &job.tasks[task];
        let mut env: Vec<(String, String)> = job
            .spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let gpu_milli: u32 = t.gpus.iter().map(|g| g.milli).sum();
        let (master_addr, devices, local, visible) = {
            let members = lock(&self.inner.members);
            let local = members
                .by_name(&t.node)
                .is_some_and(|(_, m)| m.runner.agent().is_none());
            let addr_of = |node: &str| members.by_name(node).map(|(_, m)| m.addr.clone());
            let master_addr = job
                .tasks
                .first()
                .and_then(|t0| addr_of(&t0.node))
                .unwrap_or_else(|| "127.0.0.1".into());
            let info = members.by_name(&t.node).map(|(_, m)| &m.info);
            let devices = info.map(|i| i.schedulable_gpus()).unwrap_or_default();
            // A MIG slice is named by its `MIG-…` UUID, a whole GPU by its index.
            let visible: Vec<String> = visible_gpu_indices(job, task)
                .into_iter()
                .map(|i| info.map_or_else(|| i.to_string(), |n| n.visible_name(i)))
                .collect();
            (master_addr, devices, local, visible.join(","))
        };
        let gang = Gang::of(job, task, master_addr);
        let master_port = job
            .rendezvous_port
            .map_or_else(|| MASTER_PORT_BASE + job.id % 10_000, u64::from);
        env.extend([
            ("CUDA_VISIBLE_DEVICES".into(), visible),
            ("GANTRY_JOB_ID".into(), job.id.to_string()),
            ("GANTRY_JOB_NAME".into(), job.spec.name.clone()),
            ("GANTRY_TASK_INDEX".into(), task.to_string()),
            ("GANTRY_NODE".into(), t.node.clone()),
            ("GANTRY_NODELIST".into(), gang.nodelist.join(",")),
            ("GANTRY_NUM_TASKS".into(), job.tasks.len().to_string()),
            ("GANTRY_GPU_MILLI".into(), gpu_milli.to_string()),
            ("GANTRY_USER".into(), job.spec.user.clone()),
            ("GANTRY_ACCOUNT".into(), job.spec.account.clone()),
            ("GANTRY_QUEUE".into(), job.spec.queue.clone()),
            ("GANTRY_RESTART_COUNT".into(), job.restarts.to_string()),
            ("GANTRY_REQUEUE_COUNT".into(), job.requeues.to_string()),
            ("WORLD_SIZE".into(), job.tasks.len().to_string()),
            ("RANK".into(), task.to_string()),
            ("LOCAL_RANK".into(), gang.local_rank.to_string()),
            ("LOCAL_WORLD_SIZE".into(), gang.local_world_size.to_string()),
            ("NODE_RANK".into(), gang.node_rank.to_string()),
            ("GROUP_RANK".into(), gang.node_rank.to_string()),
            ("MASTER_ADDR".into(), gang.master_addr),
            ("MASTER_PORT".into(), master_port.to_string()),
        ]);
        env.extend(slurm_env(
            job,
            task,
            &gang.nodelist,
            gang.node_rank,
            gang.local_rank,
        ));
        if let Some(a) = job.array {
            env.extend([
                ("GANTRY_ARRAY_JOB_ID".into(), a.array_id.to_string()),
                ("GANTRY_ARRAY_INDEX".into(), a.index.to_string()),
                ("SLURM_ARRAY_JOB_ID".into(), a.array_id.to_string()),
                ("SLURM_ARRAY_TASK_ID".into(), a.index.to_string()),
            ]);
        }
        if let Some(port) = job.service_port {
            env.extend([
                ("PORT".into(), port.to_string()),
                ("GANTRY_SERVICE_PORT".into(), port.to_string()),
            ]);
        }
        env.extend(fraction_env(&t.gpus, &devices));
        if local && job.spec.image.is_none() {
            // The daemon's socket, so that `scontrol requeue`, `sbatch` or `gantry` inside the
            // job reach it as the job's user (the kernel names the caller).
            env.push((
                "GANTRY_SERVER".into(),
                format!("unix:{}", self.inner.config.socket_path().display()),
            ));
        }
        env
    }
}

/// The variables existing SLURM batch scripts and launchers (submitit, dask-jobqueue) read,
/// with Gantry's values in SLURM's formats (node lists as `node[01-04]`, tasks per node as
/// `2(x3)`); `SLURM_ARRAY_*` are set with the array's own.
fn slurm_env(
    job: &JobRecord,
    task: usize,
    nodelist: &[String],
    node_rank: usize,
    local_rank: usize,
) -> Vec<(String, String)> {
    let t = job.tasks.get(task);
    let cpus_per_task = t.map_or(0, |t| t.cpu_milli.div_ceil(1000).max(1));
    let node = t.map(|t| t.node.as_str()).unwrap_or_default();
    // This node's GPUs held by the job's tasks, by index, each once.
    let mut node_gpus: Vec<u32> = job
        .tasks
        .iter()
        .filter(|o| o.node == node)
        .flat_map(|o| o.gpus.iter().map(|g| g.index))
        .collect();
    node_gpus.sort_unstable();
    node_gpus.dedup();
    let per_node: Vec<usize> = nodelist
        .iter()
        .map(|n| job.tasks.iter().filter(|o| &o.node == n).count())
        .collect();
    let hostlist = gantry_api::hostlist::compress(nodelist);
    let mut env = vec![
        ("SLURM_JOB_ID".into(), job.id.to_string()),
        ("SLURM_JOBID".into(), job.id.to_string()),
        ("SLURM_JOB_NAME".into(), job.spec.name.clone()),
        ("SLURM_PROCID".into(), task.to_string()),
        ("SLURM_LOCALID".into(), local_rank.to_string()),
        ("SLURM_NODEID".into(), node_rank.to_string()),
        ("SLURM_NTASKS".into(), job.tasks.len().to_string()),
        ("SLURM_NPROCS".into(), job.tasks.len().to_string()),
        ("SLURM_JOB_NUM_NODES".into(), nodelist.len().to_string()),
        ("SLURM_NNODES".into(), nodelist.len().to_string()),
        ("SLURM_JOB_NODELIST".into(), hostlist.clone()),
        ("SLURM_NODELIST".into(), hostlist),
        ("SLURMD_NODENAME".into(), node.to_string()),
        ("SLURM_TASKS_PER_NODE".into(), tasks_per_node(&per_node)),
        (
            "SLURM_NTASKS_PER_NODE".into(),
            per_node.first().copied().unwrap_or(0).to_string(),
        ),
        ("SLURM_CPUS_PER_TASK".into(), cpus_per_task.to_string()),
        ("SLURM_GPUS_ON_NODE".into(), node_gpus.len().to_string()),
        (
            "SLURM_JOB_GPUS".into(),
            node_gpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("SLURM_JOB_PARTITION".into(), job.spec.queue.clone()),
        ("SLURM_JOB_ACCOUNT".into(), job.spec.account.clone()),
        ("SLURM_JOB_USER".into(), job.spec.user.clone()),
        ("SLURM_RESTART_COUNT".into(), job.requeues.to_string()),
        ("SLURM_CLUSTER_NAME".into(), "gantry".into()),
    ];
    if let Some(a) = job.array.filter(|a| a.count > 0) {
        env.extend([
            ("SLURM_ARRAY_TASK_COUNT".into(), a.count.to_string()),
            ("SLURM_ARRAY_TASK_MIN".into(), a.min.to_string()),
            ("SLURM_ARRAY_TASK_MAX".into(), a.max.to_string()),
        ]);
    }
    env
}

/// The GPU indices of a task's `CUDA_VISIBLE_DEVICES` (its own, or with `share_node_gpus`
/// every GPU of its job on its node, ascending).
pub(crate) fn visible_gpu_indices(job: &JobRecord, task: usize) -> Vec<u32> {
    let Some(t) = job.tasks.get(task) else {
        return Vec::new();
    };
    if !job.spec.share_node_gpus {
        return t.gpus.iter().map(|g| g.index).collect();
    }
    let mut all: Vec<u32> = job
        .tasks
        .iter()
        .filter(|o| o.node == t.node)
        .flat_map(|o| o.gpus.iter().map(|g| g.index))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// SLURM's tasks-per-node form: counts in node order, runs of one count as `N(xK)`:
/// `[2, 2, 2, 1]` → `2(x3),1`.
fn tasks_per_node(per_node: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < per_node.len() {
        let run = per_node[i..]
            .iter()
            .take_while(|n| **n == per_node[i])
            .count();
        out.push(match run {
            1 => per_node[i].to_string(),
            _ => format!("{}(x{run})", per_node[i]),
        });
        i += run;
    }
    out.join(",")
}

/// Where one task sits in its gang: nodes in order of first appearance among the tasks (rank
/// 0's node first), the task's node rank, its rank and the task count on its node, and rank
/// 0's node address (`MASTER_ADDR`).
struct Gang {
    nodelist: Vec<String>,
    node_rank: usize,
    local_rank: usize,
    local_world_size: usize,
    master_addr: String,
}

impl Gang {
    fn of(job: &JobRecord, task: usize, master_addr: String) -> Self {
        let mut nodelist: Vec<String> = Vec::new();
        for t in &job.tasks {
            if !nodelist.contains(&t.node) {
                nodelist.push(t.node.clone());
            }
        }
        let node = &job.tasks[task].node;
        let node_rank = nodelist.iter().position(|n| n == node).unwrap_or(0);
        let local_rank = job.tasks[..task].iter().filter(|t| &t.node == node).count();
        let local_world_size = job.tasks.iter().filter(|t| &t.node == node).count();
        Self {
            nodelist,
            node_rank,
            local_rank,
            local_world_size,
            master_addr,
        }
    }
}

/// A TCP port that is free on this host now (the kernel's choice), for a gang's rendezvous or
/// a service; `None` if none could be bound.
pub(crate) fn free_port() -> Option<u16> {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()
}

/// For a task holding a fraction of one GPU: its device and share
/// (`GANTRY_GPU_SHARE=<index>:<milli>`), the device memory its share entitles it to
/// (`GANTRY_GPU_MEMORY_LIMIT_MIB`, when the device's memory is known) and the same
/// limits in the variables NVIDIA MPS clients honour (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`
/// for visible device 0, `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`). Whole GPUs get nothing.
pub(crate) fn fraction_env(
    gpus: &[GpuShareView],
    devices: &[gantry_node::inventory::GpuInfo],
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

#[cfg(test)]
mod slurm_format_tests {
    #[test]
    fn tasks_per_node_folds_runs_as_slurm_does() {
        assert_eq!(super::tasks_per_node(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(super::tasks_per_node(&[1]), "1");
        assert_eq!(super::tasks_per_node(&[4, 1, 4]), "4,1,4");
    }
}
