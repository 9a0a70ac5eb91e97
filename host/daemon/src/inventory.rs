//! What the local node has: GPUs from NVML when a driver is present, otherwise from
//! configuration; CPUs and memory from the machine unless configured.
//!
//! Owns: discovery. Does not own allocation (the engine computes what is free from
//! running jobs on every cycle).

use crate::config::NodeConfig;
use serde::{Deserialize, Serialize};

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
    /// Healthy.
    pub healthy: bool,
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

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "local".into())
}

fn machine_memory_mib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib / 1024)
        .unwrap_or(16 * 1024)
}

fn machine_cpu_milli() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32 * 1000)
        .unwrap_or(1000)
}

/// GPUs from NVML, or `None` when there is no driver.
fn nvml_gpus() -> Option<Vec<GpuInfo>> {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            tracing::info!("NVML unavailable ({e}); GPUs come from configuration");
            return None;
        }
    };
    let count = nvml.device_count().ok()?;
    let mut gpus = Vec::new();
    for i in 0..count {
        let Ok(dev) = nvml.device_by_index(i) else {
            continue;
        };
        gpus.push(GpuInfo {
            index: i,
            model: dev.name().unwrap_or_else(|_| "unknown".into()),
            memory_mib: dev.memory_info().map(|m| m.total / (1 << 20)).unwrap_or(0),
            uuid: dev.uuid().ok(),
            healthy: true,
        });
    }
    Some(gpus)
}

/// Discovers the local node.
pub fn discover(cfg: &NodeConfig) -> NodeInfo {
    let from_nvml = if cfg.use_nvml { nvml_gpus() } else { None };
    let (gpus, source) = match from_nvml {
        Some(g) => (g, "nvml"),
        None => (
            (0..cfg.gpus)
                .map(|index| GpuInfo {
                    index,
                    model: cfg.gpu_model.clone(),
                    memory_mib: cfg.gpu_memory_mib,
                    uuid: None,
                    healthy: true,
                })
                .collect(),
            "config",
        ),
    };
    NodeInfo {
        name: if cfg.name.is_empty() {
            host_name()
        } else {
            cfg.name.clone()
        },
        cpu_milli: cfg.cpu_milli.unwrap_or_else(machine_cpu_milli),
        memory_mib: cfg.memory_mib.unwrap_or_else(machine_memory_mib),
        gpus,
        labels: cfg.labels.clone(),
        gpu_source: source.into(),
    }
}
