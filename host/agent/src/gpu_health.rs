//! The agent's side of GPU health: the watcher's events (`gantry_node::inventory::
//! nvml_watch`) kept as the node's current faults and the last failed node check of each,
//! which every heartbeat carries whole, with the latest round of GPU use sampling. A GPU whose check passes leaves the set, and the
//! controller, seeing it gone, returns it to service.
//!
//! Owns: the report. Does not own the watcher, the check or what the controller does
//! with a fault (`gantry_controller`'s `gpu_health.rs`).

use super::tasks::lock;
use gantry_api::node::{MigDevice, NodeInfo};
use gantry_node::inventory::nvml_watch::HealthEvent;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The node's GPU health as the heartbeat reports it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct GpuHealthReport {
    /// Faulty GPUs now: index → reason.
    pub faults: BTreeMap<u32, String>,
    /// The last failed node check of each faulty GPU.
    pub checks: BTreeMap<u32, String>,
    /// The latest round of GPU use sampling (`gantry_node::inventory::gpu_usage`).
    pub usage: Option<gantry_api::gpu_usage::GpuUsageReport>,
    /// MIG layouts changed since start: GPU index → its MIG devices now.
    pub mig_layouts: BTreeMap<u32, Vec<MigDevice>>,
    /// GPUs whose node check passed since start (one faulty at discovery is healthy now).
    pub back_in_service: std::collections::BTreeSet<u32>,
}

impl GpuHealthReport {
    /// Applies one watcher event.
    pub(crate) fn apply(&mut self, event: HealthEvent) {
        match event {
            HealthEvent::Fault { gpu, reason } => {
                tracing::warn!(gpu, %reason, "GPU found unhealthy");
                self.back_in_service.remove(&gpu);
                self.faults.insert(gpu, reason);
                self.checks.remove(&gpu);
            }
            HealthEvent::CheckFailed { gpu, detail } => {
                tracing::warn!(gpu, %detail, "GPU stays out of service");
                self.checks.insert(gpu, detail);
            }
            HealthEvent::Recovered { gpu, detail } => {
                tracing::info!(gpu, %detail, "GPU back in service");
                self.faults.remove(&gpu);
                self.checks.remove(&gpu);
                self.back_in_service.insert(gpu);
            }
            HealthEvent::MigLayout { gpu, devices } => {
                tracing::info!(gpu, slices = devices.len(), "MIG layout changed");
                self.mig_layouts.insert(gpu, devices);
            }
        }
    }

    /// `node` as it is now: its MIG layouts as last seen, and a GPU faulty at discovery
    /// whose node check passed since as healthy.
    pub(crate) fn node_now(&self, node: &NodeInfo) -> NodeInfo {
        let mut now = node.clone();
        for g in &mut now.gpus {
            if let Some(devices) = self.mig_layouts.get(&g.index) {
                g.mig_devices = devices.clone();
            }
            if self.back_in_service.contains(&g.index) {
                g.healthy = true;
                g.unhealthy_reason = None;
            }
        }
        now
    }
}

/// Watches the node's GPUs (NVML GPUs with `node.health_poll_s > 0`) and samples their
/// use (`node.gpu_sample_every_s > 0`), keeping `report`.
pub(crate) fn start_watch(
    node: &NodeInfo,
    cfg: &gantry_node::inventory::NodeConfig,
    report: Arc<Mutex<GpuHealthReport>>,
    executor: gantry_node::executor::Executor,
) {
    let health = report.clone();
    let discovered = node.clone();
    gantry_node::inventory::nvml_watch::watch_node(node, cfg, move |event| {
        let layout = matches!(event, HealthEvent::MigLayout { .. });
        let mut h = lock(&health);
        h.apply(event);
        if layout {
            // Slices made after start are fenced from the next launch on.
            executor.refresh_mig_caps(&h.node_now(&discovered).gpus);
        }
    });
    gantry_node::inventory::gpu_usage::sample_node(node, cfg, move |round| {
        lock(&report).usage = Some(round);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_reported_until_its_check_passes() {
        let mut r = GpuHealthReport::default();
        r.apply(HealthEvent::Fault {
            gpu: 1,
            reason: "critical Xid error 79".into(),
        });
        r.apply(HealthEvent::CheckFailed {
            gpu: 1,
            detail: "node check failed (exit status: 1)".into(),
        });
        assert_eq!(r.faults[&1], "critical Xid error 79");
        assert_eq!(r.checks[&1], "node check failed (exit status: 1)");
        r.apply(HealthEvent::Recovered {
            gpu: 1,
            detail: "node check passed".into(),
        });
        assert!(r.faults.is_empty() && r.checks.is_empty(), "{r:?}");
        assert!(r.back_in_service.contains(&1));
    }
}
