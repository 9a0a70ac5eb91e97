//! GPU health after start, closed as a loop: a GPU found faulty (by the controller's own
//! watcher or in an agent's heartbeat) takes no new work, and every running job holding
//! it is stopped (SIGTERM, the grace, SIGKILL: a gang as a whole, on every node) and
//! requeued with its id; its tasks' accounting records of that run say why they are not
//! charged to fair share. The node check (`[node] health_check`) that the GPU's node runs
//! either keeps it out (each failure is recorded on the fault) or returns it to service.
//! Each step is an event (`gpu-health`), a metric and a line in `gantry nodes -l`.
//!
//! Owns: recording faults, checks and recoveries on the node's control record, and
//! stopping the jobs on a faulty GPU. Does not own the health rules or the watcher
//! (`gantry_node::inventory`), the fault records' shape (`node_control.rs`), or the
//! requeue on finish (`lifecycle.rs`, `StopCause::GpuFault`).

use super::transition::Transition;
use super::{Scheduler, lock, now_ms};
use gantry_api::mig::physical;
use gantry_api::model::StopCause;
use gantry_api::views::GpuFaultView;
use gantry_node::inventory::nvml_watch::HealthEvent;
use std::time::Duration;

/// Where a fault was found: the controller's own watcher, or an agent's heartbeat (which
/// carries the node's whole set of faults, so one missing from it has recovered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultSource {
    /// The controller's watcher of its own node.
    Local,
    /// The node's agent.
    Agent,
}

impl Scheduler {
    /// Watches the local node's GPU health through NVML (only when the GPUs came from NVML
    /// and polling is on), acting on each event.
    pub(crate) fn start_gpu_health_watch(&self) {
        let me = self.clone();
        let node = self.inner.node.name.clone();
        gantry_node::inventory::nvml_watch::watch_node(
            &self.inner.node,
            &self.inner.config.node,
            move |event| me.on_health_event(&node, event),
        );
    }

    /// Acts on one event of node `node`'s watcher.
    pub(crate) fn on_health_event(&self, node: &str, event: HealthEvent) {
        let changed = match event {
            HealthEvent::Fault { gpu, reason } => {
                self.record_gpu_fault(node, gpu, reason, FaultSource::Local)
            }
            HealthEvent::CheckFailed { gpu, detail } => {
                self.record_gpu_check(node, gpu, detail);
                false
            }
            HealthEvent::Recovered { gpu, detail } => self.gpu_recovered(node, gpu, &detail),
            HealthEvent::MigLayout { gpu, devices } => {
                let slices = devices.len();
                let Some((gone, gpus)) = self.set_mig_layout(node, gpu, devices) else {
                    return;
                };
                // Slices made after start are fenced from the next launch on.
                self.inner.executor.refresh_mig_caps(&gpus);
                let message =
                    format!("GPU {gpu} of node {node} has a new MIG layout: {slices} slices");
                tracing::info!("{message}");
                let _ = self
                    .inner
                    .store
                    .event(now_ms(), None, "gpu-health", message);
                self.slices_vanished(node, gone);
                true
            }
        };
        if changed {
            self.wake();
        }
    }

    /// Records a GPU fault of node `node` and stops the jobs holding the GPU; false when
    /// the fault was already known.
    pub(crate) fn record_gpu_fault(
        &self,
        node: &str,
        index: u32,
        reason: String,
        source: FaultSource,
    ) -> bool {
        let fault = GpuFaultView {
            reason,
            since_ms: now_ms(),
            check: None,
        };
        let message = format!("GPU {index} of node {node} is unhealthy: {}", fault.reason);
        let reason = fault.reason.clone();
        let added = self.with_control(node, |ctl| {
            if ctl.gpu_faults.contains_key(&index) {
                return false;
            }
            ctl.gpu_faults.insert(index, fault);
            if source == FaultSource::Agent {
                ctl.agent_faults.insert(index);
            }
            true
        });
        if added != Some(true) {
            return false;
        }
        tracing::error!(node, gpu = index, "{message}; it gets no new tasks");
        let _ = self
            .inner
            .store
            .event(now_ms(), None, "gpu-health", message);
        self.inner.metrics.gpu_health_failures.inc();
        self.stop_jobs_on_gpu(node, index, &reason);
        true
    }

    /// The node check kept GPU `index` of `node` out of service: recorded on its fault.
    pub(crate) fn record_gpu_check(&self, node: &str, index: u32, detail: String) {
        let changed = self.with_control(node, |ctl| match ctl.gpu_faults.get_mut(&index) {
            Some(f) if f.check.as_deref() != Some(detail.as_str()) => {
                f.check = Some(detail.clone());
                true
            }
            _ => false,
        });
        self.inner.metrics.count_gpu_check(false);
        if changed == Some(true) {
            let message = format!("GPU {index} of node {node} stays out of service: {detail}");
            tracing::warn!(node, gpu = index, "{message}");
            let _ = self
                .inner
                .store
                .event(now_ms(), None, "gpu-health", message);
        }
    }

