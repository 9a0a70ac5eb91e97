//! From [`Options`] to the fields of a `POST /v1/jobs` job spec: the task group (count and
//! per-task GPUs, CPU and memory, dividing per-node and per-job amounts over the tasks)
//! and the optional fields the options set.
//!
//! Owns: SLURM's task arithmetic. Does not own the fields the submitting client adds
//! (command or script, environment, user) or range checks (`JobSpec::validate` on the
//! server).

use super::{CpuAmount, GpuAmount, MemAmount, Options};
use serde_json::{Map, Value, json};

/// Per-task CPU when nothing asks for any, milli-cores (as `TaskSpec`'s default).
const DEFAULT_CPU_MILLI: u32 = 1000;
/// Per-task memory when nothing asks for any, MiB (as `TaskSpec`'s default).
const DEFAULT_MEMORY_MIB: u64 = 1024;

/// The single task group a submission becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskShape {
    /// Tasks of the gang.
    pub count: u32,
    /// Tasks per node assumed when dividing per-node amounts.
    pub tasks_per_node: u32,
    /// Whole GPUs per task.
    pub gpus: u32,
    /// Milli-GPU per task (instead of `gpus`).
    pub gpu_milli: u32,
    /// Milli-cores per task.
    pub cpu_milli: u32,
    /// MiB per task.
    pub memory_mib: u64,
    /// Allowed GPU models.
    pub gpu_models: Vec<String>,
    /// GPUs of the node shared by all its tasks (0: none): per-node GPUs that do not divide
    /// over a one-node job's tasks, as SLURM shares `--gres=gpu:2` among `-n 3`. One task
    /// holds them; every task sees them (`share_node_gpus`).
    pub shared_gpus: u32,
}

impl TaskShape {
    /// The job spec's `tasks`: one group, or with [`Self::shared_gpus`] the task that holds
    /// the node's GPUs and the others.
    pub fn task_groups(&self) -> Value {
        let group = |count: u32, gpus: u32, models: &[String]| {
            json!({
                "count": count, "gpus": gpus, "gpu_milli": self.gpu_milli,
                "cpu_milli": self.cpu_milli, "memory_mib": self.memory_mib, "gpu_models": models,
            })
        };
        if self.shared_gpus == 0 {
            return json!([group(self.count, self.gpus, &self.gpu_models)]);
        }
        let mut groups = vec![group(1, self.shared_gpus, &self.gpu_models)];
        if self.count > 1 {
            groups.push(group(self.count - 1, 0, &[]));
        }
        Value::Array(groups)
    }
}

fn split(total: u64, parts: u32, what: &str, over: &str) -> Result<u64, String> {
    if !total.is_multiple_of(u64::from(parts)) {
        return Err(format!(
            "{what} does not divide evenly over {parts} {over}; ask per task instead"
        ));
    }
    Ok(total / u64::from(parts))
}

fn narrow(n: u64, what: &str) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("{what} is too large"))
}

