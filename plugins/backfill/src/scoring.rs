//! Where a task goes: node order by scoring mode, and fitting a task onto one node
//! against one or more layers at once (a job must fit what is free now and every
//! reservation checkpoint it overlaps).
//!
//! Modes: `binpack` (default) tries the fullest node first (least free milli-GPU,
//! then least free CPU, then the host's node order); `spread` the emptiest first;
//! `topology` orders like binpack and adds the gang and GPU-group rules of `gang`
//! and `gpus`. Nodes are kept in a sorted set updated on every start, so choosing a
//! node costs a few set steps, not a scan of the cluster.
//!
//! Owns: the node order and single-task fitting. Does not own gang strategies
//! (`gang`) or the GPU choice within a node (`gpus`).

use crate::gpus::{pick_fraction, pick_whole};
use crate::timeline::{Booking, Layer};
use crate::topology::Topo;
use gantry_sdk::TaskGroup;
use serde::Deserialize;
use std::collections::BTreeSet;

/// How nodes and GPUs are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scoring {
    /// Fullest node that fits first.
    #[default]
    Binpack,
    /// Emptiest node first.
    Spread,
    /// Binpack, plus: a gang that fits one node on one node, multi-GPU tasks within
    /// one GPU group, multi-node gangs within one rack (then switch).
    Topology,
}

/// Sort key of a node: (free milli-GPU, free CPU).
pub type Key = (u32, u32);

/// Up nodes sorted by [`Key`], ties by position (lowest first for either direction).
#[derive(Debug, Clone)]
pub struct NodeOrder {
    set: BTreeSet<(u32, u32, usize)>,
    key: Vec<Option<Key>>,
    spread: bool,
}

impl NodeOrder {
    /// The order of the up nodes of `topo` by what `layer` has free.
    pub fn new(topo: &Topo, layer: &Layer, scoring: Scoring) -> Self {
        let mut order = NodeOrder {
            set: BTreeSet::new(),
            key: vec![None; topo.nodes.len()],
            spread: scoring == Scoring::Spread,
        };
        for pos in 0..topo.nodes.len() {
            order.update(topo, layer, pos);
        }
        order
    }

    /// An order with no nodes (for fitting on nodes chosen by the caller, and for
    /// comparing keys with [`NodeOrder::before`]).
    pub fn empty(scoring: Scoring) -> Self {
        NodeOrder {
            set: BTreeSet::new(),
            key: Vec::new(),
            spread: scoring == Scoring::Spread,
        }
    }

    fn tie(&self, pos: usize) -> usize {
        if self.spread { usize::MAX - pos } else { pos }
    }

    /// Re-sorts the node at `pos` after `layer` changed there.
    pub fn update(&mut self, topo: &Topo, layer: &Layer, pos: usize) {
        if let Some((g, c)) = self.key[pos].take() {
            self.set.remove(&(g, c, self.tie(pos)));
        }
        if topo.nodes[pos].up {
            let k = (layer.gpu_milli(topo, pos), layer.cpu[pos]);
            self.set.insert((k.0, k.1, self.tie(pos)));
            self.key[pos] = Some(k);
        }
    }

    /// The node's key (None when it is not up).
    pub fn key(&self, pos: usize) -> Option<Key> {
        self.key[pos]
    }

    /// Up nodes with at least `min_gpu` free milli-GPU, best first.
    pub fn candidates(&self, min_gpu: u32) -> Box<dyn Iterator<Item = usize> + '_> {
        let range = self.set.range((min_gpu, 0, 0)..);
        if self.spread {
            Box::new(range.rev().map(|&(_, _, t)| usize::MAX - t))
        } else {
            Box::new(range.map(|&(_, _, t)| t))
        }
    }

    /// Whether node `a` (with key `ka`) comes before node `b`.
    pub fn before(&self, (ka, a): (Key, usize), (kb, b): (Key, usize)) -> bool {
        if self.spread {
            (kb, a) < (ka, b)
        } else {
            (ka, a) < (kb, b)
        }
    }
}

/// Fits tasks against the pointwise minimum of `layers`.
pub struct Fitter<'a> {
    /// The nodes.
    pub topo: &'a Topo,
    /// Layers the job must fit at once (never empty).
    pub layers: Vec<&'a Layer>,
    /// Node order (by the first layer).
    pub order: &'a NodeOrder,
    /// Mode.
    pub scoring: Scoring,
}

/// Milli-GPU of one task of `group`, as u32.
pub fn task_milli(group: &TaskGroup) -> u32 {
    u32::try_from(group.gpu_milli_per_task()).unwrap_or(u32::MAX)
}

