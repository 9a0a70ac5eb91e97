//! A tentative model of the cluster's free resources: what placement plugins use to
//! try gangs ("take these GPUs, then release them if the gang does not fit") and what
//! the host validator uses to check a plan (every booking must fit what is free).
//!
//! Owns free-capacity arithmetic per node and GPU. Does not own ordering, policy or
//! fragmentation strategy: callers decide which node to try first.

use crate::delta::IdHasher;
use crate::types::{
    Cycle, GpuShare, Job, MILLI_PER_GPU, Node, NodeId, NodeState, Reason, ReasonCode,
    TaskAllocation, TaskGroup,
};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

mod mig_slices;
mod spread;
pub use spread::{NODES_LABEL, block_size, spread_shortage};

/// Why a booking does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookError {
    /// The allocation names a node that does not exist.
    UnknownNode(NodeId),
    /// The node is draining or down.
    NodeNotUp(NodeId),
    /// The allocation names a GPU index the node does not have.
    UnknownGpu {
        /// Node.
        node: NodeId,
        /// GPU index.
        index: u32,
    },
    /// The GPU is unhealthy.
    GpuUnhealthy {
        /// Node.
        node: NodeId,
        /// GPU index.
        index: u32,
    },
    /// More of a GPU than is free (the plan books it twice or over 1000 milli).
    GpuOverbooked {
        /// Node.
        node: NodeId,
        /// GPU index.
        index: u32,
        /// Milli asked.
        requested: u32,
        /// Milli free.
        free: u32,
    },
    /// The GPU's model is not in the task's allowed list.
    ModelNotAllowed {
        /// Node.
        node: NodeId,
        /// GPU index.
        index: u32,
    },
    /// The shares do not match the task's GPU request.
    WrongGpuShape(String),
    /// Not enough free CPU.
    CpuOverbooked(NodeId),
    /// Not enough free memory.
    MemoryOverbooked(NodeId),
    /// CPU or memory differ from the task's request.
    WrongCpuOrMemory(NodeId),
}

impl std::fmt::Display for BookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownNode(n) => write!(f, "node {n} does not exist"),
            Self::NodeNotUp(n) => write!(f, "node {n} is not up"),
            Self::UnknownGpu { node, index } => write!(f, "node {node} has no GPU {index}"),
            Self::GpuUnhealthy { node, index } => {
                write!(f, "GPU {index} on node {node} is unhealthy")
            }
            Self::GpuOverbooked {
                node,
                index,
                requested,
                free,
            } => write!(
                f,
                "GPU {index} on node {node} booked beyond capacity: {requested} milli asked, {free} free"
            ),
            Self::ModelNotAllowed { node, index } => {
                write!(f, "GPU {index} on node {node} is not an allowed model")
            }
            Self::WrongGpuShape(m) => write!(f, "GPU shares do not match the task: {m}"),
            Self::CpuOverbooked(n) => write!(f, "CPU on node {n} booked beyond capacity"),
            Self::MemoryOverbooked(n) => write!(f, "memory on node {n} booked beyond capacity"),
            Self::WrongCpuOrMemory(n) => {
                write!(
                    f,
                    "CPU or memory on node {n} differ from the task's request"
                )
            }
        }
    }
}

impl std::error::Error for BookError {}

#[derive(Debug, Clone)]
pub(crate) struct GpuSlot {
    index: u32,
    model_index: Option<usize>,
    free_milli: u32,
    healthy: bool,
    /// The GPU a MIG slice is carved from (contract 0.3).
    parent: Option<u32>,
}

#[derive(Debug, Clone)]
struct NodeSlot {
    id: NodeId,
    up: bool,
    cpu_free: u32,
    mem_free: u64,
    /// Healthy GPUs with nothing allocated (a quick upper bound for whole-GPU tasks).
    whole_free: u32,
    /// Largest free share on a healthy GPU (a quick upper bound for fractions).
    max_free_milli: u32,
    gpus: Vec<GpuSlot>,
}

