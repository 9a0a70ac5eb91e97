//! Reading the GPUs from NVML (loaded at run time; without a driver every call here
//! answers "no NVML" and the node's GPUs come from configuration): model, UUID,
//! memory, PCI bus id, active NVLinks with their remote bus ids, MIG devices when MIG
//! mode is on, and one health reading at discovery. Then, for the life of the
//! daemon, a watcher thread that polls each GPU's health every `health_poll_s`
//! seconds, waiting on critical Xid events in between when the driver offers them.
//!
//! nvml-wrapper 0.11 has no MIG enumeration, so MIG devices are listed through the raw
//! `nvml-wrapper-sys` bindings (two calls, each in one `unsafe` block) and then read
//! through the safe `Device` API.
//!
//! Owns: the driver calls. Does not own the health rules (`health.rs`), the topology
//! (`groups.rs`) or what the scheduler does with an unhealthy GPU.

use super::health::{HealthReading, UNKNOWN_XID, is_application_xid, verdict};
use super::{GpuInfo, MigDevice, NvLinkInfo, groups};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};
use nvml_wrapper_sys::bindings::{
    NVML_DEVICE_MIG_ENABLE, NVML_NVLINK_MAX_LINKS, NvmlLib, nvmlDevice_t,
    nvmlReturn_enum_NVML_SUCCESS,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The library nvml-wrapper loads on Linux.
const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// The local GPUs from NVML (peers resolved), or `None` when there is no driver.
pub fn discover() -> Option<Vec<GpuInfo>> {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            tracing::info!("NVML unavailable ({e}); GPUs come from configuration");
            return None;
        }
    };
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("NVML cannot count GPUs ({e}); GPUs come from configuration");
            return None;
        }
    };
    // SAFETY: loads the same library nvml-wrapper has loaded (and initialised) above;
    // its initialisers have already run in this process.
    let raw = unsafe { NvmlLib::new(NVML_LIBRARY) }
        .map_err(|e| tracing::info!("MIG devices are not listed: {e}"))
        .ok();
    let mut gpus: Vec<GpuInfo> = (0..count)
        .map(|index| match nvml.device_by_index(index) {
            Ok(dev) => read_gpu(&nvml, raw.as_ref(), &dev, index),
            Err(e) => {
                let mut g = GpuInfo::configured(index, "unknown", 0);
                g.mark_unhealthy(format!("NVML cannot open the GPU: {e}"));
                g
            }
        })
        .collect();
    groups::resolve_peers(&mut gpus);
    Some(gpus)
}

fn read_gpu(nvml: &Nvml, raw: Option<&NvmlLib>, dev: &Device, index: u32) -> GpuInfo {
    let mut g = GpuInfo::configured(
        index,
        &dev.name().unwrap_or_else(|_| "unknown".into()),
        dev.memory_info().map(|m| m.total >> 20).unwrap_or(0),
    );
    g.uuid = dev.uuid().ok();
    g.pci_bus_id = dev.pci_info().ok().map(|p| p.bus_id);
    g.nvlinks = (0..NVML_NVLINK_MAX_LINKS)
        .filter_map(|l| {
            let link = dev.link_wrapper_for(l);
            if !link.is_active().unwrap_or(false) {
                return None;
            }
            let remote = link.remote_pci_info().ok()?;
            Some(NvLinkInfo {
                link: l,
                remote_pci_bus_id: remote.bus_id,
                peer_index: None,
            })
        })
        .collect();
    g.mig_enabled = dev
        .mig_mode()
        .is_ok_and(|m| m.current == NVML_DEVICE_MIG_ENABLE);
    if g.mig_enabled {
        g.mig_devices = raw.map_or_else(Vec::new, |lib| mig_devices(nvml, lib, dev, index));
    }
    if let Some(reason) = verdict(&read_health(dev, Vec::new())) {
        g.mark_unhealthy(reason);
    }
    g
}

/// The MIG devices of `dev` (GPU `parent`); empty when the driver cannot list them.
fn mig_devices(nvml: &Nvml, lib: &NvmlLib, dev: &Device, parent: u32) -> Vec<MigDevice> {
    let (Ok(max_count), Ok(by_index)) = (
        lib.nvmlDeviceGetMaxMigDeviceCount.as_ref(),
        lib.nvmlDeviceGetMigDeviceHandleByIndex.as_ref(),
    ) else {
        return Vec::new();
    };
    let (max_count, by_index) = (*max_count, *by_index);
    // SAFETY: a live handle of the initialised NVML that `lib` is the same library of.
    let handle = unsafe { dev.handle() };
    let mut max: std::os::raw::c_uint = 0;
    // SAFETY: `handle` is valid and `max` a valid out-pointer.
    if unsafe { max_count(handle, &mut max) } != nvmlReturn_enum_NVML_SUCCESS {
        return Vec::new();
    }
    let mut out = Vec::new();
    for slot in 0..max {
        let mut mig: nvmlDevice_t = std::ptr::null_mut();
        // SAFETY: `handle` is valid and `mig` a valid out-pointer; an empty slot
        // answers NOT_FOUND and leaves it null.
        if unsafe { by_index(handle, slot, &mut mig) } != nvmlReturn_enum_NVML_SUCCESS
            || mig.is_null()
        {
            continue;
        }
        // SAFETY: NVML just returned `mig` for this initialised instance; device
        // handles stay valid while `nvml` is alive, and `device` does not outlive it.
        let device = unsafe { Device::new(mig, nvml) };
        let name = device.name().unwrap_or_default();
        out.push(MigDevice {
            parent_index: parent,
            uuid: device.uuid().unwrap_or_default(),
            profile: mig_profile(&name),
            name,
            memory_mib: device.memory_info().map(|m| m.total >> 20).unwrap_or(0),
        });
    }
    out
}

