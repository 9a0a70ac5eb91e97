//! Exports of usage and health: utilization rates, running compute processes, per-process
//! utilization samples, uncorrected ECC errors, pages pending retirement, remapped rows.
//! The list calls follow NVML's two-call pattern: a call with too small a buffer (or
//! none) sets the count needed and answers INSUFFICIENT_SIZE. A GPU's processes include
//! those of its MIG devices (with their instance ids); a MIG handle lists its own.
//!
//! Owns: these exports. Does not own device descriptions (`ffi_device.rs`), events
//! (`ffi_events.rs`) or the handles (`devices.rs`).

#![allow(non_snake_case)]
// Each export's contract is NVML's own (nvml.h).
#![allow(clippy::missing_safety_doc)]

use crate::devices::{self, Target};
use crate::ffi::{
    Answer, Code, INSUFFICIENT_SIZE, INVALID_ARGUMENT, NOT_FOUND, guard, not_null, put,
};
use crate::scenario::Process;
use crate::state;
use nvml_wrapper_sys::bindings::{
    self as sys, nvmlDevice_t, nvmlEccCounterType_enum_NVML_AGGREGATE_ECC,
    nvmlEccCounterType_enum_NVML_VOLATILE_ECC, nvmlEccCounterType_t,
    nvmlEnableState_enum_NVML_FEATURE_DISABLED, nvmlEnableState_enum_NVML_FEATURE_ENABLED,
    nvmlEnableState_t, nvmlMemoryErrorType_t, nvmlProcessInfo_t, nvmlProcessUtilizationSample_t,
    nvmlUtilization_t,
};
use std::os::raw::{c_uint, c_ulonglong};
use std::sync::atomic::{AtomicU64, Ordering};

/// NVML's "no value" for an instance id (a process outside any MIG device).
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        let rates = nvmlUtilization_t {
            gpu: gpu.utilization.gpu,
            memory: gpu.utilization.memory,
        };
        // SAFETY: `utilization` is null or valid for a write (nvml.h).
        unsafe { put(utilization, rates) }
    })
}

/// The processes of `target` with the instance ids NVML reports for them.
fn processes(target: &Target<'_>) -> Vec<(Process, c_uint)> {
    let slot = |i: usize| c_uint::try_from(i).unwrap_or(NO_INSTANCE);
    match target {
        Target::Gpu { gpu, .. } => {
            let own = gpu.processes.iter().map(|p| (*p, NO_INSTANCE));
            let mig = gpu
                .mig_devices()
                .iter()
                .enumerate()
                .flat_map(|(i, m)| m.processes.iter().map(move |p| (*p, slot(i))));
            own.chain(mig).collect()
        }
        Target::Mig { mig, slot: i, .. } => mig.processes.iter().map(|p| (*p, slot(*i))).collect(),
    }
}

