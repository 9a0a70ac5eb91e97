//! MIG slices as schedulable devices. A GPU in MIG mode is not scheduled whole: each of its
//! MIG devices is a device of its own, whose model is its profile (`1g.10gb`), so a job asks
//! for slices as for any model (`--gpus 1g.10gb:2`, `--gres=gpu:1g.10gb:2`, a task's
//! `gpu_models`) and every placement plugin of any contract version places them as GPUs.
//!
//! A slice's device index is [`slice_index`]`(parent, slot)` = 1000 + 10 × parent + slot
//! (NVML has at most 7 MIG devices per GPU and Gantry at most 64 GPUs per node), so the
//! parent of any index is known without the inventory ([`parent_of`]): a fault of the
//! parent is a fault of its slices, and the device fence opens the parent's device node
//! to a task given one of its slices.
//!
//! Owns: the numbering and the schedulable view of a node's GPUs. Does not own discovery
//! (`gantry-node`'s `inventory`) or placement (the engine and plugins).

use crate::node::{GpuInfo, NodeInfo};

/// The first device index of a MIG slice.
pub const SLICE_INDEX_BASE: u32 = 1000;

/// Slots per parent in the numbering.
const SLOTS: u32 = 10;

/// The device index of slot `slot` of GPU `parent`.
pub fn slice_index(parent: u32, slot: u32) -> u32 {
    SLICE_INDEX_BASE + parent * SLOTS + slot
}

/// The GPU that device `index` is a slice of, or `None` for a whole GPU.
pub fn parent_of(index: u32) -> Option<u32> {
    index
        .checked_sub(SLICE_INDEX_BASE)
        .map(|offset| offset / SLOTS)
}

/// The physical GPU behind device `index`: its parent for a slice, else itself.
pub fn physical(index: u32) -> u32 {
    parent_of(index).unwrap_or(index)
}

impl GpuInfo {
    /// The devices this GPU offers the scheduler: itself, or its MIG slices when MIG mode is
    /// on (none while no MIG device is configured: a GPU in MIG mode runs nothing whole).
    pub fn schedulable(&self) -> Vec<GpuInfo> {
        if !self.mig_enabled {
            return vec![self.clone()];
        }
        self.mig_devices
            .iter()
            .map(|m| GpuInfo {
                index: slice_index(self.index, m.slot),
                model: m.profile.clone(),
                memory_mib: m.memory_mib,
                uuid: Some(m.uuid.clone()),
                healthy: self.healthy,
                unhealthy_reason: self.unhealthy_reason.clone(),
                pci_bus_id: self.pci_bus_id.clone(),
                nvlinks: Vec::new(),
                mig_enabled: false,
                mig_devices: Vec::new(),
            })
            .collect()
    }
}

impl NodeInfo {
    /// Every device the scheduler may place on: whole GPUs and MIG slices.
    pub fn schedulable_gpus(&self) -> Vec<GpuInfo> {
        self.gpus.iter().flat_map(GpuInfo::schedulable).collect()
    }

    /// What a task given device `index` sees in `CUDA_VISIBLE_DEVICES`: the slice's
    /// `MIG-…` UUID, or the GPU's index.
    pub fn visible_name(&self, index: u32) -> String {
        let Some(parent) = parent_of(index) else {
            return index.to_string();
        };
        self.gpus
            .iter()
            .filter(|g| g.index == parent)
            .flat_map(|g| &g.mig_devices)
            .find(|m| slice_index(parent, m.slot) == index)
            .map_or_else(|| index.to_string(), |m| m.uuid.clone())
    }
}

/// The MIG slices of `old` that `new` no longer has (by index and UUID: a slot given to a
/// new instance is a slice gone), with why, for the jobs on them.
pub fn vanished_slices(old: &NodeInfo, new: &NodeInfo) -> Vec<(u32, String)> {
    let now = new.schedulable_gpus();
    old.schedulable_gpus()
        .into_iter()
        .filter(|g| parent_of(g.index).is_some())
        .filter(|g| !now.iter().any(|n| n.index == g.index && n.uuid == g.uuid))
        .map(|g| {
            let why = format!(
                "MIG slice {} ({}) of GPU {} is gone",
                g.model,
                g.uuid.as_deref().unwrap_or("no UUID"),
                physical(g.index)
            );
            (g.index, why)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::node::MigDevice;

    fn mig(parent: u32, slot: u32, profile: &str) -> MigDevice {
        MigDevice {
            parent_index: parent,
            slot,
            gpu_instance: Some(slot),
            compute_instance: Some(0),
            uuid: format!("MIG-{parent}-{slot}"),
            profile: profile.into(),
            name: format!("NVIDIA A100 MIG {profile}"),
            memory_mib: 9_856,
        }
    }

    #[test]
    fn slices_replace_their_parent_and_name_it() {
        let mut a = GpuInfo::configured(0, "NVIDIA A100", 81_920);
        a.mig_enabled = true;
        a.mig_devices = vec![mig(0, 0, "1g.10gb"), mig(0, 3, "3g.40gb")];
        let b = GpuInfo::configured(1, "NVIDIA A100", 81_920);
        let mut empty = GpuInfo::configured(2, "NVIDIA A100", 81_920);
        empty.mig_enabled = true;
        let node = NodeInfo {
            name: "n".into(),
            cpu_milli: 1000,
            memory_mib: 1024,
            gpus: vec![a, b, empty],
            labels: Default::default(),
            gpu_source: "nvml".into(),
        };
        let devices: Vec<(u32, String)> = node
            .schedulable_gpus()
            .into_iter()
            .map(|g| (g.index, g.model))
            .collect();
        assert_eq!(
            devices,
            [
                (1000, "1g.10gb".to_string()),
                (1003, "3g.40gb".to_string()),
                (1, "NVIDIA A100".to_string())
            ]
        );
        assert_eq!(node.visible_name(1003), "MIG-0-3");
        assert_eq!(node.visible_name(1), "1");
        assert_eq!(parent_of(1003), Some(0));
        assert_eq!(parent_of(slice_index(63, 6)), Some(63));
        assert_eq!(parent_of(63), None);
        assert_eq!(physical(1003), 0);
    }

    #[test]
    fn a_slice_gone_or_given_a_new_instance_has_vanished() {
        let node = |slices: Vec<MigDevice>| {
            let mut a = GpuInfo::configured(0, "NVIDIA A100", 81_920);
            a.mig_enabled = true;
            a.mig_devices = slices;
            NodeInfo {
                name: "n".into(),
                cpu_milli: 1000,
                memory_mib: 1024,
                gpus: vec![a, GpuInfo::configured(1, "NVIDIA A100", 81_920)],
                labels: Default::default(),
                gpu_source: "nvml".into(),
            }
        };
        let before = node(vec![mig(0, 0, "1g.10gb"), mig(0, 1, "1g.10gb")]);
        let mut renewed = mig(0, 1, "1g.10gb");
        renewed.uuid = "MIG-new".into();
        let after = node(vec![mig(0, 0, "1g.10gb"), renewed]);
        let gone = vanished_slices(&before, &after);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].0, 1001);
        assert!(
            gone[0].1.contains("MIG-0-1") && gone[0].1.contains("of GPU 0"),
            "{gone:?}"
        );
        assert!(vanished_slices(&before, &before).is_empty());
        assert_eq!(vanished_slices(&before, &node(Vec::new())).len(), 2);
    }
}