/// The MIG profile in a MIG device's name (`NVIDIA A100-SXM4-40GB MIG 1g.5gb` →
/// `1g.5gb`), or the whole name when it has none.
pub fn mig_profile(name: &str) -> String {
    name.rsplit_once("MIG ")
        .map_or(name, |(_, p)| p)
        .trim()
        .to_string()
}

/// One health reading of `dev`, with the critical Xids seen since the last one.
fn read_health(dev: &Device, critical_xids: Vec<u64>) -> HealthReading {
    let lost = |e: Option<&NvmlError>| matches!(e, Some(NvmlError::GpuLost));
    let ecc = dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
    let pending = dev.are_pages_pending_retired();
    let memory = dev.memory_info();
    HealthReading {
        lost: lost(ecc.as_ref().err())
            || lost(pending.as_ref().err())
            || lost(memory.as_ref().err()),
        uncorrected_volatile_ecc: ecc.ok(),
        retired_pages_pending: pending.ok(),
        critical_xids,
    }
}

/// A GPU the watcher polls: its index and, when known, its UUID (looked up by UUID,
/// so a renumbering cannot make it read another GPU).
pub type Watched = (u32, Option<String>);

/// Polls the health of `node`'s GPUs (those healthy at discovery) every `secs` seconds with
/// [`watch`], when they came from NVML and `secs > 0`; otherwise says why nothing is polled.
pub fn watch_node(
    node: &super::NodeInfo,
    secs: u64,
    on_fault: impl Fn(u32, String) + Send + 'static,
) {
    if node.gpu_source != "nvml" {
        tracing::info!("GPU health: GPUs come from configuration; nothing to poll");
        return;
    }
    if secs == 0 {
        tracing::info!("GPU health polling is off (node.health_poll_s = 0)");
        return;
    }
    let gpus = node
        .gpus
        .iter()
        .filter(|g| g.healthy)
        .map(|g| (g.index, g.uuid.clone()))
        .collect();
    if let Err(e) = watch(gpus, Duration::from_secs(secs), on_fault) {
        tracing::error!("cannot start the GPU health watcher: {e}");
    }
}

/// Starts the health watcher thread: every `interval` it reads every GPU of `gpus` not
/// yet found unhealthy and calls `on_fault(index, reason)` once per GPU that fails.
pub fn watch(
    gpus: Vec<Watched>,
    interval: Duration,
    on_fault: impl Fn(u32, String) + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("gantry-gpu-health".into())
        .spawn(move || run_watch(&gpus, interval, &on_fault))
        .map(|_| ())
}

fn open<'n>(nvml: &'n Nvml, (index, uuid): &Watched) -> Result<Device<'n>, NvmlError> {
    match uuid {
        Some(u) => nvml.device_by_uuid(u.as_str()),
        None => nvml.device_by_index(*index),
    }
}

fn run_watch(gpus: &[Watched], interval: Duration, on_fault: &dyn Fn(u32, String)) {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!("GPU health polling is off: NVML did not start ({e})");
            return;
        }
    };
    let events = xid_events(&nvml, gpus);
    tracing::info!(
        gpus = gpus.len(),
        interval_s = interval.as_secs(),
        xid_events = events.is_some(),
        "GPU health polling started"
    );
    let mut failed: Vec<u32> = Vec::new();
    while failed.len() < gpus.len() {
        let mut xids = match &events {
            Some(set) => collect_xids(set, interval),
            None => {
                std::thread::sleep(interval);
                BTreeMap::new()
            }
        };
        for w in gpus {
            if failed.contains(&w.0) {
                continue;
            }
            let seen = xids.remove(&w.0).unwrap_or_default();
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
            if let Some(reason) = verdict(&reading) {
                failed.push(w.0);
                on_fault(w.0, reason);
            }
        }
    }
    tracing::info!("every GPU is unhealthy; GPU health polling stops");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profiles_come_from_device_names() {
        assert_eq!(mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb"), "1g.5gb");
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb"), "3g.40gb");
        assert_eq!(mig_profile("odd name"), "odd name");
    }

    #[test]
    fn without_a_driver_discovery_answers_none() {
        // This machine has no NVML: the library fails to load and nothing panics.
        if std::path::Path::new("/proc/driver/nvidia").exists() {
            return;
        }
        assert!(discover().is_none());
    }
}