    /// The node check returned GPU `index` of `node` to service; false when it was not
    /// known as faulty.
    pub(crate) fn gpu_recovered(&self, node: &str, index: u32, detail: &str) -> bool {
        let removed = self.with_control(node, |ctl| {
            ctl.agent_faults.remove(&index);
            ctl.gpu_faults.remove(&index)
        });
        let Some(Some(fault)) = removed else {
            return false;
        };
        // A GPU found faulty at discovery is marked so in the node's inventory too.
        self.set_gpu_healthy(node, index);
        self.inner.metrics.count_gpu_check(true);
        let message = format!(
            "GPU {index} of node {node} is back in service ({detail}); it was out since {} for: {}",
            fault.since_ms, fault.reason
        );
        tracing::info!(node, gpu = index, "{message}");
        let _ = self
            .inner
            .store
            .event(now_ms(), None, "gpu-health", message);
        true
    }

    /// Applies an agent's report of its node's GPU health: new faults are recorded, check
    /// results noted, and faults it reported before but no longer does are recovered.
    pub(crate) fn apply_agent_gpu_health(
        &self,
        node: &str,
        info: &gantry_api::node::NodeInfo,
        faults: &std::collections::BTreeMap<u32, String>,
        checks: &std::collections::BTreeMap<u32, String>,
    ) -> bool {
        let mut changed = false;
        for (index, reason) in faults {
            changed |= self.record_gpu_fault(node, *index, reason.clone(), FaultSource::Agent);
        }
        // Checks of its faults, and of GPUs faulty since discovery.
        for (index, detail) in checks {
            self.record_gpu_check_quietly(node, *index, detail);
        }
        // Faults the agent reported and no longer does, and faults found at discovery
        // whose GPU the agent now reports healthy (its node check passed).
        let gone: Vec<u32> = self
            .with_control(node, |ctl| {
                let reported = ctl
                    .agent_faults
                    .iter()
                    .copied()
                    .filter(|i| !faults.contains_key(i));
                let at_discovery = ctl.gpu_faults.keys().copied().filter(|i| {
                    !ctl.agent_faults.contains(i)
                        && !faults.contains_key(i)
                        && info.gpus.iter().any(|g| g.index == *i && g.healthy)
                });
                reported.chain(at_discovery).collect()
            })
            .unwrap_or_default();
        for index in gone {
            changed |= self.gpu_recovered(node, index, "its node's check passed");
        }
        changed
    }

    /// Like [`Scheduler::record_gpu_check`] for a detail repeated in every heartbeat: only
    /// a new detail is an event and a metric.
    fn record_gpu_check_quietly(&self, node: &str, index: u32, detail: &str) {
        // Only a fault the controller knows, with a new detail.
        let new = self
            .with_control(node, |ctl| {
                ctl.gpu_faults
                    .get(&index)
                    .is_some_and(|f| f.check.as_deref() != Some(detail))
            })
            .unwrap_or(false);
        if new {
            self.record_gpu_check(node, index, detail.to_string());
        }
    }

    /// Stops the jobs on each MIG slice of `node` that is gone (`(index, why)`), as on a
    /// failed GPU: requeued, that run uncharged.
    pub(crate) fn slices_vanished(&self, node: &str, gone: Vec<(u32, String)>) {
        for (index, why) in gone {
            tracing::warn!(node, slice = index, "{why}");
            self.stop_jobs_on(node, index, &why, |g| g == index);
        }
    }

    /// Stops every running job with a task on GPU `index` of `node` (or on one of its MIG
    /// slices), to be requeued once all its tasks ended (`lifecycle.rs`).
    fn stop_jobs_on_gpu(&self, node: &str, index: u32, reason: &str) {
        self.stop_jobs_on(node, index, reason, |g| physical(g) == index);
    }

    /// Stops every running job with a task on `node` holding a device that `hit` matches,
    /// recording the fault as of device `index`.
    fn stop_jobs_on(&self, node: &str, index: u32, reason: &str, hit: impl Fn(u32) -> bool) {
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        let mut stopped = 0;
        let mut st = lock(&self.inner.state);
        for job in st.jobs.edit_running() {
            let mut job = job;
            let holds = job
                .tasks
                .iter()
                .any(|t| t.node == node && t.exit.is_none() && t.gpus.iter().any(|g| hit(g.index)));
            if !holds || job.stopping.is_some() {
                continue;
            }
            let cause = StopCause::GpuFault {
                node: node.to_string(),
                gpu: index,
                reason: reason.to_string(),
            };
            job.apply_or_log(Transition::StopRequested(cause));
            self.event(
                job.id,
                "gpu-fault",
                format!(
                    "GPU {index} of node {node} failed ({reason}); the job is stopped to be requeued, its GPU time of this run not charged"
                ),
            );
            self.stop_tasks(&job, grace);
            stopped += 1;
        }
        drop(st);
        if stopped > 0 {
            self.inner.metrics.gpu_fault_stops.inc_by(stopped);
            self.flush();
        }
    }
}