impl Fitter<'_> {
    /// One task of `group` on the node at `pos`, on top of the gang's bookings so far.
    pub fn try_node(&self, pos: usize, group: &TaskGroup, gang: &[Booking]) -> Option<Booking> {
        if !self.topo.nodes.get(pos)?.up {
            return None;
        }
        let mine = || gang.iter().filter(|b| b.pos == pos);
        let used_cpu: u32 = mine().map(|b| b.cpu).sum();
        let used_mem: u64 = mine().map(|b| b.mem).sum();
        let cpu = self.layers.iter().map(|l| l.cpu[pos]).min()?;
        let mem = self.layers.iter().map(|l| l.mem[pos]).min()?;
        if cpu.saturating_sub(used_cpu) < group.cpu_milli
            || mem.saturating_sub(used_mem) < group.memory_mib
        {
            return None;
        }
        let mut booking = Booking {
            pos,
            cpu: group.cpu_milli,
            mem: group.memory_mib,
            gpus: Vec::new(),
        };
        if group.gpu_milli_per_task() == 0 {
            return Some(booking);
        }
        let slots = self.topo.slots(pos);
        let mut stack = [0u32; 16];
        let mut heap = Vec::new();
        let free: &mut [u32] = if slots.len() <= stack.len() {
            &mut stack[..slots.len()]
        } else {
            heap.resize(slots.len(), 0);
            &mut heap
        };
        for (off, s) in slots.clone().enumerate() {
            if self.topo.usable[s] && group.allows_model(self.topo.gpu_model[s]) {
                free[off] = self.layers.iter().map(|l| l.gpu[s]).min().unwrap_or(0);
            }
        }
        for &(s, milli) in mine().flat_map(|b| &b.gpus) {
            if let Some(f) = s.checked_sub(slots.start).and_then(|o| free.get_mut(o)) {
                *f = f.saturating_sub(milli);
            }
        }
        if group.gpus > 0 {
            let grouped = self.scoring == Scoring::Topology;
            let groups = &self.topo.nodes[pos].groups;
            let offs = pick_whole(free, group.gpus as usize, groups, grouped)?;
            booking.gpus = offs
                .into_iter()
                .map(|o| (slots.start + o, gantry_sdk::MILLI_PER_GPU))
                .collect();
        } else {
            let off = pick_fraction(free, group.gpu_milli)?;
            booking.gpus = vec![(slots.start + off, group.gpu_milli)];
        }
        Some(booking)
    }

    /// The key of the node at `pos` after the gang's bookings there.
    fn key_after(&self, pos: usize, gang: &[Booking]) -> Option<Key> {
        let (g, c) = self.order.key(pos)?;
        let mine = gang.iter().filter(|b| b.pos == pos);
        let used_gpu: u32 = mine.clone().flat_map(|b| &b.gpus).map(|&(_, m)| m).sum();
        let used_cpu: u32 = mine.map(|b| b.cpu).sum();
        Some((g.saturating_sub(used_gpu), c.saturating_sub(used_cpu)))
    }

    /// The best node for one task of `group` (restricted by `allow`), on top of the
    /// gang's bookings so far: nodes the gang already uses are compared with their
    /// updated keys against the first fresh node in order that fits.
    pub fn choose(
        &self,
        group: &TaskGroup,
        gang: &[Booking],
        allow: Option<&dyn Fn(usize) -> bool>,
    ) -> Option<Booking> {
        let allowed = |pos: usize| allow.is_none_or(|f| f(pos));
        let touched = |pos: usize| gang.iter().any(|b| b.pos == pos);
        let mut best: Option<(Key, Booking)> = None;
        let mut seen: Vec<usize> = Vec::new();
        for pos in gang.iter().map(|b| b.pos) {
            if seen.contains(&pos) || !allowed(pos) {
                continue;
            }
            seen.push(pos);
            if let (Some(b), Some(k)) = (self.try_node(pos, group, gang), self.key_after(pos, gang))
                && best
                    .as_ref()
                    .is_none_or(|(bk, bb)| self.order.before((k, pos), (*bk, bb.pos)))
            {
                best = Some((k, b));
            }
        }
        let need = task_milli(group);
        let fresh = self
            .order
            .candidates(need)
            .filter(|&p| allowed(p) && !touched(p))
            .find_map(|p| self.try_node(p, group, gang));
        if let Some(b) = fresh {
            let k = self.order.key(b.pos)?;
            if best
                .as_ref()
                .is_none_or(|(bk, bb)| self.order.before((k, b.pos), (*bk, bb.pos)))
            {
                return Some(b);
            }
        }
        best.map(|(_, b)| b)
    }

    /// Every task in `tasks`, each on the best node (restricted by `allow`), or None.
    pub fn place(
        &self,
        tasks: &[&TaskGroup],
        allow: Option<&dyn Fn(usize) -> bool>,
    ) -> Option<Vec<Booking>> {
        let mut gang: Vec<Booking> = Vec::with_capacity(tasks.len());
        for t in tasks {
            let b = self.choose(t, &gang, allow)?;
            gang.push(b);
        }
        Some(gang)
    }

    /// Every task in `tasks` on the node at `pos`, or None.
    pub fn place_on(&self, pos: usize, tasks: &[&TaskGroup]) -> Option<Vec<Booking>> {
        let mut gang: Vec<Booking> = Vec::with_capacity(tasks.len());
        for t in tasks {
            let b = self.try_node(pos, t, &gang)?;
            gang.push(b);
        }
        Some(gang)
    }
}
