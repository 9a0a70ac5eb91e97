//! What the cluster view remembers to follow the next call's changes instead of
//! rebuilding: the seed and GPU models it was built under, where each input node went,
//! and which nodes this call's bookings touched.
//!
//! Owns that bookkeeping and the test of whether a call's hint can be followed at all.
//! Does not own reading a node (`ClusterView::update` in `mod.rs`).

use gantry_sdk::{Cycle, Symbol};

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
