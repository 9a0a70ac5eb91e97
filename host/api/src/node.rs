//! A node's inventory as it travels: [`NodeInfo`] (CPU, memory, labels, where the GPUs were
//! found) and its GPUs ([`GpuInfo`], with NVLinks and MIG devices). The agent sends it in
//! every heartbeat; the API shows it in node views.
//!
//! Owns these data types and their two pure helpers. Discovery (NVML or configuration) is
//! `gantry-node`'s `inventory`, which re-exports them.

use serde::{Deserialize, Serialize};

/// One active NVLink of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLinkInfo {
    /// Link number on the GPU.
    pub link: u32,
    /// PCI bus id of the remote end (a GPU, or an NVSwitch).
    pub remote_pci_bus_id: String,
    /// The local GPU at the remote end, if it is one.
    #[serde(default)]
    pub peer_index: Option<u32>,
}

/// A MIG device: a slice of a GPU in MIG mode, scheduled as a device of its own whose
/// model is its profile (`crate::mig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigDevice {
    /// Index of the GPU it is carved from.
    pub parent_index: u32,
    /// Its slot on the parent (NVML's MIG device index, 0..7): with the parent it makes the
    /// slice's device index (`crate::mig::slice_index`).
    #[serde(default)]
    pub slot: u32,
    /// Its GPU instance id, when NVML gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance: Option<u32>,
    /// Its compute instance id, when NVML gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_instance: Option<u32>,
    /// MIG UUID (`MIG-...`).
    pub uuid: String,
    /// Profile, e.g. `1g.10gb`.
    pub profile: String,
    /// Full device name.
    pub name: String,
    /// Memory in MiB.
    pub memory_mib: u64,
}

/// One GPU of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Device index (as in `CUDA_VISIBLE_DEVICES`).
    pub index: u32,
    /// Model name.
    pub model: String,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// UUID when known.
    pub uuid: Option<String>,
    /// Healthy at discovery.
    pub healthy: bool,
    /// Why it is not healthy.
    #[serde(default)]
    pub unhealthy_reason: Option<String>,
    /// PCI bus id (NVML only).
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// Active NVLinks (NVML only).
    #[serde(default)]
    pub nvlinks: Vec<NvLinkInfo>,
    /// MIG mode is on.
    #[serde(default)]
    pub mig_enabled: bool,
    /// Its MIG devices when MIG mode is on.
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
}

impl GpuInfo {
    /// A healthy GPU with nothing known but its index, model and memory.
    pub fn configured(index: u32, model: &str, memory_mib: u64) -> Self {
        Self {
            index,
            model: model.to_string(),
            memory_mib,
            uuid: None,
            healthy: true,
            unhealthy_reason: None,
            pci_bus_id: None,
            nvlinks: Vec::new(),
            mig_enabled: false,
            mig_devices: Vec::new(),
        }
    }

    /// Marks the GPU unhealthy; a first reason is kept, later ones are added.
    pub fn mark_unhealthy(&mut self, reason: String) {
        self.healthy = false;
        self.unhealthy_reason = Some(match self.unhealthy_reason.take() {
            Some(first) if first != reason => format!("{first}; {reason}"),
            _ => reason,
        });
    }
}

/// The node's inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// GPUs.
    pub gpus: Vec<GpuInfo>,
    /// Labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// "nvml" or "config".
    pub gpu_source: String,
}
