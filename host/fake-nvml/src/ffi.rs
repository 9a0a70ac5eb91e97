//! What every export shares: NVML's return codes, the panic guard (no panic crosses the
//! FFI boundary: it answers NVML_ERROR_UNKNOWN), and writing answers into the caller's
//! out-pointers and string buffers with NVML's checks (null → INVALID_ARGUMENT, a buffer
//! too small → INSUFFICIENT_SIZE).
//!
//! Owns: the boundary's rules. Does not own any state or any export.

use nvml_wrapper_sys::bindings as sys;
use std::os::raw::{c_char, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// An NVML return code.
pub type Code = sys::nvmlReturn_t;

/// What an export's body answers: `Ok` is NVML_SUCCESS.
pub type Answer = Result<(), Code>;

pub const SUCCESS: Code = sys::nvmlReturn_enum_NVML_SUCCESS;
pub const UNINITIALIZED: Code = sys::nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
pub const INVALID_ARGUMENT: Code = sys::nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub const NOT_SUPPORTED: Code = sys::nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub const NOT_FOUND: Code = sys::nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
pub const INSUFFICIENT_SIZE: Code = sys::nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
pub const DRIVER_NOT_LOADED: Code = sys::nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED;
pub const TIMEOUT: Code = sys::nvmlReturn_enum_NVML_ERROR_TIMEOUT;
pub const LIBRARY_NOT_FOUND: Code = sys::nvmlReturn_enum_NVML_ERROR_LIBRARY_NOT_FOUND;
pub const GPU_IS_LOST: Code = sys::nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
pub const ARGUMENT_VERSION_MISMATCH: Code =
    sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
pub const UNKNOWN: Code = sys::nvmlReturn_enum_NVML_ERROR_UNKNOWN;

/// Runs an export's body; a panic answers NVML_ERROR_UNKNOWN instead of unwinding into C.
pub fn guard(body: impl FnOnce() -> Answer) -> Code {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => UNKNOWN,
    }
}

/// Writes `value` through `out`.
///
/// # Safety
/// `out` is null or valid for one write of a `T` (NVML's contract for out-pointers).
pub unsafe fn put<T>(out: *mut T, value: T) -> Answer {
    if out.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: not null, and valid for a write by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Fails with INVALID_ARGUMENT when `out` is null (checked before any work).
pub fn not_null<T>(out: *mut T) -> Answer {
    if out.is_null() {
        Err(INVALID_ARGUMENT)
    } else {
        Ok(())
    }
}

/// Writes `text` NUL-terminated into `buf` of `length` bytes.
///
/// # Safety
/// `buf` is null or valid for `length` bytes of writes.
pub unsafe fn put_str(buf: *mut c_char, length: c_uint, text: &str) -> Answer {
    not_null(buf)?;
    let bytes = text.as_bytes();
    if bytes.len() >= length as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: `buf` is valid for `length` bytes, and `bytes.len() + 1 <= length`; the
    // source is a live slice that cannot overlap the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    Ok(())
}

/// Copies `text` into a fixed C array (NUL-terminated, cut to fit).
pub fn fill_chars<const N: usize>(dst: &mut [c_char; N], text: &str) {
    let n = text.len().min(N.saturating_sub(1));
    for (d, s) in dst.iter_mut().zip(text.as_bytes()[..n].iter()) {
        *d = *s as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

/// NVML's PCI record of the bus id `bus_id` (the domain, bus and device parsed from it;
/// device and subsystem ids 0).
pub fn pci_info(bus_id: &str) -> sys::nvmlPciInfo_t {
    let (domain, bus, device, function) =
        crate::scenario::parse_bus_id(bus_id).unwrap_or((0, 0, 0, 0));
    let mut info = sys::nvmlPciInfo_t {
        busIdLegacy: [0; 16],
        domain,
        bus,
        device,
        pciDeviceId: 0,
        pciSubSystemId: 0,
        busId: [0; 32],
    };
    fill_chars(&mut info.busId, bus_id);
    let legacy = format!("{:04X}:{bus:02X}:{device:02X}.{function}", domain & 0xffff);
    fill_chars(&mut info.busIdLegacy, &legacy);
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn strings_are_nul_terminated_and_checked_for_size() {
        let mut buf = [1 as c_char; 8];
        // SAFETY: `buf` has 8 bytes.
        assert_eq!(unsafe { put_str(buf.as_mut_ptr(), 8, "1234567") }, Ok(()));
        // SAFETY: put_str wrote a NUL-terminated string into `buf`.
        let back = unsafe { CStr::from_ptr(buf.as_ptr()) };
        assert_eq!(back.to_str(), Ok("1234567"));
        // SAFETY: `buf` has 8 bytes.
        let long = unsafe { put_str(buf.as_mut_ptr(), 8, "12345678") };
        assert_eq!(long, Err(INSUFFICIENT_SIZE));
        // SAFETY: a null buffer is checked before any write.
        let null = unsafe { put_str(std::ptr::null_mut(), 8, "x") };
        assert_eq!(null, Err(INVALID_ARGUMENT));
    }

    #[test]
    fn a_panic_answers_unknown() {
        assert_eq!(guard(|| panic!("boom")), UNKNOWN);
        assert_eq!(guard(|| Err(NOT_FOUND)), NOT_FOUND);
        assert_eq!(guard(|| Ok(())), SUCCESS);
    }

    #[test]
    fn pci_records_carry_the_bus_id() {
        let info = pci_info("00000000:07:00.0");
        assert_eq!((info.domain, info.bus, info.device), (0, 7, 0));
        // SAFETY: fill_chars NUL-terminates both arrays.
        let (bus_id, legacy) = unsafe {
            (
                CStr::from_ptr(info.busId.as_ptr()),
                CStr::from_ptr(info.busIdLegacy.as_ptr()),
            )
        };
        assert_eq!(bus_id.to_str(), Ok("00000000:07:00.0"));
        assert_eq!(legacy.to_str(), Ok("0000:07:00.0"));
    }
}
