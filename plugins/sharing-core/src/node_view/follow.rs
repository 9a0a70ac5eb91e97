//! What the cluster view remembers to follow the next call's changes instead of
//! rebuilding: the seed and GPU models it was built under, where each input node went,
//! and which nodes this call's bookings touched.
//!
//! Owns that bookkeeping, [`ClusterView::update`] and the re-reading of changed nodes in
//! place. Does not own reading a node (`read_node`) or the totals (`mod.rs`).

use super::{ClusterView, read_node};
use gantry_sdk::changes::FRESH;
use gantry_sdk::{Cycle, Node, NodeState, Symbol};

/// The slot of an input node that is not in the view (not `Up`).
pub(super) const LEFT_OUT: u32 = u32::MAX;

/// The view's memory of the call it was built or updated for.
#[derive(Debug, Default)]
pub(super) struct Follow {
    /// Whether the view was built at all (an empty view of an empty list is valid too).
    pub(super) built: bool,
    /// The seed of the ranks.
    pub(super) seed: u64,
    /// `Cycle::gpu_models` when the view was built: model indices depend on it.
    pub(super) models: Vec<Symbol>,
    /// Per input node, its position in the view or [`LEFT_OUT`].
    pub(super) slots: Vec<u32>,
    /// Per view position, the input node's position.
    pub(super) inputs: Vec<u32>,
    /// View positions booked since the view was last brought to its input.
    pub(super) touched: Vec<u32>,
    /// A reused buffer for re-reading one node's GPUs.
    pub(super) scratch: Vec<super::GpuFree>,
}

impl Follow {
    /// Starts over for a rebuild under `seed`.
    pub(super) fn reset(&mut self, ctx: &Cycle, seed: u64) {
        self.built = true;
        self.seed = seed;
        self.models.clone_from(&ctx.gpu_models);
        self.slots.clear();
        self.inputs.clear();
        self.touched.clear();
    }

    /// Whether a call under `seed` whose hint covers `len` nodes can be followed: the
    /// view was built, for as many input nodes, under the same seed and models.
    pub(super) fn can_follow(&self, ctx: &Cycle, seed: u64, len: usize) -> bool {
        self.built && self.seed == seed && self.slots.len() == len && self.models == ctx.gpu_models
    }
}

impl ClusterView {
    /// Brings the view to `nodes`: from the previous call's state when `kept` (the
    /// call's hint, `gantry_sdk::changes`) says which nodes are unchanged and every
    /// change keeps the node's position, usability and usable GPU count; else by
    /// [`Self::rebuild`]. Either way the result equals a rebuild; `true` when the
    /// changes were followed.
    pub fn update(&mut self, ctx: &Cycle, nodes: &[Node], seed: u64, kept: Option<&[u32]>) -> bool {
        let followed = kept.is_some_and(|kept| {
            self.follow.can_follow(ctx, seed, kept.len()) && self.follow_changes(ctx, nodes, kept)
        });
        if !followed {
            self.rebuild(ctx, nodes, seed);
        }
        followed
    }

    /// Re-reads the nodes booked during the previous call and those `kept` marks as new;
    /// `false` when one of them cannot be updated in place (the caller rebuilds).
    fn follow_changes(&mut self, ctx: &Cycle, nodes: &[Node], kept: &[u32]) -> bool {
        let touched = std::mem::take(&mut self.follow.touched);
        let again = touched
            .iter()
            .map(|&v| self.follow.inputs[v as usize] as usize);
        let fresh = kept
            .iter()
            .enumerate()
            .filter(|&(i, &k)| k as usize != i)
            .map(|(i, &k)| if k == FRESH { i } else { usize::MAX });
        for i in again.chain(fresh).collect::<Vec<_>>() {
            if !nodes.get(i).is_some_and(|n| self.reread(ctx, i, n)) {
                return false;
            }
        }
        true
    }

    /// Re-reads the node at input position `i` in place; `false` when it changed
    /// usability or its count of usable GPUs.
    fn reread(&mut self, ctx: &Cycle, i: usize, node: &Node) -> bool {
        let slot = self.follow.slots[i];
        let up = node.state == NodeState::Up;
        if slot == LEFT_OUT || !up {
            return slot == LEFT_OUT && !up;
        }
        let pos = slot as usize;
        let mut scratch = std::mem::take(&mut self.follow.scratch);
        scratch.clear();
        let mut view = read_node(ctx, node, &mut scratch, &mut None);
        let old = self.nodes[pos];
        if view.gpu_len != old.gpu_len {
            self.follow.scratch = scratch;
            return false;
        }
        let start = old.gpu_start as usize;
        self.remove_totals(&old, start);
        self.gpus[start..start + scratch.len()].copy_from_slice(&scratch);
        self.follow.scratch = scratch;
        view.rank = self
            .ranks
            .rank(pos, node.id, self.follow.seed, ctx.text(node.name));
        view.gpu_start = old.gpu_start;
        if view.id != old.id {
            self.by_id.clear();
        }
        self.add_totals(&view, start);
        self.nodes[pos] = view;
        true
    }
}
