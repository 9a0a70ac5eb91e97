//! The free state of the usable part of the cluster during one `place` call.
//!
//! Owns: which nodes and GPUs are usable (nodes `Up`, GPUs healthy; other nodes are
//! left out, unhealthy GPUs are invisible), each node's free CPU, memory and per-GPU
//! free milli in device-index order with its model index, the node's tie-break rank
//! (cached between calls), its GpuClustering tags, quick bounds (free whole GPUs,
//! largest free share) and cluster totals per model (for pending reasons), feasibility
//! (`docs/fgd-replay/method.md` §4, with a per-GPU model filter), and booking and
//! un-booking tasks, which keep bounds and totals current. Buffers are reused between
//! calls, and under contract 0.2 the view follows a call's hint
//! (`gantry_sdk::changes`): it re-reads only the nodes that changed and those the
//! previous call booked on ([`ClusterView::update`]; its memory in `follow`), which
//! equals a rebuild. Does not own scores, GPU choice (`assign`) or the placement loop
//! (`place`).

mod follow;

use crate::rank::RankCache;
use crate::shape::{NO_MODEL, PodKind, PodShape};
use follow::{Follow, LEFT_OUT};
use gantry_sdk::{Cycle, MILLI_PER_GPU, Node, NodeId, NodeState, RunningJob, Symbol};
use std::collections::HashMap;

/// Model index of a node whose GPUs do not all share one model.
pub const MIXED_MODEL: u8 = NO_MODEL - 1;

/// One usable GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuFree {
    /// Device index on the node.
    pub index: u32,
    /// Free milli-GPU `l`.
    pub free: u32,
    /// Model index in `Cycle::gpu_models`, or [`NO_MODEL`].
    pub model: u8,
}

/// One usable node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeView {
    /// Node id.
    pub id: NodeId,
    /// Interned name.
    pub name: Symbol,
    /// Tie-break rank (smaller wins).
    pub rank: u64,
    /// Free CPU, milli-cores.
    pub cpu: u32,
    /// Free memory, MiB.
    pub memory_mib: u64,
    /// The node's model index when all its usable GPUs share one, else [`MIXED_MODEL`]
    /// ([`NO_MODEL`] for a node without usable GPUs).
    pub model: u8,
    /// GpuClustering tags of the GPU pods on the node (see `PodShape::tag`).
    pub tags: u64,
    /// Completely free usable GPUs (an upper bound for whole-GPU pods).
    pub whole_free: u32,
    /// Largest free amount on a usable GPU (an upper bound for sharing pods).
    pub max_free: u32,
    pub(crate) gpu_start: u32,
    pub(crate) gpu_len: u32,
}

/// A booked task, enough to undo it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booking {
    /// Position of the node in the view.
    pub node: usize,
    /// Positions of the GPUs within the node's GPU slice, with the milli taken.
    pub gpus: Vec<(usize, u32)>,
    /// CPU taken, milli-cores.
    pub cpu: u32,
    /// Memory taken, MiB.
    pub memory_mib: u64,
    /// The node's tags before the booking.
    pub tags_before: u64,
}

/// GPU capacity of one model summed over the usable nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelTotals {
    /// Usable GPUs.
    pub gpus: u64,
    /// Their free milli-GPU.
    pub free_milli: u64,
    /// How many are completely free.
    pub free_whole: u64,
}

/// Slots of [`ClusterView::model_totals`]: model indices 0..64, then [`NO_MODEL`].
pub const MODEL_SLOTS: usize = 65;

/// The usable nodes and GPUs, with what is free.
#[derive(Debug)]
pub struct ClusterView {
    nodes: Vec<NodeView>,
    gpus: Vec<GpuFree>,
    by_id: HashMap<NodeId, usize>,
    by_model: [ModelTotals; MODEL_SLOTS],
    cpu_free: u64,
    memory_free: u64,
    ranks: RankCache,
    follow: Follow,
}

impl Default for ClusterView {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            gpus: Vec::new(),
            by_id: HashMap::new(),
            by_model: [ModelTotals::default(); MODEL_SLOTS],
            cpu_free: 0,
            memory_free: 0,
            ranks: RankCache::default(),
            follow: Follow::default(),
        }
    }
}

/// The [`ClusterView::model_totals`] slot of a model index.
pub fn model_slot(model: u8) -> usize {
    usize::from(model).min(MODEL_SLOTS - 1)
}

impl ClusterView {
    /// Rebuilds the view from `nodes`, ranking them under `seed`.
    pub fn rebuild(&mut self, ctx: &Cycle, nodes: &[Node], seed: u64) {
        self.nodes.clear();
        self.gpus.clear();
        self.by_id.clear();
        self.by_model = [ModelTotals::default(); MODEL_SLOTS];
        self.cpu_free = 0;
        self.memory_free = 0;
        self.follow.reset(ctx, seed);
        // Consecutive GPUs mostly share a model symbol: remember the last lookup.
        let mut last: Option<(Symbol, u8)> = None;
        for node in nodes {
            if node.state != NodeState::Up {
                self.follow.slots.push(LEFT_OUT);
                continue;
            }
            let start = self.gpus.len();
            let pos = self.nodes.len();
            self.follow.slots.push(pos as u32);
            self.follow.inputs.push(self.follow.slots.len() as u32 - 1);
            let mut view = read_node(ctx, node, &mut self.gpus, &mut last);
            view.rank = self.ranks.rank(pos, node.id, seed, ctx.text(node.name));
            view.gpu_start = start as u32;
            self.add_totals(&view, start);
            self.nodes.push(view);
        }
    }

