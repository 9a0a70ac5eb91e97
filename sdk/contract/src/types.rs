//! The data every stage sees, mirroring `wit/0.1.0/types.wit` field by field.
//!
//! Names and labels are interned into [`Cycle::strings`] and referenced by [`Symbol`].

use serde::{Deserialize, Serialize};

/// Index into [`Cycle::strings`] of the same call.
pub type Symbol = u32;
/// Host-assigned job id.
pub type JobId = u64;
/// Host-assigned node number.
pub type NodeId = u32;

/// One whole GPU in milli-GPU.
pub const MILLI_PER_GPU: u32 = 1000;

/// What kind of work a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// Runs to completion.
    #[default]
    Batch,
    /// A person is waiting at a terminal or notebook.
    Interactive,
    /// Runs until cancelled.
    Service,
}

/// A `key=value` label, both interned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Label {
    /// Interned key.
    pub key: Symbol,
    /// Interned value.
    pub value: Symbol,
}

/// `count` identical tasks with the same per-task resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TaskGroup {
    /// Number of tasks, at least 1.
    pub count: u32,
    /// Whole GPUs per task (0 when `gpu_milli` is used).
    pub gpus: u32,
    /// Fraction of one GPU per task in milli-GPU (1..=999), when `gpus` is 0.
    pub gpu_milli: u32,
    /// CPU per task in milli-cores.
    pub cpu_milli: u32,
    /// Memory per task in MiB.
    pub memory_mib: u64,
    /// Allowed models as a bitmask over [`Cycle::gpu_models`]; 0 means any.
    pub gpu_model_mask: u64,
}

impl TaskGroup {
    /// GPU demand of one task in milli-GPU.
    pub fn gpu_milli_per_task(&self) -> u64 {
        if self.gpus > 0 {
            u64::from(self.gpus) * u64::from(MILLI_PER_GPU)
        } else {
            u64::from(self.gpu_milli)
        }
    }

    /// Whether a GPU whose model has index `model_index` in [`Cycle::gpu_models`] is allowed.
    pub fn allows_model(&self, model_index: Option<usize>) -> bool {
        if self.gpu_model_mask == 0 {
            return true;
        }
        match model_index {
            Some(i) if i < 64 => self.gpu_model_mask & (1u64 << i) != 0,
            _ => false,
        }
    }
}

/// A job as a policy sees it.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Job {
    /// Job id.
    pub id: JobId,
    /// Interned name.
    pub name: Symbol,
    /// Interned user.
    pub user: Symbol,
    /// Interned account.
    pub account: Symbol,
    /// Interned queue.
    pub queue: Symbol,
    /// Tier set at submit; higher runs first.
    pub tier: i32,
    /// Submit time in ms since the Unix epoch.
    pub submit_ms: u64,
    /// Wall-clock limit in seconds; 0 means none.
    pub time_limit_s: u64,
    /// Kind of work.
    pub kind: JobKind,
    /// Whether a preemption policy may evict it.
    pub preemptible: bool,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// The gang.
    pub tasks: Vec<TaskGroup>,
    /// Host bookkeeping, not part of the WIT contract (a plugin always reads 0): a
    /// producer that numbers its changes (the daemon's snapshot builder, the cycle
    /// benchmark) gives the job a number unique in the process each time it changes, so
    /// that a 0.2 plugin's host can tell it unchanged without comparing every field
    /// (`gantry_contract::delta`). 0: not numbered, compared field by field.
    #[serde(skip)]
    pub revision: u64,
}

/// Equal in everything a plugin sees (the revision is bookkeeping).
impl PartialEq for Job {
    fn eq(&self, o: &Self) -> bool {
        let Job {
            id,
            name,
            user,
            account,
            queue,
            tier,
            submit_ms,
            time_limit_s,
            kind,
            preemptible,
            labels,
            tasks,
            revision: _,
        } = self;
        *id == o.id
            && *name == o.name
            && *user == o.user
            && *account == o.account
            && *queue == o.queue
            && *tier == o.tier
            && *submit_ms == o.submit_ms
            && *time_limit_s == o.time_limit_s
            && *kind == o.kind
            && *preemptible == o.preemptible
            && *labels == o.labels
            && *tasks == o.tasks
    }
}

impl Job {
    /// Number of tasks across all groups.
    pub fn task_count(&self) -> usize {
        self.tasks.iter().map(|g| g.count as usize).sum()
    }

    /// Total GPU demand in milli-GPU.
    pub fn gpu_milli_total(&self) -> u64 {
        self.tasks
            .iter()
            .map(|g| g.gpu_milli_per_task() * u64::from(g.count))
            .sum()
    }

