//! The free state of the usable part of the cluster during one `place` call.
//!
//! Owns: which nodes and GPUs are usable (nodes `Up`, GPUs healthy; other nodes are
//! left out, unhealthy GPUs are invisible), each node's free CPU, memory and per-GPU
//! free milli in device-index order with its model index, the node's tie-break rank,
//! its GpuClustering tags, feasibility (spec §4, with a per-GPU model filter), and
//! booking and un-booking tasks. Buffers are reused between calls.
//! Does not own scores, GPU choice (`assign`) or the placement loop (`place`).

use crate::rank::rank;
use crate::shape::{NO_MODEL, PodKind, PodShape};
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

/// The usable nodes and GPUs, with what is free.
#[derive(Debug, Default)]
pub struct ClusterView {
    nodes: Vec<NodeView>,
    gpus: Vec<GpuFree>,
    by_id: HashMap<NodeId, usize>,
}

impl ClusterView {
    /// Rebuilds the view from `nodes`, ranking them under `seed`.
    pub fn rebuild(&mut self, ctx: &Cycle, nodes: &[Node], seed: u64) {
        self.nodes.clear();
        self.gpus.clear();
        self.by_id.clear();
        for node in nodes.iter().filter(|n| n.state == NodeState::Up) {
            let start = self.gpus.len();
            self.gpus
                .extend(node.gpus.iter().filter(|g| g.healthy).map(|g| GpuFree {
                    index: g.index,
                    free: g.free_milli.min(MILLI_PER_GPU),
                    model: model_index(ctx, g.model),
                }));
            let slice = &mut self.gpus[start..];
            if !slice.windows(2).all(|w| w[0].index <= w[1].index) {
                slice.sort_by_key(|g| g.index);
            }
            let model = match slice.first() {
                None => NO_MODEL,
                Some(first) if slice.iter().all(|g| g.model == first.model) => first.model,
                Some(_) => MIXED_MODEL,
            };
            self.nodes.push(NodeView {
                id: node.id,
                name: node.name,
                rank: rank(seed, ctx.text(node.name)),
                cpu: node.cpu_milli_free,
                memory_mib: node.memory_mib_free,
                model,
                tags: 0,
                gpu_start: start as u32,
                gpu_len: (self.gpus.len() - start) as u32,
            });
        }
    }

