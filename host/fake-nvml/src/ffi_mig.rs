//! Exports of MIG: a GPU's MIG mode, its MIG device slots and their handles, and from a
//! MIG handle its GPU and instance ids (both the slot). A GPU without a `mig` section in
//! the scenario is not MIG-capable: its MIG calls answer NOT_SUPPORTED.
//!
//! Owns: these exports. Does not own what a MIG handle answers to the device getters
//! (`ffi_device.rs`, `ffi_telemetry.rs`) or the handles (`devices.rs`).

#![allow(non_snake_case)]
// Each export's contract is NVML's own (nvml.h).
#![allow(clippy::missing_safety_doc)]

use crate::devices::{self, Target};
use crate::ffi::{Code, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, guard, not_null, put};
use crate::scenario::{MAX_MIG_DEVICES, Mig};
use crate::state;
use nvml_wrapper_sys::bindings::{NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE, nvmlDevice_t};
use std::os::raw::c_uint;

/// The `mig` section of the GPU `device` names; NOT_SUPPORTED for a MIG handle or a GPU
/// that is not MIG-capable.
fn mig_of(s: &crate::scenario::Scenario, device: nvmlDevice_t) -> Result<Mig, Code> {
    let (_, gpu) = devices::resolve(s, device)?.whole_gpu()?;
    gpu.mig.clone().ok_or(NOT_SUPPORTED)
}

/// Current and pending mode are the same: `mig.enabled`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let mig = mig_of(&s, device)?;
        not_null(current_mode)?;
        not_null(pending_mode)?;
        let mode = if mig.enabled {
            NVML_DEVICE_MIG_ENABLE
        } else {
            NVML_DEVICE_MIG_DISABLE
        };
        // SAFETY: both are not null, and valid for a write (nvml.h).
        unsafe {
            put(current_mode, mode)?;
            put(pending_mode, mode)
        }
    })
}

/// Seven slots on any MIG-capable GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        mig_of(&s, device)?;
        let max = c_uint::try_from(MAX_MIG_DEVICES).map_err(|_| INVALID_ARGUMENT)?;
        // SAFETY: `count` is null or valid for a write (nvml.h).
        unsafe { put(count, max) }
    })
}

/// The MIG device in slot `index`; NOT_FOUND for an empty slot, INVALID_ARGUMENT past
/// the last slot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let mig = mig_of(&s, device)?;
        not_null(mig_device)?;
        let index = index as usize;
        if index >= MAX_MIG_DEVICES {
            return Err(INVALID_ARGUMENT);
        }
        let dev = mig.devices.get(index).ok_or(NOT_FOUND)?;
        // SAFETY: `mig_device` is not null, and valid for a write (nvml.h).
        unsafe { put(mig_device, devices::handle_of(&dev.uuid)) }
    })
}

/// The GPU of a MIG device; INVALID_ARGUMENT for a GPU handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let Target::Mig { parent, .. } = devices::resolve(&s, mig_device)? else {
            return Err(INVALID_ARGUMENT);
        };
        // SAFETY: `device` is null or valid for a write (nvml.h).
        unsafe { put(device, devices::handle_of(&parent.uuid)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig_device: *mut c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let is_mig = matches!(devices::resolve(&s, device)?, Target::Mig { .. });
        // SAFETY: `is_mig_device` is null or valid for a write (nvml.h).
        unsafe { put(is_mig_device, c_uint::from(is_mig)) }
    })
}

/// The slot of a MIG device; NOT_SUPPORTED for a GPU handle.
fn slot_of(device: nvmlDevice_t) -> Result<c_uint, Code> {
    let s = state::current()?;
    match devices::resolve(&s, device)? {
        Target::Mig { slot, .. } => c_uint::try_from(slot).map_err(|_| INVALID_ARGUMENT),
        Target::Gpu { .. } => Err(NOT_SUPPORTED),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> Code {
    guard(|| {
        let slot = slot_of(device)?;
        // SAFETY: `id` is null or valid for a write (nvml.h).
        unsafe { put(id, slot) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> Code {
    guard(|| {
        let slot = slot_of(device)?;
        // SAFETY: `id` is null or valid for a write (nvml.h).
        unsafe { put(id, slot) }
    })
}