impl NodeSlot {
    /// Whether a task of `group` may fit by the node's state and quick bounds (the scan
    /// of `fit_gang` tests this inline before trying the GPUs).
    #[inline(always)]
    fn may_fit(&self, group: &TaskGroup) -> bool {
        self.up
            && self.cpu_free >= group.cpu_milli
            && self.mem_free >= group.memory_mib
            && self.whole_free >= group.gpus
            && self.max_free_milli >= group.gpu_milli
    }

    fn refresh(&mut self) {
        let healthy = self.gpus.iter().filter(|g| g.healthy);
        self.whole_free = healthy
            .clone()
            .filter(|g| g.free_milli == MILLI_PER_GPU)
            .count() as u32;
        self.max_free_milli = healthy.map(|g| g.free_milli).max().unwrap_or(0);
    }
}

/// Free resources per node, changed by tentative bookings.
#[derive(Debug, Clone)]
pub struct ClusterModel {
    nodes: Vec<NodeSlot>,
    by_id: HashMap<NodeId, usize, BuildHasherDefault<IdHasher>>,
    /// Every node before this position has no free GPU share (so no GPU task fits
    /// there): first-fit scans start here instead of at node 0.
    gpu_cursor: usize,
}

impl ClusterModel {
    /// A model of what is free on `nodes` now.
    pub fn new(ctx: &Cycle, nodes: &[Node]) -> Self {
        let mut slots: Vec<NodeSlot> = nodes
            .iter()
            .map(|n| NodeSlot {
                id: n.id,
                up: n.state == NodeState::Up,
                cpu_free: n.cpu_milli_free,
                mem_free: n.memory_mib_free,
                whole_free: 0,
                max_free_milli: 0,
                gpus: n
                    .gpus
                    .iter()
                    .map(|g| GpuSlot {
                        index: g.index,
                        model_index: ctx.model_index(g.model),
                        free_milli: g.free_milli,
                        healthy: g.healthy,
                        parent: g.parent,
                    })
                    .collect(),
            })
            .collect();
        slots.iter_mut().for_each(NodeSlot::refresh);
        let by_id = slots.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
        Self {
            nodes: slots,
            by_id,
            gpu_cursor: 0,
        }
        .with_cursor_advanced()
    }

    fn with_cursor_advanced(mut self) -> Self {
        self.advance_cursor();
        self
    }

    fn advance_cursor(&mut self) {
        while self.gpu_cursor < self.nodes.len() && self.nodes[self.gpu_cursor].max_free_milli == 0
        {
            self.gpu_cursor += 1;
        }
    }