    /// Adds node `view`'s free CPU, memory and GPUs (at `start` in the GPU list) to the
    /// cluster totals.
    fn add_totals(&mut self, view: &NodeView, start: usize) {
        self.cpu_free += u64::from(view.cpu);
        self.memory_free += view.memory_mib;
        for g in &self.gpus[start..start + view.gpu_len as usize] {
            let t = &mut self.by_model[model_slot(g.model)];
            t.gpus += 1;
            t.free_milli += u64::from(g.free);
            t.free_whole += u64::from(g.free == MILLI_PER_GPU);
        }
    }

    /// Takes what [`Self::add_totals`] added for node `view` as it is now.
    fn remove_totals(&mut self, view: &NodeView, start: usize) {
        self.cpu_free -= u64::from(view.cpu);
        self.memory_free -= view.memory_mib;
        for g in &self.gpus[start..start + view.gpu_len as usize] {
            let t = &mut self.by_model[model_slot(g.model)];
            t.gpus -= 1;
            t.free_milli -= u64::from(g.free);
            t.free_whole -= u64::from(g.free == MILLI_PER_GPU);
        }
    }

    /// Recomputes node `i`'s quick bounds from its GPUs.
    fn refresh(&mut self, i: usize) {
        let n = &self.nodes[i];
        let gpus = &self.gpus[n.gpu_start as usize..(n.gpu_start + n.gpu_len) as usize];
        let whole_free = gpus.iter().filter(|g| g.free == MILLI_PER_GPU).count() as u32;
        let max_free = gpus.iter().map(|g| g.free).max().unwrap_or(0);
        let n = &mut self.nodes[i];
        n.whole_free = whole_free;
        n.max_free = max_free;
    }

    /// Sets every node's tags from the GPU tasks of `running`.
    pub fn load_tags(&mut self, running: &[RunningJob]) {
        for n in &mut self.nodes {
            n.tags = 0;
        }
        if running.is_empty() {
            return;
        }
        if self.by_id.is_empty() {
            self.by_id = self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id, i))
                .collect();
        }
        for r in running {
            for (group, alloc) in r.job.expanded_tasks().zip(&r.tasks) {
                let tag = PodShape::of(group).tag();
                if let Some(&i) = self.by_id.get(&alloc.node) {
                    self.nodes[i].tags |= tag;
                }
            }
        }
    }

    /// GPU capacity per model slot ([`model_slot`]), as booked so far.
    pub fn model_totals(&self) -> &[ModelTotals; MODEL_SLOTS] {
        &self.by_model
    }

    /// Free CPU over the usable nodes, milli-cores.
    pub fn cpu_free(&self) -> u64 {
        self.cpu_free
    }

    /// Free memory over the usable nodes, MiB.
    pub fn memory_free(&self) -> u64 {
        self.memory_free
    }

    /// The usable nodes, in input order.
    pub fn nodes(&self) -> &[NodeView] {
        &self.nodes
    }

    /// The usable GPUs of node `i`, by device index.
    pub fn gpus(&self, i: usize) -> &[GpuFree] {
        let n = &self.nodes[i];
        &self.gpus[n.gpu_start as usize..(n.gpu_start + n.gpu_len) as usize]
    }

    /// Whether node `i` is feasible for `pod` (`docs/fgd-replay/method.md` §4): CPU and memory fit; a sharing
    /// pod finds an allowed GPU with `l ≥ m`; a whole-GPU pod finds `n` allowed GPUs
    /// that are completely free.
    pub fn feasible(&self, i: usize, pod: &PodShape) -> bool {
        let n = &self.nodes[i];
        if n.cpu < pod.cpu_request || n.memory_mib < pod.memory_mib {
            return false;
        }
        match pod.kind {
            PodKind::CpuOnly => return true,
            PodKind::Whole if n.whole_free < pod.gpus => return false,
            PodKind::Sharing if n.max_free < pod.milli => return false,
            _ => {}
        }
        if n.model != MIXED_MODEL {
            // One model: the bounds above are exact once the model is allowed.
            return pod.allows(n.model);
        }
        let gpus = self.gpus(i);
        match pod.kind {
            PodKind::CpuOnly => true,
            PodKind::Sharing => gpus
                .iter()
                .any(|g| g.free >= pod.milli && pod.allows(g.model)),
            PodKind::Whole => {
                gpus.iter()
                    .filter(|g| g.free == MILLI_PER_GPU && pod.allows(g.model))
                    .count()
                    >= pod.gpus as usize
            }
        }
    }

    /// Books `pod` on node `i` with the GPUs at positions `gpus` (within the node's
    /// slice), `pod.milli` from each, and adds the pod's tag to the node. (The caller
    /// checked feasibility; amounts are capped at what is free.)
    pub fn book(&mut self, i: usize, pod: &PodShape, gpus: &[usize]) -> Booking {
        self.follow.touched.push(i as u32);
        let n = &mut self.nodes[i];
        let (cpu, memory_mib) = (pod.cpu_request.min(n.cpu), pod.memory_mib.min(n.memory_mib));
        n.cpu -= cpu;
        n.memory_mib -= memory_mib;
        self.cpu_free -= u64::from(cpu);
        self.memory_free -= memory_mib;
        let tags_before = n.tags;
        n.tags |= pod.tag();
        let start = n.gpu_start as usize;
        let mut taken = Vec::with_capacity(gpus.len());
        for &p in gpus {
            let g = &mut self.gpus[start + p];
            let milli = pod.milli.min(g.free);
            let t = &mut self.by_model[model_slot(g.model)];
            t.free_whole -= u64::from(g.free == MILLI_PER_GPU && milli > 0);
            t.free_milli -= u64::from(milli);
            g.free -= milli;
            taken.push((p, milli));
        }
        self.refresh(i);
        Booking {
            node: i,
            gpus: taken,
            cpu,
            memory_mib,
            tags_before,
        }
    }

    /// Undoes a [`ClusterView::book`] (undo in reverse booking order).
    pub fn unbook(&mut self, b: &Booking) {
        let n = &mut self.nodes[b.node];
        n.cpu += b.cpu;
        n.memory_mib += b.memory_mib;
        self.cpu_free += u64::from(b.cpu);
        self.memory_free += b.memory_mib;
        n.tags = b.tags_before;
        let start = n.gpu_start as usize;
        for &(p, milli) in &b.gpus {
            let g = &mut self.gpus[start + p];
            g.free += milli;
            let t = &mut self.by_model[model_slot(g.model)];
            t.free_milli += u64::from(milli);
            t.free_whole += u64::from(g.free == MILLI_PER_GPU && milli > 0);
        }
        self.refresh(b.node);
    }
}