/// Writes `items` into the caller's array of `*count` entries, NVML's way: the count
/// needed always goes back in `*count`; INSUFFICIENT_SIZE when the array is missing or
/// too short (and there is something to write).
///
/// # Safety
/// `count` is null or valid for reads and writes; `out` is null or valid for `*count`
/// writes of `T`.
unsafe fn put_list<T>(out: *mut T, count: *mut c_uint, items: Vec<T>) -> Answer {
    not_null(count)?;
    let needed = c_uint::try_from(items.len()).map_err(|_| INVALID_ARGUMENT)?;
    // SAFETY: `count` is not null, and valid by the caller's contract.
    let capacity = unsafe { count.replace(needed) };
    if needed == 0 {
        return Ok(());
    }
    if out.is_null() || capacity < needed {
        return Err(INSUFFICIENT_SIZE);
    }
    for (i, item) in items.into_iter().enumerate() {
        // SAFETY: `i < needed <= capacity`, and `out` is valid for `capacity` writes.
        unsafe { out.add(i).write(item) };
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Code {
    // SAFETY: the pointers are as nvml.h requires.
    guard(|| unsafe { running_processes(device, info_count, infos) })
}

/// Version 2 has the same record as version 3 (`nvmlProcessInfo_v2_t`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Code {
    // SAFETY: the pointers are as nvml.h requires.
    guard(|| unsafe { running_processes(device, info_count, infos) })
}

/// Both versions of `nvmlDeviceGetComputeRunningProcesses` (called directly, never
/// through the exported symbol, which another object could interpose).
///
/// # Safety
/// `info_count` is null or valid for reads and writes; `infos` is null or valid for
/// `*info_count` writes.
unsafe fn running_processes(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Answer {
    let s = state::current()?;
    let target = devices::resolve(&s, device)?;
    let list = processes(&target)
        .into_iter()
        .map(|(p, instance)| nvmlProcessInfo_t {
            pid: p.pid,
            usedGpuMemory: p.used_memory_mib.saturating_mul(1 << 20),
            gpuInstanceId: instance,
            computeInstanceId: instance,
        })
        .collect();
    // SAFETY: this function's own contract.
    unsafe { put_list(infos, info_count, list) }
}

/// A timestamp in microseconds since the epoch, strictly greater than any given before.
fn next_timestamp() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// One fresh sample per process, stamped now, when now is after `last_seen` (µs);
/// NOT_FOUND when there is none, as NVML answers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    process_samples_count: *mut c_uint,
    last_seen: c_ulonglong,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let target = devices::resolve(&s, device)?;
        not_null(process_samples_count)?;
        let stamp = next_timestamp();
        let list: Vec<nvmlProcessUtilizationSample_t> = if stamp > last_seen {
            processes(&target)
                .into_iter()
                .map(|(p, _)| nvmlProcessUtilizationSample_t {
                    pid: p.pid,
                    timeStamp: stamp,
                    smUtil: p.sm_util,
                    memUtil: p.mem_util,
                    encUtil: 0,
                    decUtil: 0,
                })
                .collect()
        } else {
            Vec::new()
        };
        let none = list.is_empty();
        // SAFETY: the pointers are as nvml.h requires.
        unsafe { put_list(utilization, process_samples_count, list) }?;
        if none { Err(NOT_FOUND) } else { Ok(()) }
    })
}

/// Uncorrected errors (volatile or aggregate) are `ecc_uncorrected_volatile`; corrected 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    counter_type: nvmlEccCounterType_t,
    ecc_counts: *mut c_ulonglong,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        if counter_type != nvmlEccCounterType_enum_NVML_VOLATILE_ECC
            && counter_type != nvmlEccCounterType_enum_NVML_AGGREGATE_ECC
        {
            return Err(INVALID_ARGUMENT);
        }
        let n = match error_type {
            sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED => {
                gpu.ecc_uncorrected_volatile
            }
            sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_CORRECTED => 0,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: `ecc_counts` is null or valid for a write (nvml.h).
        unsafe { put(ecc_counts, n) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    is_pending: *mut nvmlEnableState_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        let state = if gpu.retired_pages_pending {
            nvmlEnableState_enum_NVML_FEATURE_ENABLED
        } else {
            nvmlEnableState_enum_NVML_FEATURE_DISABLED
        };
        // SAFETY: `is_pending` is null or valid for a write (nvml.h).
        unsafe { put(is_pending, state) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        for out in [corr_rows, unc_rows, is_pending, failure_occurred] {
            not_null(out)?;
        }
        let r = gpu.remapped_rows;
        // SAFETY: all four are not null, and valid for a write (nvml.h).
        unsafe {
            put(corr_rows, r.correctable)?;
            put(unc_rows, r.uncorrectable)?;
            put(is_pending, c_uint::from(r.pending))?;
            put(failure_occurred, c_uint::from(r.failure))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_advance() {
        let a = next_timestamp();
        let b = next_timestamp();
        assert!(b > a);
        assert!(a > 1_600_000_000_000_000, "microseconds since the epoch");
    }

    #[test]
    fn lists_follow_the_two_call_pattern() {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid c_uint and the null array is checked.
        let first = unsafe { put_list(std::ptr::null_mut(), &mut count, vec![7u32, 8, 9]) };
        assert_eq!((first, count), (Err(INSUFFICIENT_SIZE), 3));
        let mut out = [0u32; 5];
        count = 5;
        // SAFETY: `out` has room for `count` entries.
        let second = unsafe { put_list(out.as_mut_ptr(), &mut count, vec![7u32, 8, 9]) };
        assert_eq!((second, count, out), (Ok(()), 3, [7, 8, 9, 0, 0]));
        count = 0;
        // SAFETY: nothing is written for an empty list.
        let empty = unsafe { put_list(std::ptr::null_mut::<u32>(), &mut count, Vec::new()) };
        assert_eq!((empty, count), (Ok(()), 0));
    }
}