    /// Node ids in model order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().map(|n| n.id)
    }

    /// Tries to fit one task of `group` on node `node` without booking it.
    pub fn fit_task(&self, group: &TaskGroup, node: NodeId) -> Option<TaskAllocation> {
        self.fit_at(group, *self.by_id.get(&node)?)
    }

    /// [`Self::fit_task`] on the node at position `pos` of the model.
    fn fit_at(&self, group: &TaskGroup, pos: usize) -> Option<TaskAllocation> {
        let slot = self.nodes.get(pos)?;
        let node = slot.id;
        if !slot.may_fit(group) {
            return None;
        }
        let usable = |g: &&GpuSlot| g.healthy && group.allows_model(g.model_index);
        let gpus = if group.gpus > 0 {
            let free: Vec<&GpuSlot> = slot
                .gpus
                .iter()
                .filter(usable)
                .filter(|g| g.free_milli == MILLI_PER_GPU)
                .collect();
            if free.len() < group.gpus as usize {
                return None;
            }
            mig_slices::slices_packed(&slot.gpus, free, group.gpus as usize)
                .into_iter()
                .map(|g| GpuShare {
                    index: g.index,
                    milli: MILLI_PER_GPU,
                })
                .collect()
        } else if group.gpu_milli > 0 {
            // Best fit: the usable GPU with the least free share that still fits.
            let best = slot
                .gpus
                .iter()
                .filter(usable)
                .filter(|g| g.free_milli >= group.gpu_milli)
                .min_by_key(|g| (g.free_milli, g.index))?;
            vec![GpuShare {
                index: best.index,
                milli: group.gpu_milli,
            }]
        } else {
            Vec::new()
        };
        Some(TaskAllocation {
            node,
            gpus,
            cpu_milli: group.cpu_milli,
            memory_mib: group.memory_mib,
        })
    }

    /// Books `alloc` for a task of `group`, checking it against what is free and what the task asked.
    pub fn take(&mut self, group: &TaskGroup, alloc: &TaskAllocation) -> Result<(), BookError> {
        let pos = *self
            .by_id
            .get(&alloc.node)
            .ok_or(BookError::UnknownNode(alloc.node))?;
        self.take_at(group, alloc, pos)
    }

    /// [`Self::take`] on the node at position `pos`, which is `alloc.node`.
    fn take_at(
        &mut self,
        group: &TaskGroup,
        alloc: &TaskAllocation,
        pos: usize,
    ) -> Result<(), BookError> {
        check_shape(group, alloc)?;
        let slot = &self.nodes[pos];
        if !slot.up {
            return Err(BookError::NodeNotUp(alloc.node));
        }
        if slot.cpu_free < alloc.cpu_milli {
            return Err(BookError::CpuOverbooked(alloc.node));
        }
        if slot.mem_free < alloc.memory_mib {
            return Err(BookError::MemoryOverbooked(alloc.node));
        }
        // Check every share first (a task may list one GPU twice), then commit; no
        // allocation (this runs for every task placed, also inside plugins).
        let position = |gpus: &[GpuSlot], index: u32| gpus.iter().position(|g| g.index == index);
        for (k, share) in alloc.gpus.iter().enumerate() {
            let gi = position(&slot.gpus, share.index).ok_or(BookError::UnknownGpu {
                node: alloc.node,
                index: share.index,
            })?;
            let gpu = &slot.gpus[gi];
            if !gpu.healthy {
                return Err(BookError::GpuUnhealthy {
                    node: alloc.node,
                    index: share.index,
                });
            }
            if !group.allows_model(gpu.model_index) {
                return Err(BookError::ModelNotAllowed {
                    node: alloc.node,
                    index: share.index,
                });
            }
            let already: u32 = alloc.gpus[..k]
                .iter()
                .filter(|s| s.index == share.index)
                .map(|s| s.milli)
                .sum();
            let requested = already.saturating_add(share.milli);
            if requested > gpu.free_milli {
                return Err(BookError::GpuOverbooked {
                    node: alloc.node,
                    index: share.index,
                    requested,
                    free: gpu.free_milli,
                });
            }
        }
        let slot = &mut self.nodes[pos];
        for share in &alloc.gpus {
            if let Some(gi) = position(&slot.gpus, share.index) {
                slot.gpus[gi].free_milli -= share.milli;
            }
        }
        slot.cpu_free -= alloc.cpu_milli;
        slot.mem_free -= alloc.memory_mib;
        slot.refresh();
        self.advance_cursor();
        Ok(())
    }

    /// Returns a booking made with [`ClusterModel::take`].
    pub fn release(&mut self, alloc: &TaskAllocation) {
        let Some(&pos) = self.by_id.get(&alloc.node) else {
            return;
        };
        let slot = &mut self.nodes[pos];
        for share in &alloc.gpus {
            if let Some(g) = slot.gpus.iter_mut().find(|g| g.index == share.index) {
                g.free_milli = (g.free_milli + share.milli).min(MILLI_PER_GPU);
            }
        }
        slot.cpu_free = slot.cpu_free.saturating_add(alloc.cpu_milli);
        slot.mem_free = slot.mem_free.saturating_add(alloc.memory_mib);
        slot.refresh();
        if slot.max_free_milli > 0 {
            self.gpu_cursor = self.gpu_cursor.min(pos);
        }
    }

    /// Fits and books every task of `job` (first node that fits, in model order; a job
    /// that asks for a number of nodes in blocks on that many nodes, `spread.rs`), or books
    /// nothing and says why. All or nothing.
    pub fn fit_gang(&mut self, ctx: &Cycle, job: &Job) -> Result<Vec<TaskAllocation>, Reason> {
        if let Some(nodes) = job.nodes_wanted(ctx) {
            return self.fit_spread(ctx, job, nodes);
        }
        let mut booked: Vec<TaskAllocation> = Vec::with_capacity(job.task_count());
        for group in job.expanded_tasks() {
            let first = if group.gpu_milli_per_task() > 0 {
                self.gpu_cursor
            } else {
                0
            };
            let found = (first..self.nodes.len())
                .filter(|&i| self.nodes[i].may_fit(group))
                .find_map(|i| Some((i, self.fit_at(group, i)?)));
            let booking = found.and_then(|(i, a)| self.take_at(group, &a, i).ok().map(|()| a));
            match booking {
                Some(a) => booked.push(a),
                None => {
                    for a in &booked {
                        self.release(a);
                    }
                    return Err(self.explain(ctx, job));
                }
            }
        }
        Ok(booked)
    }

    /// Why `job` does not fit now: which resource is short, with numbers.
    pub fn explain(&self, ctx: &Cycle, job: &Job) -> Reason {
        let totals = self.free_totals(job);
        if let Some(nodes) = job.nodes_wanted(ctx) {
            return spread_shortage(ctx, job, nodes, &totals);
        }
        explain_shortage(ctx, job, &totals).unwrap_or_else(|| spread_reason(ctx, job))
    }

    /// What is free for `job`: over nodes that are up, GPUs of a model it allows.
    pub fn free_totals(&self, job: &Job) -> FreeTotals {
        let gpu_groups: Vec<&TaskGroup> = job
            .tasks
            .iter()
            .filter(|t| t.gpu_milli_per_task() > 0)
            .collect();
        let mut totals = FreeTotals::default();
        for n in self.nodes.iter().filter(|n| n.up) {
            totals.cpu_free += u64::from(n.cpu_free);
            totals.memory_free += n.mem_free;
            for g in &n.gpus {
                if g.healthy && gpu_groups.iter().any(|t| t.allows_model(g.model_index)) {
                    totals.any_model = true;
                    totals.gpu_milli_total += u64::from(MILLI_PER_GPU);
                    totals.gpu_milli_free += u64::from(g.free_milli);
                    totals.whole_free += u64::from(g.free_milli == MILLI_PER_GPU);
                }
            }
        }
        totals
    }
}