    /// The task groups expanded to one entry per task, in task order.
    pub fn expanded_tasks(&self) -> impl Iterator<Item = &TaskGroup> {
        self.tasks
            .iter()
            .flat_map(|g| std::iter::repeat_n(g, g.count as usize))
    }
}

/// Whether a node takes new tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Accepts new tasks.
    #[default]
    Up,
    /// Runs what it has, takes nothing new.
    Draining,
    /// Nothing runs or starts here.
    Down,
}

/// One GPU of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// Device index on the node.
    pub index: u32,
    /// Interned model.
    pub model: Symbol,
    /// Device memory in MiB.
    pub memory_mib: u64,
    /// Unallocated share in milli-GPU.
    pub free_milli: u32,
    /// False after a fatal device error.
    pub healthy: bool,
    /// For a MIG slice, the device index of the physical GPU it is carved from (contract
    /// 0.3.0; plugins of older versions are sent none and see `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
}

/// A node and what is free on it.
#[derive(Debug, Clone, Eq, Serialize, Deserialize, Default)]
pub struct Node {
    /// Node number.
    pub id: NodeId,
    /// Interned name.
    pub name: Symbol,
    /// State.
    pub state: NodeState,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// CPU in milli-cores.
    pub cpu_milli_total: u32,
    /// Free CPU in milli-cores.
    pub cpu_milli_free: u32,
    /// Memory in MiB.
    pub memory_mib_total: u64,
    /// Free memory in MiB.
    pub memory_mib_free: u64,
    /// GPUs.
    pub gpus: Vec<Gpu>,
    /// Host bookkeeping, not part of the WIT contract (a plugin always reads 0): a
    /// producer that numbers its changes (the simulator) gives the element a number
    /// unique in the process each time it changes, so that a 0.2 plugin's host can
    /// tell it unchanged without comparing every field (`gantry_contract::delta`).
    /// 0: not numbered, compared field by field.
    #[serde(skip)]
    pub revision: u64,
}

/// A share of one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuShare {
    /// Device index on the task's node.
    pub index: u32,
    /// Share in milli-GPU, 1..=1000.
    pub milli: u32,
}

/// Where one task runs and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAllocation {
    /// Node number.
    pub node: NodeId,
    /// GPU shares on that node.
    pub gpus: Vec<GpuShare>,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
}

/// A job that holds resources now.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct RunningJob {
    /// The job.
    pub job: Job,
    /// One allocation per task.
    pub tasks: Vec<TaskAllocation>,
    /// Start time in ms since the Unix epoch.
    pub start_ms: u64,
    /// Expected end in ms, when the job has a time limit.
    pub expected_end_ms: Option<u64>,
    /// Priority score when it started.
    pub score: f64,
    /// Host bookkeeping, not part of the WIT contract (a plugin always reads 0): a
    /// producer that numbers its changes (the simulator) gives the element a number
    /// unique in the process each time it changes, so that a 0.2 plugin's host can
    /// tell it unchanged without comparing every field (`gantry_contract::delta`).
    /// 0: not numbered, compared field by field.
    #[serde(skip)]
    pub revision: u64,
}

/// Equal in everything a plugin sees (the revision is bookkeeping).
impl PartialEq for Node {
    fn eq(&self, o: &Self) -> bool {
        let Node {
            id,
            name,
            state,
            labels,
            cpu_milli_total,
            cpu_milli_free,
            memory_mib_total,
            memory_mib_free,
            gpus,
            revision: _,
        } = self;
        *id == o.id
            && *name == o.name
            && *state == o.state
            && *labels == o.labels
            && *cpu_milli_total == o.cpu_milli_total
            && *cpu_milli_free == o.cpu_milli_free
            && *memory_mib_total == o.memory_mib_total
            && *memory_mib_free == o.memory_mib_free
            && *gpus == o.gpus
    }
}

/// Equal in everything a plugin sees (the revision is bookkeeping).
impl PartialEq for RunningJob {
    fn eq(&self, o: &Self) -> bool {
        let RunningJob {
            job,
            tasks,
            start_ms,
            expected_end_ms,
            score,
            revision: _,
        } = self;
        *job == o.job
            && *tasks == o.tasks
            && *start_ms == o.start_ms
            && *expected_end_ms == o.expected_end_ms
            && *score == o.score
    }
}

/// A number for [`Job::revision`], [`Node::revision`] and [`RunningJob::revision`] no other
/// element of this process was given: never 0. Revisions never leave the process (they
/// are not serialized): a recording that spans a restart would otherwise vouch for a
/// number given twice.
pub fn next_revision() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Decayed GPU usage of one user or account.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Interned user or account.
    pub who: Symbol,
    /// Decayed GPU-seconds.
    pub gpu_seconds: f64,
}

