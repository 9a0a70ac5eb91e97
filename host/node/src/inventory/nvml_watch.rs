//! The GPU health watcher: for the life of the daemon, a thread that reads each GPU's
//! health every `node.health_poll_s` seconds (waiting on critical Xid events in
//! between when the driver offers them), reports each GPU that turns faulty once, and
//! runs the node check (`node_check.rs`, `[node] health_check`) for a faulty GPU until
//! it passes: then the GPU is reported back in service and watched again.
//!
//! The MIG layout of each GPU in MIG mode is re-read on every poll; a change is reported.
//!
//! With a node check, a GPU found faulty at discovery is checked from the start as well.
//!
//! Every step is reported as a [`HealthEvent`] to the caller (the controller for its own
//! node, the agent for its heartbeat). Without a node check a faulty GPU stays out of
//! service until the daemon restarts and finds it healthy.
//!
//! Owns: the polling loop and the order of fault → check → recovery. Does not own the
//! health rules (`health.rs`), reading one GPU (`nvml.rs`) or what a fault changes for
//! jobs (the controller's `gpu_health.rs`).

use super::health::{HealthReading, UNKNOWN_XID, is_application_xid, verdict};
use super::node_check::{CheckedGpu, NodeCheck};
use super::nvml::{init, mig_layout, raw_library, read_health};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A GPU the watcher polls: its index and, when known, its UUID (looked up by UUID,
/// so a renumbering cannot make it read another GPU).
pub type Watched = (u32, Option<String>);

/// What the watcher saw happen to one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthEvent {
    /// The GPU turned faulty: it must take no new work, and its jobs must stop.
    Fault {
        /// The GPU's index.
        gpu: u32,
        /// Why (the health rules' verdict).
        reason: String,
    },
    /// The node check ran and kept the GPU out of service.
    CheckFailed {
        /// The GPU's index.
        gpu: u32,
        /// How the check ended.
        detail: String,
    },
    /// The node check passed: the GPU is back in service.
    Recovered {
        /// The GPU's index.
        gpu: u32,
        /// How the check ended.
        detail: String,
    },
    /// The MIG layout of a GPU in MIG mode changed (instances made or destroyed): its MIG
    /// devices now. Jobs on a slice gone are stopped as on a failed GPU.
    MigLayout {
        /// The GPU's index.
        gpu: u32,
        /// Its MIG devices now.
        devices: Vec<super::MigDevice>,
    },
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    /// The GPUs.
    pub gpus: Vec<Watched>,
    /// Time between health reads.
    pub interval: Duration,
    /// `node.nvml_library`.
    pub library: Option<String>,
    /// The node check that returns a faulty GPU to service.
    pub check: Option<NodeCheck>,
    /// The MIG layout at discovery of each GPU in MIG mode, watched for changes.
    pub mig: BTreeMap<u32, Vec<super::MigDevice>>,
    /// GPUs of `gpus` found faulty at discovery, with why: checked from the start.
    pub faulty_at_start: BTreeMap<u32, String>,
}

/// Watches `node`'s GPUs (those healthy at discovery) per `cfg`, when they came from NVML
/// and `cfg.health_poll_s > 0`; otherwise says why nothing is watched.
pub fn watch_node(
    node: &super::NodeInfo,
    cfg: &super::NodeConfig,
    on_event: impl Fn(HealthEvent) + Send + 'static,
) {
    if node.gpu_source != "nvml" {
        tracing::info!("GPU health: GPUs come from configuration; nothing to poll");
        return;
    }
    if cfg.health_poll_s == 0 {
        tracing::info!("GPU health polling is off (node.health_poll_s = 0)");
        return;
    }
    let check = cfg.node_check();
    // With a node check, a GPU found faulty at discovery is checked too (one an operator
    // listed in `node.unhealthy_gpus` is not: that is the operator's call).
    let watched = |g: &&super::GpuInfo| {
        g.healthy
            || (check.is_some() && g.unhealthy_reason.as_deref() != Some(super::CONFIG_UNHEALTHY))
    };
    let plan = WatchPlan {
        gpus: node
            .gpus
            .iter()
            .filter(watched)
            .map(|g| (g.index, g.uuid.clone()))
            .collect(),
        faulty_at_start: node
            .gpus
            .iter()
            .filter(watched)
            .filter(|g| !g.healthy)
            .map(|g| (g.index, g.unhealthy_reason.clone().unwrap_or_default()))
            .collect(),
        interval: Duration::from_secs(cfg.health_poll_s),
        library: cfg.nvml_library.clone(),
        check,
        mig: node
            .gpus
            .iter()
            .filter(|g| g.healthy && g.mig_enabled)
            .map(|g| (g.index, g.mig_devices.clone()))
            .collect(),
    };
    if let Err(e) = watch(plan, on_event) {
        tracing::error!("cannot start the GPU health watcher: {e}");
    }
}

/// Starts the watcher thread for `plan`.
pub fn watch(
    plan: WatchPlan,
    on_event: impl Fn(HealthEvent) + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("gantry-gpu-health".into())
        .spawn(move || run_watch(&plan, &on_event))
        .map(|_| ())
}

fn open<'n>(nvml: &'n Nvml, (index, uuid): &Watched) -> Result<Device<'n>, NvmlError> {
    match uuid {
        Some(u) => nvml.device_by_uuid(u.as_str()),
        None => nvml.device_by_index(*index),
    }
}

