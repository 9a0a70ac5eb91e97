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
    /// The NVML library to load (default: the driver's `libnvidia-ml.so.1`, found by the
    /// dynamic loader): for a driver in a non-standard place, and for tests (the fake
    /// NVML of `docs/fake-nvml.md`).
    pub nvml_library: Option<String>,
    /// The node check that returns a faulty GPU to service: a program and its arguments
    /// (e.g. `["dcgmi", "diag", "-r", "1"]`), run as the daemon's user with
    /// `GANTRY_GPU_INDEX`, `GANTRY_GPU_UUID` and `GANTRY_GPU_FAULT` set; exit 0 returns
    /// the GPU to service. Empty (the default): a faulty GPU stays out until the daemon
    /// restarts and finds it healthy.
    pub health_check: Vec<String>,
    /// Seconds between runs of the node check while it fails (default 60).
    pub health_check_every_s: u64,
    /// Seconds one run of the node check may take before it is killed and counted as
    /// failed (default 300).
    pub health_check_timeout_s: u64,
    /// Seconds between rounds of GPU use sampling (NVML's process samples, attributed
    /// to tasks; default 10; 0: no sampling, so no job's GPU use is known).
    pub gpu_sample_every_s: u64,
}

impl NodeConfig {
    /// The configured node check, if any.
    pub fn node_check(&self) -> Option<super::node_check::NodeCheck> {
        (!self.health_check.is_empty()).then(|| super::node_check::NodeCheck {
            argv: self.health_check.clone(),
            timeout: std::time::Duration::from_secs(self.health_check_timeout_s),
            every: std::time::Duration::from_secs(self.health_check_every_s),
        })
    }
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
            nvml_library: None,
            health_check: Vec::new(),
            health_check_every_s: 60,
            health_check_timeout_s: 300,
            gpu_sample_every_s: 10,
        }
    }
}
