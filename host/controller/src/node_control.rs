//! A node's drain and GPU faults as data: the drain record an operator leaves (stored under
//! [`drain_key`], so it outlives restarts), the GPUs found unhealthy, and how both mark a
//! node in a cycle's snapshot ([`NodeControl::apply_to`]). Each member of the node table
//! (`members.rs`) holds one [`NodeControl`]; the views (`node_view.rs`) show its records.
//!
//! Owns: `NodeControl` and the store key of a drain; the records are the wire types
//! `gantry_api::views::{DrainView, GpuFaultView}`, stored as they are shown. Does not own
//! draining, resuming or recording a fault (the `Scheduler` methods in `nodes.rs`), the
//! node table (`members.rs`), the health rules (`gantry_node::inventory::health`) or HTTP
//! (`api::nodes`).

use super::now_ms;
use gantry_api::views::{DrainView, GpuFaultView};
use gantry_contract as c;
use gantry_node::inventory::NodeInfo;
use gantry_store::{Store, StoreError};
use std::collections::BTreeMap;

/// The node's drain and its unhealthy GPUs.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeControl {
    pub(crate) drain: Option<DrainView>,
    pub(crate) gpu_faults: BTreeMap<u32, GpuFaultView>,
    /// The faults the node's agent reported (its heartbeat carries its whole set: one
    /// that leaves it has recovered).
    pub(crate) agent_faults: std::collections::BTreeSet<u32>,
    /// When the node's latest GPU use round applied to its jobs was taken, ms since the
    /// Unix epoch (an agent's heartbeats repeat a round until the next: `gpu_usage.rs`).
    pub(crate) gpu_usage_at_ms: u64,
}

/// The store meta key of `node`'s drain record.
pub(crate) fn drain_key(node: &str) -> String {
    format!("node-drain/{node}")
}

impl NodeControl {
    /// The drain stored for `node`, and the GPUs found unhealthy at discovery.
    pub(crate) fn load(store: &Store, node: &NodeInfo) -> Result<Self, StoreError> {
        let drain = store
            .meta::<Option<DrainView>>(&drain_key(&node.name))?
            .flatten();
        if let Some(d) = &drain {
            tracing::warn!(node = %node.name, by = %d.by, "node is drained: {}", d.reason);
        }
        let since_ms = now_ms();
        let gpu_faults = node
            .gpus
            .iter()
            .filter(|g| !g.healthy)
            .map(|g| {
                let reason = g
                    .unhealthy_reason
                    .clone()
                    .unwrap_or_else(|| "unhealthy".into());
                (
                    g.index,
                    GpuFaultView {
                        reason,
                        since_ms,
                        check: None,
                    },
                )
            })
            .collect();
        Ok(Self {
            drain,
            gpu_faults,
            agent_faults: Default::default(),
            gpu_usage_at_ms: 0,
        })
    }

    /// Applies the drain and the GPU faults to the snapshot's view of the node.
    pub(crate) fn apply_to(&self, node: &mut c::Node) {
        if self.drain.is_some() {
            node.state = c::NodeState::Draining;
        }
        for g in &mut node.gpus {
            // A fault of a GPU in MIG mode is a fault of each of its slices.
            if self
                .gpu_faults
                .contains_key(&gantry_api::mig::physical(g.index))
            {
                g.healthy = false;
            }
        }
    }
}