/// Free resources a job's reason is computed from: over nodes that are up, GPUs
/// counted only when healthy and of a model the job allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreeTotals {
    /// Some usable GPU has a model the job allows.
    pub any_model: bool,
    /// Those GPUs, milli-GPU.
    pub gpu_milli_total: u64,
    /// Their free share, milli-GPU.
    pub gpu_milli_free: u64,
    /// How many of them are wholly free.
    pub whole_free: u64,
    /// Free CPU, milli-cores.
    pub cpu_free: u64,
    /// Free memory, MiB.
    pub memory_free: u64,
}

/// The resource `job` is short of in `totals` (model, GPUs, CPU, memory, in that
/// order), with numbers; None when the totals would hold it (its resources are then
/// spread over nodes that cannot each hold a task).
pub fn explain_shortage(ctx: &Cycle, job: &Job, totals: &FreeTotals) -> Option<Reason> {
    let models = model_names(ctx, job);
    let needed = job.gpu_milli_total();
    if needed > 0 && !totals.any_model {
        return Some(Reason::new(
            ReasonCode::GpuModelUnavailable,
            format!("needs GPUs of model {models}; no node that is up has one"),
        ));
    }
    let whole_needed: u64 = job
        .tasks
        .iter()
        .map(|t| u64::from(t.gpus) * u64::from(t.count))
        .sum();
    if needed > totals.gpu_milli_free || whole_needed > totals.whole_free {
        return Some(Reason::new(
            ReasonCode::InsufficientGpus,
            format!(
                "needs {} GPUs of model {models}; {} free of {} ({} whole GPUs free)",
                fmt_gpus(needed),
                fmt_gpus(totals.gpu_milli_free),
                fmt_gpus(totals.gpu_milli_total),
                totals.whole_free
            ),
        ));
    }
    let cpu_needed: u64 = job
        .tasks
        .iter()
        .map(|t| u64::from(t.cpu_milli) * u64::from(t.count))
        .sum();
    if cpu_needed > totals.cpu_free {
        return Some(Reason::new(
            ReasonCode::InsufficientCpu,
            format!("needs {cpu_needed} milli-CPU; {} free", totals.cpu_free),
        ));
    }
    let mem_needed: u64 = job
        .tasks
        .iter()
        .map(|t| t.memory_mib * u64::from(t.count))
        .sum();
    if mem_needed > totals.memory_free {
        return Some(Reason::new(
            ReasonCode::InsufficientMemory,
            format!(
                "needs {mem_needed} MiB of memory; {} MiB free",
                totals.memory_free
            ),
        ));
    }
    None
}

