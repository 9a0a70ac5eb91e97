//! Exports of the library and system: init and shutdown, error strings, the driver and
//! NVML versions, the GPU count, and finding a device's handle (by index, UUID or PCI bus
//! id) or its index.
//!
//! Owns: these exports. Does not own the init count or reading the scenario
//! (`state.rs`), nor the handles (`devices.rs`).

#![allow(non_snake_case)]
// Each export's contract is NVML's own (nvml.h); the `# Safety` of every one would say
// "the pointers are valid as nvml.h requires".
#![allow(clippy::missing_safety_doc)]

use crate::devices::{self, Target};
use crate::ffi::{Code, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, guard, put, put_str};
use crate::state;
use nvml_wrapper_sys::bindings::{self as sys, nvmlDevice_t};
use std::ffi::CStr;
use std::os::raw::{c_char, c_uint};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInit_v2() -> Code {
    guard(state::init)
}

/// The flags (no GPUs, no attach) change nothing here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> Code {
    guard(state::init)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlShutdown() -> Code {
    guard(state::shutdown)
}

/// NVML's description of a return code (a static string).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlErrorString(result: Code) -> *const c_char {
    let text: &'static CStr = match result {
        sys::nvmlReturn_enum_NVML_SUCCESS => c"Success",
        sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED => c"Uninitialized",
        sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED => c"Not Supported",
        sys::nvmlReturn_enum_NVML_ERROR_NOT_FOUND => c"Not Found",
        sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        sys::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        sys::nvmlReturn_enum_NVML_ERROR_TIMEOUT => c"Timeout",
        sys::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND => c"NVML Shared Library Not Found",
        sys::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST => c"GPU is lost",
        sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        _ => c"Unknown Error",
    };
    text.as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> Code {
    guard(|| {
        let s = state::current()?;
        // SAFETY: `version` is null or valid for `length` bytes (nvml.h).
        unsafe { put_str(version, length, &s.driver_version) }
    })
}

/// `12.<driver version>`, as NVML 12 spells its own version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> Code {
    guard(|| {
        let s = state::current()?;
        let text = format!("12.{}", s.driver_version);
        // SAFETY: `version` is null or valid for `length` bytes (nvml.h).
        unsafe { put_str(version, length, &text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> Code {
    guard(|| {
        let s = state::current()?;
        let n = c_uint::try_from(s.devices.len()).unwrap_or(c_uint::MAX);
        // SAFETY: `count` is null or valid for a write (nvml.h).
        unsafe { put(count, n) }
    })
}

/// A lost GPU still has a handle; what is asked of it answers GPU_IS_LOST.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let gpu = s.devices.get(index as usize).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: `device` is null or valid for a write (nvml.h).
        unsafe { put(device, devices::handle_of(&gpu.uuid)) }
    })
}

/// A GPU's or a MIG device's UUID; NOT_FOUND when the scenario has no such device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        // SAFETY: `uuid` is null or a NUL-terminated string (nvml.h).
        let wanted = unsafe { c_text(uuid) }?;
        let target = devices::find(&s, &wanted).ok_or(NOT_FOUND)?;
        // SAFETY: `device` is null or valid for a write (nvml.h).
        unsafe { put(device, devices::handle_of(target.uuid())) }
    })
}

/// A GPU's bus id, in any case.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    pci_bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        // SAFETY: `pci_bus_id` is null or a NUL-terminated string (nvml.h).
        let wanted = unsafe { c_text(pci_bus_id) }?;
        let gpu = s
            .devices
            .iter()
            .find(|g| g.pci_bus_id.eq_ignore_ascii_case(wanted.trim()))
            .ok_or(NOT_FOUND)?;
        // SAFETY: `device` is null or valid for a write (nvml.h).
        unsafe { put(device, devices::handle_of(&gpu.uuid)) }
    })
}

/// A GPU's place in the scenario's `devices`; NOT_SUPPORTED for a MIG device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) -> Code {
    guard(|| {
        let s = state::current()?;
        let i = match devices::resolve(&s, device)? {
            Target::Gpu { index, .. } => index,
            Target::Mig { .. } => return Err(NOT_SUPPORTED),
        };
        let i = c_uint::try_from(i).map_err(|_| INVALID_ARGUMENT)?;
        // SAFETY: `index` is null or valid for a write (nvml.h).
        unsafe { put(index, i) }
    })
}

/// The UTF-8 text of a C string argument; INVALID_ARGUMENT when null or not UTF-8.
///
/// # Safety
/// `text` is null or a NUL-terminated string.
unsafe fn c_text(text: *const c_char) -> Result<String, Code> {
    if text.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: not null, and NUL-terminated by the caller's contract.
    let raw = unsafe { CStr::from_ptr(text) };
    raw.to_str()
        .map(str::to_string)
        .map_err(|_| INVALID_ARGUMENT)
}
