//! A node's drain and GPU faults as data: the drain record an operator leaves (stored under
//! [`drain_key`], so it outlives restarts), the GPUs found unhealthy, and how both mark a
//! node in a cycle's snapshot ([`NodeControl::apply_to`]). Each member of the node table
//! (`members.rs`) holds one [`NodeControl`]; the views (`node_view.rs`) show its records.
//!
//! Owns: `DrainRecord`, `GpuFault`, `NodeControl` and the store key of a drain. Does not own
//! draining, resuming or recording a fault (the `Scheduler` methods in `nodes.rs`), the
//! node table (`members.rs`), the health rules (`gantry_node::inventory::health`) or HTTP
//! (`api::nodes`).

use super::now_ms;
use gantry_contract as c;
use gantry_node::inventory::NodeInfo;
use gantry_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why and by whom a node was drained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRecord {
    /// The operator's reason.
    pub reason: String,
    /// Who drained it (the token's user; "unauthenticated" when auth is off).
    pub by: String,
    /// When, ms since the Unix epoch.
    pub since_ms: u64,
}

/// Why a GPU takes no new tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuFault {
    /// The reason (health rule or configuration).
    pub reason: String,
    /// Since when, ms since the Unix epoch (the daemon's start for faults found then).
    pub since_ms: u64,
}

/// The node's drain and its unhealthy GPUs.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeControl {
    pub(crate) drain: Option<DrainRecord>,
    pub(crate) gpu_faults: BTreeMap<u32, GpuFault>,
}

/// The store meta key of `node`'s drain record.
pub(crate) fn drain_key(node: &str) -> String {
    format!("node-drain/{node}")
}

impl NodeControl {
    /// The drain stored for `node`, and the GPUs found unhealthy at discovery.
    pub(crate) fn load(store: &Store, node: &NodeInfo) -> Result<Self, StoreError> {
        let drain = store
            .meta::<Option<DrainRecord>>(&drain_key(&node.name))?
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
                (g.index, GpuFault { reason, since_ms })
            })
            .collect();
        Ok(Self { drain, gpu_faults })
    }

    /// Applies the drain and the GPU faults to the snapshot's view of the node.
    pub(crate) fn apply_to(&self, node: &mut c::Node) {
        if self.drain.is_some() {
            node.state = c::NodeState::Draining;
        }
        for g in &mut node.gpus {
            if self.gpu_faults.contains_key(&g.index) {
                g.healthy = false;
            }
        }
    }
}