/// The reason of a job whose GPUs, CPU and memory are free in total but on no node
/// together.
pub fn spread_reason(ctx: &Cycle, job: &Job) -> Reason {
    Reason::new(
        ReasonCode::InsufficientGpus,
        format!(
            "needs {} GPUs of model {} with CPU and memory on the same node; free resources are spread over nodes that cannot hold a task",
            fmt_gpus(job.gpu_milli_total()),
            model_names(ctx, job)
        ),
    )
}

fn check_shape(group: &TaskGroup, alloc: &TaskAllocation) -> Result<(), BookError> {
    if alloc.cpu_milli != group.cpu_milli || alloc.memory_mib != group.memory_mib {
        return Err(BookError::WrongCpuOrMemory(alloc.node));
    }
    if group.gpus > 0 {
        if alloc.gpus.len() != group.gpus as usize
            || alloc.gpus.iter().any(|s| s.milli != MILLI_PER_GPU)
        {
            return Err(BookError::WrongGpuShape(format!(
                "task asks for {} whole GPUs, allocation has {:?}",
                group.gpus, alloc.gpus
            )));
        }
    } else if group.gpu_milli > 0 {
        if alloc.gpus.len() != 1 || alloc.gpus[0].milli != group.gpu_milli {
            return Err(BookError::WrongGpuShape(format!(
                "task asks for {} milli of one GPU, allocation has {:?}",
                group.gpu_milli, alloc.gpus
            )));
        }
    } else if !alloc.gpus.is_empty() {
        return Err(BookError::WrongGpuShape("task asks for no GPU".into()));
    }
    Ok(())
}

fn model_names(ctx: &Cycle, job: &Job) -> String {
    let gpu_groups = job.tasks.iter().filter(|t| t.gpu_milli_per_task() > 0);
    if gpu_groups.clone().any(|t| t.gpu_model_mask == 0) {
        return "any".into();
    }
    let mask = gpu_groups.fold(0u64, |m, t| m | t.gpu_model_mask);
    if mask == 0 {
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

/// Formats milli-GPU as GPUs ("2", "0.5").
pub fn fmt_gpus(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        format!("{}", milli / 1000)
    } else {
        format!("{:.3}", milli as f64 / 1000.0)
            .trim_end_matches('0')
            .to_string()
    }
}