/// GPUs held now by one user or account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuUse {
    /// Interned user or account.
    pub who: Symbol,
    /// Held by running jobs, milli-GPU.
    pub gpu_milli: u64,
}

/// A queue's quota and use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct QueueStatus {
    /// Interned queue.
    pub queue: Symbol,
    /// Nominal quota in milli-GPU; none is unlimited.
    pub gpu_milli_quota: Option<u64>,
    /// In use by running jobs, milli-GPU.
    pub gpu_milli_used: u64,
    /// Pending jobs of the queue.
    pub pending_jobs: u32,
    /// In use by running jobs per GPU model, milli-GPU: entry i is for
    /// [`Cycle::gpu_models`]`[i]` (quota flavors). Sums to `gpu_milli_used`.
    #[serde(default)]
    pub gpu_milli_used_by_model: Vec<u64>,
}

/// Totals over nodes that are up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ClusterTotals {
    /// Nodes up.
    pub nodes: u32,
    /// GPUs in milli-GPU.
    pub gpu_milli_total: u64,
    /// Free GPUs in milli-GPU.
    pub gpu_milli_free: u64,
    /// CPU in milli-cores.
    pub cpu_milli_total: u64,
    /// Memory in MiB.
    pub memory_mib_total: u64,
}

/// Everything about the cycle that is not a job or a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Cycle {
    /// Cycle number.
    pub id: u64,
    /// Now, in ms since the Unix epoch.
    pub now_ms: u64,
    /// Seed for randomness.
    pub seed: u64,
    /// The string table symbols index.
    pub strings: Vec<String>,
    /// GPU models; bit i of a model mask is `gpu_models[i]`.
    pub gpu_models: Vec<Symbol>,
    /// Decayed usage per user.
    #[serde(default)]
    pub user_usage: Vec<Usage>,
    /// Decayed usage per account.
    #[serde(default)]
    pub account_usage: Vec<Usage>,
    /// GPUs held now per user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_gpus: Vec<GpuUse>,
    /// GPUs held now per account.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub account_gpus: Vec<GpuUse>,
    /// Queue quotas and use.
    #[serde(default)]
    pub queues: Vec<QueueStatus>,
    /// Cluster totals.
    #[serde(default)]
    pub totals: ClusterTotals,
    /// Host bookkeeping, not part of the WIT contract (a plugin always reads 0): a
    /// producer whose string table only ever grows (the simulator) names the table with
    /// a number unique in the process ([`next_revision`]) and keeps it while the table
    /// only grows, so that a 0.2 plugin's host looks only at the strings added since the
    /// plugin's previous call (`gantry_contract::delta::StringTable`). 0: the table is
    /// compared string by string.
    #[serde(skip)]
    pub strings_lineage: u64,
}

impl Cycle {
    /// The string a symbol stands for ("" when out of range).
    pub fn text(&self, symbol: Symbol) -> &str {
        self.strings
            .get(symbol as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Index of a model symbol in [`Cycle::gpu_models`].
    pub fn model_index(&self, model: Symbol) -> Option<usize> {
        self.gpu_models.iter().position(|m| *m == model)
    }
}

/// Why a job does not run, machine-readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ReasonCode {
    /// Admission holds it.
    HeldByPolicy,
    /// Not enough free GPUs.
    InsufficientGpus,
    /// Not enough free CPU.
    InsufficientCpu,
    /// Not enough free memory.
    InsufficientMemory,
    /// No node has an allowed model.
    GpuModelUnavailable,
    /// A higher-priority job waits first.
    BlockedByHigherPriority,
    /// Evictions are freeing resources for it.
    WaitingForPreemption,
    /// Evicted for another job.
    Preempted,
    /// Anything else.
    Other,
}

impl ReasonCode {
    /// The kebab-case code as in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HeldByPolicy => "held-by-policy",
            Self::InsufficientGpus => "insufficient-gpus",
            Self::InsufficientCpu => "insufficient-cpu",
            Self::InsufficientMemory => "insufficient-memory",
            Self::GpuModelUnavailable => "gpu-model-unavailable",
            Self::BlockedByHigherPriority => "blocked-by-higher-priority",
            Self::WaitingForPreemption => "waiting-for-preemption",
            Self::Preempted => "preempted",
            Self::Other => "other",
        }
    }
}

/// A reason with a human message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// Machine-readable code.
    pub code: ReasonCode,
    /// Human message.
    pub message: String,
}

impl Reason {
    /// Builds a reason.
    pub fn new(code: ReasonCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}
