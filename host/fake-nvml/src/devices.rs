//! Device handles. A handle (`nvmlDevice_t`) is the address of a leaked record made once
//! per UUID, so it stays the same across rewrites of the scenario and never dangles;
//! the library never reads through a handle it is given, it only looks its address up.
//! [`resolve`] turns a handle into what the current scenario says of that UUID: a GPU, a
//! MIG device, or gone.
//!
//! Owns: handles and their meaning. Does not own reading the scenario (`state.rs`) or
//! what each call answers (the `ffi_*` modules).

use crate::ffi::{Code, GPU_IS_LOST, INVALID_ARGUMENT};
use crate::scenario::{Gpu, MigDevice, Scenario};
use crate::state::lock;
use nvml_wrapper_sys::bindings::{nvmlDevice_st, nvmlDevice_t};
use std::collections::HashMap;
use std::sync::Mutex;

/// The record a handle points at (never read through the handle).
#[derive(Debug)]
struct Slot {
    uuid: String,
}

#[derive(Default)]
struct Registry {
    by_uuid: HashMap<String, &'static Slot>,
    by_addr: HashMap<usize, &'static Slot>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// The handle of `uuid`, made on first use and the same for the life of the process.
pub fn handle_of(uuid: &str) -> nvmlDevice_t {
    let mut guard = lock(&REGISTRY);
    let reg = guard.get_or_insert_with(Registry::default);
    let slot = match reg.by_uuid.get(uuid) {
        Some(slot) => *slot,
        None => {
            let slot: &'static Slot = Box::leak(Box::new(Slot {
                uuid: uuid.to_string(),
            }));
            reg.by_uuid.insert(uuid.to_string(), slot);
            reg.by_addr.insert(address(slot), slot);
            slot
        }
    };
    std::ptr::from_ref(slot).cast_mut().cast::<nvmlDevice_st>()
}

fn address(slot: &'static Slot) -> usize {
    std::ptr::from_ref(slot).addr()
}

/// The UUID `handle` was made for, or `None` when this library never gave it out.
fn uuid_of(handle: nvmlDevice_t) -> Option<String> {
    let guard = lock(&REGISTRY);
    let slot = guard.as_ref()?.by_addr.get(&handle.addr())?;
    Some(slot.uuid.clone())
}

/// What a handle names in the current scenario.
#[derive(Debug, Clone, Copy)]
pub enum Target<'s> {
    Gpu {
        index: usize,
        gpu: &'s Gpu,
    },
    Mig {
        parent: &'s Gpu,
        slot: usize,
        mig: &'s MigDevice,
    },
}

impl<'s> Target<'s> {
    /// The name NVML gives: a MIG device's is `<parent name> MIG <profile>`.
    pub fn name(&self) -> String {
        match self {
            Target::Gpu { gpu, .. } => gpu.name.clone(),
            Target::Mig { parent, mig, .. } => format!("{} MIG {}", parent.name, mig.profile),
        }
    }

    pub fn uuid(&self) -> &'s str {
        match self {
            Target::Gpu { gpu, .. } => &gpu.uuid,
            Target::Mig { mig, .. } => &mig.uuid,
        }
    }

    /// Total and used memory in MiB.
    pub fn memory_mib(&self) -> (u64, u64) {
        match self {
            Target::Gpu { gpu, .. } => (gpu.memory_mib, gpu.used_memory_mib),
            Target::Mig { mig, .. } => (mig.memory_mib, mig.used_memory_mib),
        }
    }

    /// The GPU itself, or the parent of a MIG device.
    pub fn gpu(&self) -> &'s Gpu {
        match self {
            Target::Gpu { gpu, .. } => gpu,
            Target::Mig { parent, .. } => parent,
        }
    }

    /// The GPU, or `NOT_SUPPORTED` for a MIG device (calls only a whole GPU answers).
    pub fn whole_gpu(&self) -> Result<(usize, &'s Gpu), Code> {
        match self {
            Target::Gpu { index, gpu } => Ok((*index, gpu)),
            Target::Mig { .. } => Err(crate::ffi::NOT_SUPPORTED),
        }
    }
}

/// Finds `uuid` among the GPUs and MIG devices of `s`, lost or not.
pub fn find<'s>(s: &'s Scenario, uuid: &str) -> Option<Target<'s>> {
    for (index, gpu) in s.devices.iter().enumerate() {
        if gpu.uuid == uuid {
            return Some(Target::Gpu { index, gpu });
        }
        for (slot, mig) in gpu.mig_devices().iter().enumerate() {
            if mig.uuid == uuid {
                return Some(Target::Mig {
                    parent: gpu,
                    slot,
                    mig,
                });
            }
        }
    }
    None
}

/// What `handle` names in `s`: INVALID_ARGUMENT for a handle this library never gave
/// out, GPU_IS_LOST for a device gone from the scenario or marked lost (a MIG device
/// when its GPU is).
pub fn resolve(s: &Scenario, handle: nvmlDevice_t) -> Result<Target<'_>, Code> {
    if handle.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    let uuid = uuid_of(handle).ok_or(INVALID_ARGUMENT)?;
    let target = find(s, &uuid).ok_or(GPU_IS_LOST)?;
    if target.gpu().lost {
        return Err(GPU_IS_LOST);
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse;

    const TWO: &str = r#"{"devices": [
        {"name": "A", "uuid": "GPU-a", "memory_mib": 10, "mig": {"enabled": true, "devices": [
            {"profile": "1g.5gb", "uuid": "MIG-a0", "memory_mib": 5}]}},
        {"name": "B", "uuid": "GPU-b", "memory_mib": 20, "lost": true}]}"#;

    #[test]
    fn handles_are_stable_per_uuid() {
        let a = handle_of("GPU-a");
        assert_eq!(a, handle_of("GPU-a"));
        assert_ne!(a, handle_of("GPU-b"));
        assert!(!a.is_null());
    }

    #[test]
    fn handles_resolve_against_the_scenario() {
        let s = parse(TWO).expect("valid");
        let t = resolve(&s, handle_of("GPU-a")).expect("a GPU");
        assert!(matches!(t, Target::Gpu { index: 0, .. }));
        let m = resolve(&s, handle_of("MIG-a0")).expect("a MIG device");
        assert_eq!(m.name(), "A MIG 1g.5gb");
        assert_eq!(m.memory_mib(), (5, 0));
        assert!(m.whole_gpu().is_err());
        assert_eq!(resolve(&s, handle_of("GPU-b")).err(), Some(GPU_IS_LOST));
        assert_eq!(resolve(&s, handle_of("GPU-gone")).err(), Some(GPU_IS_LOST));
        let bogus: nvmlDevice_t = std::ptr::without_provenance_mut(8);
        assert_eq!(resolve(&s, bogus).err(), Some(INVALID_ARGUMENT));
        assert_eq!(
            resolve(&s, std::ptr::null_mut()).err(),
            Some(INVALID_ARGUMENT)
        );
    }
}
