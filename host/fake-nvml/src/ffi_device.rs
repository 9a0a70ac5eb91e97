//! Exports that describe a device: name, UUID, PCI record, memory, and NVLinks (state
//! and remote bus id). A MIG handle answers name, UUID, memory and its GPU's PCI record;
//! the NVLink calls need a whole GPU.
//!
//! Owns: these exports. Does not own telemetry or health (`ffi_telemetry.rs`), MIG
//! (`ffi_mig.rs`) or the handles (`devices.rs`).

#![allow(non_snake_case)]
// Each export's contract is NVML's own (nvml.h).
#![allow(clippy::missing_safety_doc)]

use crate::devices;
use crate::ffi::{
    ARGUMENT_VERSION_MISMATCH, Code, INVALID_ARGUMENT, NOT_SUPPORTED, guard, not_null, pci_info,
    put, put_str,
};
use crate::scenario::MAX_NVLINKS;
use crate::state;
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlEnableState_enum_NVML_FEATURE_DISABLED,
    nvmlEnableState_enum_NVML_FEATURE_ENABLED, nvmlEnableState_t, nvmlMemory_t, nvmlMemory_v2_t,
    nvmlPciInfo_t,
};
use std::os::raw::{c_char, c_uint};

/// The version nvml.h's `nvmlMemory_v2` macro makes: the struct's size, and 2 << 24.
const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<nvmlMemory_v2_t>() | (2 << 24)) as c_uint;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let target = devices::resolve(&s, device)?;
        // SAFETY: `name` is null or valid for `length` bytes (nvml.h).
        unsafe { put_str(name, length, &target.name()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let target = devices::resolve(&s, device)?;
        // SAFETY: `uuid` is null or valid for `length` bytes (nvml.h).
        unsafe { put_str(uuid, length, target.uuid()) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let target = devices::resolve(&s, device)?;
        // SAFETY: `pci` is null or valid for a write (nvml.h).
        unsafe { put(pci, pci_info(&target.gpu().pci_bus_id)) }
    })
}

/// Total, used and free (total − used) memory in bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (total, used) = bytes(devices::resolve(&s, device)?.memory_mib());
        let info = nvmlMemory_t {
            total,
            free: total.saturating_sub(used),
            used,
        };
        // SAFETY: `memory` is null or valid for a write (nvml.h).
        unsafe { put(memory, info) }
    })
}

/// As `nvmlDeviceGetMemoryInfo`, reserved 0; the caller's `version` must be
/// `nvmlMemory_v2` (else ARGUMENT_VERSION_MISMATCH, as NVML answers).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (total, used) = bytes(devices::resolve(&s, device)?.memory_mib());
        not_null(memory)?;
        // SAFETY: not null, and valid for reads and writes of the struct (nvml.h).
        let version = unsafe { (*memory).version };
        if version != MEMORY_V2_VERSION {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let info = nvmlMemory_v2_t {
            version,
            total,
            reserved: 0,
            free: total.saturating_sub(used),
            used,
        };
        // SAFETY: as above.
        unsafe { put(memory, info) }
    })
}

fn bytes((total, used): (u64, u64)) -> (u64, u64) {
    (total.saturating_mul(1 << 20), used.saturating_mul(1 << 20))
}

/// Enabled for a link with a remote bus id in the scenario, disabled for the others
/// below `NVML_NVLINK_MAX_LINKS`; INVALID_ARGUMENT past that.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    is_active: *mut nvmlEnableState_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        let state = match remote(&gpu.nvlinks, link)? {
            Some(_) => nvmlEnableState_enum_NVML_FEATURE_ENABLED,
            None => nvmlEnableState_enum_NVML_FEATURE_DISABLED,
        };
        // SAFETY: `is_active` is null or valid for a write (nvml.h).
        unsafe { put(is_active, state) }
    })
}

/// The PCI record of an active link's remote end; NOT_SUPPORTED for an inactive link.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        let bus_id = remote(&gpu.nvlinks, link)?.ok_or(NOT_SUPPORTED)?;
        // SAFETY: `pci` is null or valid for a write (nvml.h).
        unsafe { put(pci, pci_info(bus_id)) }
    })
}

/// The remote bus id of `link` when active; INVALID_ARGUMENT past the last possible link.
fn remote(links: &[Option<String>], link: c_uint) -> Result<Option<&str>, Code> {
    let link = link as usize;
    if link >= MAX_NVLINKS {
        return Err(INVALID_ARGUMENT);
    }
    Ok(links.get(link).and_then(Option::as_deref))
}
