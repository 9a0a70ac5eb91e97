//! Reading the GPUs from NVML (loaded at run time from `node.nvml_library`, by default
//! the driver's `libnvidia-ml.so.1`; without a driver every call here answers "no NVML"
//! and the node's GPUs come from configuration): model, UUID, memory, PCI bus id,
//! active NVLinks with their remote bus ids, MIG devices when MIG mode is on, and one
//! health reading at discovery.
//!
//! nvml-wrapper 0.11 has no MIG enumeration, so MIG devices are listed through the raw
//! `nvml-wrapper-sys` bindings (two calls, each in one `unsafe` block) and then read
//! through the safe `Device` API.
//!
//! Owns: loading the library and the discovery calls. Does not own the health rules
//! (`health.rs`), the watcher after start (`nvml_watch.rs`), the topology (`groups.rs`)
//! or what the scheduler does with an unhealthy GPU.

use super::health::{HealthReading, verdict};
use super::{GpuInfo, MigDevice, NvLinkInfo, groups};
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    NVML_DEVICE_MIG_ENABLE, NVML_NVLINK_MAX_LINKS, NvmlLib, nvmlDevice_t,
    nvmlReturn_enum_NVML_SUCCESS,
};

/// The library loaded when `node.nvml_library` is not set (the driver's, found by the
/// dynamic loader).
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// NVML from `library` (default [`NVML_LIBRARY`]), initialised.
pub fn init(library: Option<&str>) -> Result<Nvml, NvmlError> {
    let path = std::ffi::OsStr::new(library.unwrap_or(NVML_LIBRARY));
    Nvml::builder().lib_path(path).init()
}

/// The local GPUs from NVML in `library` (peers resolved), or `None` when there is no
/// driver.
pub fn discover(library: Option<&str>) -> Option<Vec<GpuInfo>> {
    let nvml = match init(library) {
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
    let raw = raw_library(library);
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

/// The raw bindings of the NVML in `library` (default [`NVML_LIBRARY`]) that `nvml`-wrapper
/// has loaded and initialised, for the MIG calls it lacks; `None` when they do not load.
pub(super) fn raw_library(library: Option<&str>) -> Option<NvmlLib> {
    // SAFETY: loads the same library nvml-wrapper has loaded (and initialised) in this
    // process; its initialisers have already run.
    unsafe { NvmlLib::new(library.unwrap_or(NVML_LIBRARY)) }
        .map_err(|e| tracing::info!("MIG devices are not listed: {e}"))
        .ok()
}

/// The MIG devices of `dev` (GPU `index`) now: its layout, re-read after start.
pub(super) fn mig_layout(nvml: &Nvml, lib: &NvmlLib, dev: &Device, index: u32) -> Vec<MigDevice> {
    mig_devices(nvml, lib, dev, index)
}

/// NVML's getter of a MIG device's GPU or compute instance id.
type InstanceIdFn = unsafe extern "C" fn(
    nvmlDevice_t,
    *mut std::os::raw::c_uint,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

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
        let instance = |f: Option<InstanceIdFn>| {
            let f = f?;
            let mut id: std::os::raw::c_uint = 0;
            // SAFETY: `mig` is a live MIG device handle and `id` a valid out-pointer.
            (unsafe { f(mig, &mut id) } == nvmlReturn_enum_NVML_SUCCESS).then_some(id)
        };
        out.push(MigDevice {
            parent_index: parent,
            slot,
            gpu_instance: instance(lib.nvmlDeviceGetGpuInstanceId.as_ref().ok().copied()),
            compute_instance: instance(lib.nvmlDeviceGetComputeInstanceId.as_ref().ok().copied()),
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
pub(super) fn read_health(dev: &Device, critical_xids: Vec<u64>) -> HealthReading {
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
        assert!(discover(None).is_none());
        assert!(discover(Some("/nonexistent/libnvidia-ml.so.1")).is_none());
    }
}
