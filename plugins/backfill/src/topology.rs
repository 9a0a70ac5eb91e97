//! Static facts about the nodes of one call: node positions, GPU slots (one flat
//! array over all nodes), which slots can ever be used (healthy GPU on a node that is
//! up), and the topology read from node labels: `rack`, `switch` and
//! `gantry.io/gpu-groups` (GPU indices that share an NVLink/PCIe group, written
//! `0,1,2,3|4,5,6,7` or `0-3|4-7`).
//!
//! Owns: parsing those labels and mapping node ids and GPU indices to positions.
//! Does not own: free resources (`timeline`), or which node or GPU to choose
//! (`scoring`).

use gantry_sdk::{Cycle, Node, NodeId, NodeState, Symbol};
use std::collections::HashMap;
use std::ops::Range;

/// Node label listing a node's GPU groups: `|`-separated groups of comma-separated
/// GPU indices or `a-b` ranges, e.g. `0,1,2,3|4,5,6,7` or `0-3|4-7`.
pub const GPU_GROUPS_LABEL: &str = "gantry.io/gpu-groups";
/// Node label naming the node's rack.
pub const RACK_LABEL: &str = "rack";
/// Node label naming the node's network switch.
pub const SWITCH_LABEL: &str = "switch";

/// One node as the plugin sees it for the whole call.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Node number.
    pub id: NodeId,
    /// Interned name.
    pub name: Symbol,
    /// Takes new tasks.
    pub up: bool,
    /// Value of the `rack` label.
    pub rack: Option<Symbol>,
    /// Value of the `switch` label.
    pub switch: Option<Symbol>,
    /// GPU groups as slot offsets within the node; empty when the node reports none.
    pub groups: Vec<Vec<usize>>,
}

/// All nodes of the call, with a flat GPU slot array.
#[derive(Debug, Clone, Default)]
pub struct Topo {
    /// Nodes by position (the order the host gave).
    pub nodes: Vec<NodeInfo>,
    /// First slot of each node; one more entry than nodes.
    gpu_start: Vec<usize>,
    /// Device index of each slot.
    pub gpu_index: Vec<u32>,
    /// Model index (in `Cycle::gpu_models`) of each slot.
    pub gpu_model: Vec<Option<usize>>,
    /// Whether a slot can ever take work this call (healthy, node up).
    pub usable: Vec<bool>,
    by_id: HashMap<NodeId, usize>,
}

impl Topo {
    /// Reads `nodes` (and their labels, through `ctx`'s string table).
    pub fn new(ctx: &Cycle, nodes: &[Node]) -> Self {
        let mut topo = Topo {
            gpu_start: Vec::with_capacity(nodes.len() + 1),
            ..Default::default()
        };
        for (pos, n) in nodes.iter().enumerate() {
            topo.gpu_start.push(topo.gpu_index.len());
            let up = n.state == NodeState::Up;
            for g in &n.gpus {
                topo.gpu_index.push(g.index);
                topo.gpu_model.push(ctx.model_index(g.model));
                topo.usable.push(up && g.healthy);
            }
            let mut info = NodeInfo {
                id: n.id,
                name: n.name,
                up,
                rack: None,
                switch: None,
                groups: Vec::new(),
            };
            for l in &n.labels {
                match ctx.text(l.key) {
                    RACK_LABEL => info.rack = Some(l.value),
                    SWITCH_LABEL => info.switch = Some(l.value),
                    GPU_GROUPS_LABEL => {
                        let indices: Vec<u32> = n.gpus.iter().map(|g| g.index).collect();
                        info.groups = parse_groups(ctx.text(l.value), &indices);
                    }
                    _ => {}
                }
            }
            topo.by_id.entry(n.id).or_insert(pos);
            topo.nodes.push(info);
        }
        topo.gpu_start.push(topo.gpu_index.len());
        topo
    }

    /// Position of a node id.
    pub fn pos(&self, id: NodeId) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The GPU slots of the node at `pos`.
    pub fn slots(&self, pos: usize) -> Range<usize> {
        match (self.gpu_start.get(pos), self.gpu_start.get(pos + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    /// The slot of device `index` on the node at `pos`.
    pub fn slot_of(&self, pos: usize, index: u32) -> Option<usize> {
        self.slots(pos).find(|&s| self.gpu_index[s] == index)
    }

    /// The node's name for messages ("node 7" when it has none).
    pub fn label(&self, ctx: &Cycle, pos: usize) -> String {
        match self.nodes.get(pos) {
            Some(n) if !ctx.text(n.name).is_empty() => ctx.text(n.name).to_string(),
            Some(n) => format!("node {}", n.id),
            None => format!("node #{pos}"),
        }
    }
}

/// Parses a `gantry.io/gpu-groups` value into groups of slot offsets (positions in
/// `indices`, the node's device indices). Unknown indices are dropped, a device listed
/// twice stays in its first group, and a value that does not parse gives no groups.
pub fn parse_groups(text: &str, indices: &[u32]) -> Vec<Vec<usize>> {
    let mut seen = vec![false; indices.len()];
    let mut groups = Vec::new();
    for part in text.split('|') {
        let mut group = Vec::new();
        for item in part.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((lo, hi)) = parse_item(item) else {
                return Vec::new();
            };
            for device in lo..=hi {
                if let Some(off) = indices.iter().position(|&i| i == device)
                    && !seen[off]
                {
                    seen[off] = true;
                    group.push(off);
                }
            }
        }
        if !group.is_empty() {
            groups.push(group);
        }
    }
    groups
}

fn parse_item(item: &str) -> Option<(u32, u32)> {
    match item.split_once('-') {
        Some((a, b)) => {
            let (a, b) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            // A range of more than 1024 devices is a typo, not a node.
            (a <= b && b - a < 1024).then_some((a, b))
        }
        None => item.parse().ok().map(|i| (i, i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_lists_and_ranges() {
        let idx: Vec<u32> = (0..8).collect();
        assert_eq!(
            parse_groups("0,1,2,3|4,5,6,7", &idx),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        assert_eq!(
            parse_groups("0-3 | 4-7", &idx),
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]
        );
        // Unknown devices dropped, duplicates kept in their first group.
        assert_eq!(parse_groups("0,9|0,1", &idx), vec![vec![0], vec![1]]);
        assert!(parse_groups("a,b", &idx).is_empty());
        assert!(parse_groups("", &idx).is_empty());
    }

    #[test]
    fn groups_map_device_indices_to_slots() {
        // Slots hold devices 4..8: device 4 is slot 0.
        let idx: Vec<u32> = (4..8).collect();
        assert_eq!(parse_groups("4,5|6,7", &idx), vec![vec![0, 1], vec![2, 3]]);
    }
}