/// Node `node`'s usable GPUs appended to `gpus` (by device index), and its view: rank
/// 0, no tags, `gpu_start` 0 (the caller sets both). `last` remembers the last model
/// lookup (consecutive GPUs mostly share a model symbol).
#[inline]
fn read_node(
    ctx: &Cycle,
    node: &Node,
    gpus: &mut Vec<GpuFree>,
    last: &mut Option<(Symbol, u8)>,
) -> NodeView {
    let start = gpus.len();
    let (mut sorted, mut whole_free, mut max_free) = (true, 0u32, 0u32);
    let mut model = None;
    for g in node.gpus.iter().filter(|g| g.healthy) {
        let m = match *last {
            Some((sym, m)) if sym == g.model => m,
            _ => {
                let m = model_index(ctx, g.model);
                *last = Some((g.model, m));
                m
            }
        };
        let free = g.free_milli.min(MILLI_PER_GPU);
        if gpus.len() > start && gpus[gpus.len() - 1].index > g.index {
            sorted = false;
        }
        whole_free += u32::from(free == MILLI_PER_GPU);
        max_free = max_free.max(free);
        model = match model {
            None => Some(m),
            Some(x) if x == m => Some(x),
            Some(_) => Some(MIXED_MODEL),
        };
        gpus.push(GpuFree {
            index: g.index,
            free,
            model: m,
        });
    }
    if !sorted {
        gpus[start..].sort_by_key(|g| g.index);
    }
    NodeView {
        id: node.id,
        name: node.name,
        rank: 0,
        cpu: node.cpu_milli_free,
        memory_mib: node.memory_mib_free,
        model: model.unwrap_or(NO_MODEL),
        tags: 0,
        whole_free,
        max_free,
        gpu_start: 0,
        gpu_len: (gpus.len() - start) as u32,
    }
}

/// The model index of a GPU model symbol (see [`NO_MODEL`]).
pub fn model_index(ctx: &Cycle, model: Symbol) -> u8 {
    match ctx.model_index(model) {
        Some(i) if i < 64 => i as u8,
        _ => NO_MODEL,
    }
}

/// Free totals of a node used by the scores (`docs/fgd-replay/method.md` §7): `L` (free milli-GPU), `F`
/// (fully free GPUs) and `G` (GPU count), over its usable GPUs.
pub fn totals(gpus: &[GpuFree]) -> (u64, u32, u32) {
    let l: u64 = gpus.iter().map(|g| u64::from(g.free)).sum();
    let f = gpus.iter().filter(|g| g.free == MILLI_PER_GPU).count() as u32;
    (l, f, gpus.len() as u32)
}

#[cfg(test)]
pub(crate) mod tests;