    /// Sets every node's tags from the GPU tasks of `running`.
    pub fn load_tags(&mut self, running: &[RunningJob]) {
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

    /// The usable nodes, in input order.
    pub fn nodes(&self) -> &[NodeView] {
        &self.nodes
    }

    /// The usable GPUs of node `i`, by device index.
    pub fn gpus(&self, i: usize) -> &[GpuFree] {
        let n = &self.nodes[i];
        &self.gpus[n.gpu_start as usize..(n.gpu_start + n.gpu_len) as usize]
    }

    /// Whether node `i` is feasible for `pod` (spec §4): CPU and memory fit; a sharing
    /// pod finds an allowed GPU with `l ≥ m`; a whole-GPU pod finds `n` allowed GPUs
    /// that are completely free.
    pub fn feasible(&self, i: usize, pod: &PodShape) -> bool {
        let n = &self.nodes[i];
        if n.cpu < pod.cpu_request || n.memory_mib < pod.memory_mib {
            return false;
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
    /// slice), `pod.milli` from each, and adds the pod's tag to the node.
    pub fn book(&mut self, i: usize, pod: &PodShape, gpus: &[usize]) -> Booking {
        let n = &mut self.nodes[i];
        n.cpu = n.cpu.saturating_sub(pod.cpu_request);
        n.memory_mib = n.memory_mib.saturating_sub(pod.memory_mib);
        let tags_before = n.tags;
        n.tags |= pod.tag();
        let start = n.gpu_start as usize;
        for &p in gpus {
            let g = &mut self.gpus[start + p];
            g.free = g.free.saturating_sub(pod.milli);
        }
        Booking {
            node: i,
            gpus: gpus.iter().map(|&p| (p, pod.milli)).collect(),
            cpu: pod.cpu_request,
            memory_mib: pod.memory_mib,
            tags_before,
        }
    }

    /// Undoes a [`ClusterView::book`] (undo in reverse booking order).
    pub fn unbook(&mut self, b: &Booking) {
        let n = &mut self.nodes[b.node];
        n.cpu = n.cpu.saturating_add(b.cpu);
        n.memory_mib = n.memory_mib.saturating_add(b.memory_mib);
        n.tags = b.tags_before;
        let start = n.gpu_start as usize;
        for &(p, milli) in &b.gpus {
            let g = &mut self.gpus[start + p];
            g.free = (g.free + milli).min(MILLI_PER_GPU);
        }
    }
}

/// The model index of a GPU model symbol (see [`NO_MODEL`]).
pub fn model_index(ctx: &Cycle, model: Symbol) -> u8 {
    match ctx.model_index(model) {
        Some(i) if i < 64 => i as u8,
        _ => NO_MODEL,
    }
}

/// Free totals of a node used by the scores (spec §7): `L` (free milli-GPU), `F`
/// (fully free GPUs) and `G` (GPU count), over its usable GPUs.
pub fn totals(gpus: &[GpuFree]) -> (u64, u32, u32) {
    let l: u64 = gpus.iter().map(|g| u64::from(g.free)).sum();
    let f = gpus.iter().filter(|g| g.free == MILLI_PER_GPU).count() as u32;
    (l, f, gpus.len() as u32)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use gantry_sdk::{Gpu, TaskGroup};

    /// A cycle with models "A" (index 0) and "B" (index 1) and node names n0..n9.
    pub(crate) fn ctx() -> Cycle {
        let mut strings = vec!["A".to_string(), "B".to_string()];
        strings.extend((0..10).map(|i| format!("n{i}")));
        Cycle {
            seed: 42,
            strings,
            gpu_models: vec![0, 1],
            ..Default::default()
        }
    }

    /// A node `n{id}` with model symbol `model` and the given free GPU amounts.
    pub(crate) fn node(id: u32, model: u32, free: &[u32], cpu: u32) -> Node {
        Node {
            id,
            name: 2 + id,
            state: NodeState::Up,
            cpu_milli_total: 128_000,
            cpu_milli_free: cpu,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 19,
            gpus: free
                .iter()
                .enumerate()
                .map(|(i, &f)| Gpu {
                    index: i as u32,
                    model,
                    memory_mib: 16_000,
                    free_milli: f,
                    healthy: true,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn pod(gpus: u32, gpu_milli: u32, mask: u64) -> PodShape {
        PodShape::of(&TaskGroup {
            count: 1,
            gpus,
            gpu_milli,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: mask,
        })
    }

    #[test]
    fn usable_nodes_and_gpus_only() {
        let mut nodes = vec![node(0, 0, &[1000, 500], 4000), node(1, 1, &[1000], 4000)];
        nodes[0].gpus[0].healthy = false;
        nodes[1].state = NodeState::Draining;
        nodes.push(node(2, 1, &[300, 1000], 4000));
        nodes[2].gpus.swap(0, 1);
        nodes[2].gpus[1].model = 0;
        let mut v = ClusterView::default();
        v.rebuild(&ctx(), &nodes, 1);
        assert_eq!(v.nodes().len(), 2);
        assert_eq!(v.gpus(0).len(), 1);
        assert_eq!(v.gpus(0)[0].free, 500);
        assert_eq!(v.nodes()[0].model, 0);
        assert_eq!(v.nodes()[1].model, MIXED_MODEL);
        let idx: Vec<u32> = v.gpus(1).iter().map(|g| g.index).collect();
        assert_eq!(idx, vec![0, 1]);
        assert_eq!(totals(v.gpus(1)), (1300, 1, 2));
    }

    #[test]
    fn feasibility_follows_spec_section_4() {
        let mut v = ClusterView::default();
        v.rebuild(
            &ctx(),
            &[node(0, 0, &[1000, 400], 4000), node(1, 1, &[600, 600], 500)],
            1,
        );
        assert!(v.feasible(0, &pod(1, 0, 0)));
        assert!(!v.feasible(0, &pod(2, 0, 0)));
        assert!(v.feasible(0, &pod(0, 900, 0)));
        assert!(!v.feasible(0, &pod(0, 900, 0b10)), "model B only");
        assert!(!v.feasible(1, &pod(0, 100, 0)), "CPU short");
        assert!(v.feasible(0, &pod(0, 0, 0)));
    }

    #[test]
    fn book_and_unbook_round_trip() {
        let mut v = ClusterView::default();
        v.rebuild(&ctx(), &[node(0, 0, &[1000, 1000], 4000)], 1);
        let before = (v.nodes()[0], v.gpus(0).to_vec());
        let p = pod(0, 300, 0);
        let b = v.book(0, &p, &[1]);
        assert_eq!(v.gpus(0)[1].free, 700);
        assert_eq!(v.nodes()[0].cpu, 3000);
        assert_eq!(v.nodes()[0].tags, 1);
        v.unbook(&b);
        assert_eq!((v.nodes()[0], v.gpus(0).to_vec()), before);
    }
}
