//! The `[node]` section of the configuration: what the local node is called and which GPUs,
//! CPU and memory it offers when NVML has no answer.
//!
//! Owns these settings and their defaults. Discovering the hardware is `inventory`'s.

use serde::{Deserialize, Serialize};

/// The local node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// Node name (default: the host name).
    pub name: String,
    /// Ask NVML for GPUs first (default true).
    pub use_nvml: bool,
    /// GPUs when NVML finds no driver (default 8).
    pub gpus: u32,
    /// Their model (default "fake").
    pub gpu_model: String,
    /// Their memory in MiB.
    pub gpu_memory_mib: u64,
    /// CPU in milli-cores (default: the machine's).
    pub cpu_milli: Option<u32>,
    /// Memory in MiB (default: the machine's).
    pub memory_mib: Option<u64>,
    /// Labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// GPU indices that take no tasks (reason "marked unhealthy in config").
    pub unhealthy_gpus: Vec<u32>,
    /// Seconds between NVML health polls of the GPUs (default 30; 0: no polling).
    pub health_poll_s: u64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            use_nvml: true,
            gpus: 8,
            gpu_model: "fake".into(),
            gpu_memory_mib: 81_920,
            cpu_milli: None,
            memory_mib: None,
            labels: Default::default(),
            unhealthy_gpus: Vec::new(),
            health_poll_s: 30,
        }
    }
}