/// A faulty GPU: why, and when its next node check is due.
struct Faulty {
    reason: String,
    next_check: Instant,
}

fn run_watch(plan: &WatchPlan, on_event: &dyn Fn(HealthEvent)) {
    let nvml = match init(plan.library.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!("GPU health polling is off: NVML did not start ({e})");
            return;
        }
    };
    let events = xid_events(&nvml, &plan.gpus);
    let raw = (!plan.mig.is_empty())
        .then(|| raw_library(plan.library.as_deref()))
        .flatten();
    let mut layouts = plan.mig.clone();
    tracing::info!(
        gpus = plan.gpus.len(),
        interval_s = plan.interval.as_secs(),
        xid_events = events.is_some(),
        node_check = plan.check.is_some(),
        "GPU health polling started"
    );
    let mut faulty: BTreeMap<u32, Faulty> = plan
        .faulty_at_start
        .iter()
        .map(|(&gpu, reason)| {
            let f = Faulty {
                reason: reason.clone(),
                next_check: Instant::now(),
            };
            (gpu, f)
        })
        .collect();
    while plan.check.is_some() || faulty.len() < plan.gpus.len() {
        let mut xids = match &events {
            Some(set) => collect_xids(set, plan.interval),
            None => {
                std::thread::sleep(plan.interval);
                BTreeMap::new()
            }
        };
        for w in &plan.gpus {
            let seen = xids.remove(&w.0).unwrap_or_default();
            if let Some(f) = faulty.get_mut(&w.0) {
                if let Some(check) = &plan.check
                    && Instant::now() >= f.next_check
                {
                    let gpu = CheckedGpu {
                        index: w.0,
                        uuid: w.1.as_deref(),
                        fault: &f.reason,
                    };
                    let result = check.run(&gpu);
                    if result.passed {
                        faulty.remove(&w.0);
                        on_event(HealthEvent::Recovered {
                            gpu: w.0,
                            detail: result.detail,
                        });
                    } else {
                        f.next_check = Instant::now() + check.every;
                        on_event(HealthEvent::CheckFailed {
                            gpu: w.0,
                            detail: result.detail,
                        });
                    }
                }
                continue;
            }
            for x in seen.iter().filter(|&&x| is_application_xid(x)) {
                tracing::info!(
                    gpu = w.0,
                    xid = x,
                    "Xid from a user's program; GPU stays healthy"
                );
            }
            let reading = match open(&nvml, w) {
                Ok(dev) => read_health(&dev, seen),
                Err(e) => {
                    tracing::warn!(gpu = w.0, "cannot open the GPU: {e}");
                    HealthReading {
                        lost: true,
                        critical_xids: seen,
                        ..Default::default()
                    }
                }
            };
            if let (Some(lib), Some(known)) = (&raw, layouts.get_mut(&w.0))
                && let Ok(dev) = open(&nvml, w)
            {
                let now = mig_layout(&nvml, lib, &dev, w.0);
                if now != *known {
                    tracing::info!(gpu = w.0, slices = now.len(), "MIG layout changed");
                    *known = now.clone();
                    on_event(HealthEvent::MigLayout {
                        gpu: w.0,
                        devices: now,
                    });
                }
            }
            if let Some(reason) = verdict(&reading) {
                faulty.insert(
                    w.0,
                    Faulty {
                        reason: reason.clone(),
                        next_check: Instant::now(),
                    },
                );
                on_event(HealthEvent::Fault { gpu: w.0, reason });
            }
        }
    }
    tracing::info!("every GPU is unhealthy and no node check is set; GPU health polling stops");
}

/// An event set with every GPU that reports critical Xids, or `None`.
fn xid_events<'n>(nvml: &'n Nvml, gpus: &[Watched]) -> Option<EventSet<'n>> {
    let mut set = nvml
        .create_event_set()
        .map_err(|e| tracing::info!("no Xid events ({e}); health is polled only"))
        .ok()?;
    let mut any = false;
    for w in gpus {
        let Ok(dev) = open(nvml, w) else { continue };
        let supported = dev
            .supported_event_types()
            .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
        if !supported {
            continue;
        }
        match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
            Ok(s) => {
                set = s;
                any = true;
            }
            Err(e) => {
                tracing::warn!(gpu = w.0, "no Xid events ({e}); health is polled only");
                return None;
            }
        }
    }
    any.then_some(set)
}

/// Critical Xids per GPU index that arrive within `interval`.
fn collect_xids(set: &EventSet<'_>, interval: Duration) -> BTreeMap<u32, Vec<u64>> {
    let deadline = Instant::now() + interval;
    let mut out: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let ms = u32::try_from(left.as_millis()).unwrap_or(u32::MAX).max(1);
        match set.wait(ms) {
            Ok(ev) => {
                let xid = match ev.event_data {
                    Some(XidError::Value(v)) => v,
                    Some(XidError::Unknown) => UNKNOWN_XID,
                    None => continue,
                };
                match ev.device.index() {
                    Ok(i) => out.entry(i).or_default().push(xid),
                    Err(e) => tracing::warn!(xid, "Xid event from an unknown GPU: {e}"),
                }
            }
            Err(NvmlError::Timeout) => break,
            Err(e) => {
                tracing::warn!("waiting for Xid events failed ({e}); polling only this round");
                std::thread::sleep(left);
                break;
            }
        }
    }
    out
}
