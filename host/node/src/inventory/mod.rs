//! What the local node has: GPUs from NVML when a driver is present (model, UUID,
//! memory, PCI bus id, NVLinks, MIG devices, health at discovery), otherwise from
//! configuration; CPUs and memory from the machine unless configured; labels from the
//! configuration plus `gantry.io/gpu-groups` from the NVLink topology (a configured
//! value of that label wins).
//!
//! Owns: discovery (`nvml.rs`), the topology (`groups.rs`), the health rules
//! (`health.rs`), the health watcher (`nvml_watch.rs`) and the node check that returns a
//! GPU to service (`node_check.rs`), and the sampling of GPU use per task
//! (`gpu_usage.rs`). Does not own allocation (the engine computes what is free from
//! running jobs on every cycle) or what a fault found after start changes (the
//! controller's `gpu_health.rs` acts on what the watcher reports).

pub mod gpu_usage;
pub mod groups;
pub mod health;
pub mod node_check;
mod node_config;
pub mod nvml;
pub mod nvml_watch;

pub use gantry_api::node::{GpuInfo, MigDevice, NodeInfo, NvLinkInfo};
pub use node_config::NodeConfig;

pub use groups::GPU_GROUPS_LABEL;

/// The reason given to GPUs listed in `[node] unhealthy_gpus`.
pub const CONFIG_UNHEALTHY: &str = "marked unhealthy in config";

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

/// Discovers the local node.
pub fn discover(cfg: &NodeConfig) -> NodeInfo {
    let from_nvml = if cfg.use_nvml {
        nvml::discover(cfg.nvml_library.as_deref())
    } else {
        tracing::info!("node.use_nvml is off; GPUs come from configuration");
        None
    };
    let (gpus, source) = match from_nvml {
        Some(g) => (g, "nvml"),
        None => (
            (0..cfg.gpus)
                .map(|index| GpuInfo::configured(index, &cfg.gpu_model, cfg.gpu_memory_mib))
                .collect(),
            "config",
        ),
    };
    let node = NodeInfo {
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
    };
    finish(node, cfg)
}

/// Applies what the configuration adds to a discovered node: `unhealthy_gpus`, and the
/// GPU-groups label from NVLink unless the configuration sets it.
fn finish(mut node: NodeInfo, cfg: &NodeConfig) -> NodeInfo {
    for &index in &cfg.unhealthy_gpus {
        match node.gpus.iter_mut().find(|g| g.index == index) {
            Some(g) => g.mark_unhealthy(CONFIG_UNHEALTHY.into()),
            None => tracing::warn!(
                gpu = index,
                "node.unhealthy_gpus names GPU {index}, which this node does not have"
            ),
        }
    }
    for g in node.gpus.iter().filter(|g| !g.healthy) {
        tracing::warn!(
            gpu = g.index,
            reason = g.unhealthy_reason.as_deref().unwrap_or(""),
            "GPU unhealthy at start; it gets no tasks"
        );
    }
    if node.labels.contains_key(GPU_GROUPS_LABEL) {
        tracing::info!("{GPU_GROUPS_LABEL} comes from the configuration");
    } else if let Some(label) = groups::groups_label(&groups::nvlink_groups(&node.gpus)) {
        tracing::info!("{GPU_GROUPS_LABEL} = {label} (from NVLink)");
        node.labels.insert(GPU_GROUPS_LABEL.into(), label);
    }
    node
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn linked_pair() -> NodeInfo {
        let mut gpus: Vec<GpuInfo> = (0..3)
            .map(|i| {
                let mut g = GpuInfo::configured(i, "A100", 40_960);
                g.pci_bus_id = Some(format!("0000:0{i}:00.0"));
                g
            })
            .collect();
        for (a, b) in [(0usize, 1u32), (1, 0)] {
            gpus[a].nvlinks.push(NvLinkInfo {
                link: 0,
                remote_pci_bus_id: format!("00000000:0{b}:00.0"),
                peer_index: None,
            });
        }
        groups::resolve_peers(&mut gpus);
        NodeInfo {
            name: "n".into(),
            cpu_milli: 1000,
            memory_mib: 1024,
            gpus,
            labels: Default::default(),
            gpu_source: "nvml".into(),
        }
    }

    #[test]
    fn the_label_comes_from_nvlink_unless_configured() {
        let node = finish(linked_pair(), &NodeConfig::default());
        assert_eq!(node.labels[GPU_GROUPS_LABEL], "0,1|2");
        let mut cfg = NodeConfig::default();
        cfg.labels.insert(GPU_GROUPS_LABEL.into(), "0-2".into());
        let mut configured = linked_pair();
        configured.labels = cfg.labels.clone();
        assert_eq!(finish(configured, &cfg).labels[GPU_GROUPS_LABEL], "0-2");
    }

    #[test]
    fn configured_gpus_can_be_marked_unhealthy() {
        let cfg = NodeConfig {
            use_nvml: false,
            gpus: 3,
            unhealthy_gpus: vec![1, 7],
            ..NodeConfig::default()
        };
        let node = discover(&cfg);
        assert_eq!(node.gpu_source, "config");
        let health: Vec<bool> = node.gpus.iter().map(|g| g.healthy).collect();
        assert_eq!(health, [true, false, true]);
        assert_eq!(
            node.gpus[1].unhealthy_reason.as_deref(),
            Some(CONFIG_UNHEALTHY)
        );
        assert!(!node.labels.contains_key(GPU_GROUPS_LABEL));
    }

    #[test]
    fn old_records_without_the_new_fields_still_load() {
        let old = r#"{"index":0,"model":"fake","memory_mib":1,"uuid":null,"healthy":true}"#;
        let g: GpuInfo = serde_json::from_str(old).unwrap();
        assert_eq!(g, GpuInfo::configured(0, "fake", 1));
        let mut twice = g.clone();
        twice.mark_unhealthy("a".into());
        twice.mark_unhealthy("b".into());
        assert_eq!(twice.unhealthy_reason.as_deref(), Some("a; b"));
    }
}