impl Options {
    /// The task group these options ask for, following SLURM: `--ntasks` tasks, else
    /// `--nodes` × `--ntasks-per-node`, else one task per node; per-node amounts are divided
    /// over the tasks of a node, per-job amounts over all tasks.
    pub fn task_shape(&self) -> Result<TaskShape, String> {
        let nodes = self.nodes.unwrap_or(1);
        let count = match (self.ntasks, self.ntasks_per_node) {
            (Some(n), _) => n,
            (None, Some(per)) => nodes
                .checked_mul(per)
                .ok_or("--nodes × --ntasks-per-node is too many tasks")?,
            (None, None) => nodes,
        };
        if nodes == 0 || count == 0 {
            return Err("a job needs at least one node and one task".into());
        }
        let tasks_per_node = count.div_ceil(nodes);
        let shares = |n: u32| nodes == 1 && tasks_per_node > 1 && !n.is_multiple_of(tasks_per_node);
        let shared_gpus = match self.gpus {
            Some(GpuAmount::PerNode(n)) if shares(n) => n,
            _ => 0,
        };
        let (gpus, gpu_milli) = match self.gpus {
            None => (0, 0),
            Some(GpuAmount::PerTask(n)) => (n, 0),
            Some(GpuAmount::MilliPerTask(m)) => (0, m),
            // Not divisible over a one-node job's tasks: shared by them, as SLURM's.
            Some(GpuAmount::PerNode(n)) if shares(n) => (0, 0),
            Some(GpuAmount::PerNode(n)) => {
                let what = format!("{n} GPUs per node");
                let per = split(u64::from(n), tasks_per_node, &what, "tasks per node")?;
                (narrow(per, "GPUs per task")?, 0)
            }
            Some(GpuAmount::Total(n)) => {
                let what = format!("--gpus={n} (GPUs of the whole job)");
                (
                    narrow(split(u64::from(n), count, &what, "tasks")?, "GPUs")?,
                    0,
                )
            }
        };
        let cpu_milli = match self.cpu {
            None => DEFAULT_CPU_MILLI,
            Some(CpuAmount::MilliPerTask(m)) => m,
            Some(CpuAmount::PerGpu(c)) if gpus > 0 => c
                .checked_mul(gpus)
                .and_then(|c| c.checked_mul(1000))
                .ok_or("--cpus-per-gpu × GPUs per task is too many CPUs")?,
            Some(CpuAmount::PerGpu(_)) => {
                return Err("--cpus-per-gpu needs whole GPUs per task".into());
            }
        };
        let memory_mib = match self.memory {
            None => DEFAULT_MEMORY_MIB,
            Some(MemAmount::PerTask(m)) => m,
            Some(MemAmount::PerNode(m)) => {
                let per = m / u64::from(tasks_per_node);
                if per == 0 {
                    return Err(format!(
                        "--mem={m}M is less than 1 MiB for each of {tasks_per_node} tasks per node"
                    ));
                }
                per
            }
            Some(MemAmount::PerCpu(m)) => m
                .checked_mul(u64::from(cpu_milli.div_ceil(1000)))
                .ok_or("--mem-per-cpu × CPUs is too much memory")?,
            Some(MemAmount::PerGpu(m)) if gpus > 0 => m
                .checked_mul(u64::from(gpus))
                .ok_or("--mem-per-gpu × GPUs is too much memory")?,
            Some(MemAmount::PerGpu(_)) => {
                return Err("--mem-per-gpu needs whole GPUs per task".into());
            }
        };
        Ok(TaskShape {
            count,
            tasks_per_node,
            gpus,
            gpu_milli,
            cpu_milli,
            memory_mib,
            gpu_models: self.gpu_models.clone().unwrap_or_default(),
            shared_gpus,
        })
    }

    /// Remarks on how the options were applied (e.g. multi-node placement).
    pub fn notes(&self, shape: &TaskShape) -> Vec<String> {
        if shape.shared_gpus > 0 {
            return vec![format!(
                "{} GPUs on one node shared by its {} tasks, as SLURM shares them: each task \
                 sees all of them",
                shape.shared_gpus, shape.count
            )];
        }
        match self.nodes {
            Some(nodes) if nodes > 1 => vec![format!(
                "--nodes={nodes}: one gang of {} tasks on {nodes} nodes, up to {} per node; \
                 per-node amounts were divided over a node's tasks",
                shape.count, shape.tasks_per_node
            )],
            _ => Vec::new(),
        }
    }

    /// The job-spec fields these options set (`tasks` always; the others only when given).
    pub fn spec_fields(&self) -> Result<Map<String, Value>, String> {
        let t = self.task_shape()?;
        let mut m = Map::new();
        m.insert("tasks".into(), t.task_groups());
        if t.shared_gpus > 0 {
            m.insert("share_node_gpus".into(), Value::Bool(true));
            m.insert("nodes".into(), json!(1));
        }
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                m.insert(key.into(), v);
            }
        };
        put("name", self.name.clone().map(Value::from));
        put("queue", self.queue.clone().map(Value::from));
        put("account", self.account.clone().map(Value::from));
        // A relative `--chdir` is relative to where the user submits, as with sbatch (the
        // daemon accepts only absolute working directories).
        put(
            "workdir",
            self.workdir
                .as_deref()
                .map(|dir| {
                    std::path::absolute(dir)
                        .map_or_else(|_| dir.to_owned(), |p| p.to_string_lossy().into_owned())
                })
                .map(Value::from),
        );
        put("time_limit_s", self.time_limit_s.map(Value::from));
        put("requeue", self.requeue.map(Value::from));
        put("max_requeues", self.max_requeues.map(Value::from));
        put("tier", self.tier.map(Value::from));
        put("preemptible", self.preemptible.map(Value::from));
        put("kind", self.kind.map(|k| json!(k)));
        put("array", self.array.as_ref().map(|a| json!(a)));
        put("dependencies", self.dependencies.as_ref().map(|d| json!(d)));
        put("signal", self.signal.as_ref().map(|s| json!(s)));
        put("hold", self.hold.map(Value::from));
        put("nodes", self.nodes.map(Value::from));
        put("output", self.output.clone().map(Value::from));
        put("error", self.error.clone().map(Value::from));
        put("begin_ms", self.begin_ms.map(Value::from));
        put("image", self.image.clone().map(Value::from));
        put("mounts", self.mounts.as_ref().map(|m| json!(m)));
        Ok(m)
    }
}
