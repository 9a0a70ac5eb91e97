//! Exports of events: event sets, the event types a GPU supports (critical Xids only),
//! registering a GPU with a set, and waiting. Each scenario `xid_events` entry is
//! delivered once per process (its `id` remembered), to the first set that waits with
//! that GPU registered for critical Xids; a wait polls the scenario file every 20 ms
//! until its timeout and then answers TIMEOUT.
//!
//! Owns: event sets and what was delivered. Does not own the scenario (`state.rs`) or
//! the handles (`devices.rs`).

#![allow(non_snake_case)]
// Each export's contract is NVML's own (nvml.h).
#![allow(clippy::missing_safety_doc)]

use crate::devices;
use crate::ffi::{Code, INVALID_ARGUMENT, NOT_SUPPORTED, TIMEOUT, guard, not_null, put};
use crate::scenario::Scenario;
use crate::state::{self, lock};
use nvml_wrapper_sys::bindings::{
    nvmlDevice_t, nvmlEventData_t, nvmlEventSet_st, nvmlEventSet_t, nvmlEventTypeXidCriticalError,
};
use std::collections::{HashMap, HashSet};
use std::os::raw::{c_uint, c_ulonglong};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The only event type a GPU supports here.
const XID: c_ulonglong = nvmlEventTypeXidCriticalError as c_ulonglong;

/// How often a wait reads the scenario file again.
const POLL: Duration = Duration::from_millis(20);

struct EventSet {
    /// The allocation whose address is the set's handle (one byte, so each is distinct).
    _address: Box<u8>,
    /// Registered event types by GPU UUID.
    registered: HashMap<String, c_ulonglong>,
}

#[derive(Default)]
struct Events {
    sets: HashMap<usize, EventSet>,
    delivered: HashSet<u64>,
}

static EVENTS: Mutex<Option<Events>> = Mutex::new(None);

fn with_events<T>(f: impl FnOnce(&mut Events) -> T) -> T {
    f(lock(&EVENTS).get_or_insert_with(Events::default))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> Code {
    guard(|| {
        state::current()?;
        not_null(set)?;
        let address = Box::new(0u8);
        let handle = std::ptr::from_ref(address.as_ref())
            .cast_mut()
            .cast::<nvmlEventSet_st>();
        with_events(|e| {
            e.sets.insert(
                handle.addr(),
                EventSet {
                    _address: address,
                    registered: HashMap::new(),
                },
            )
        });
        // SAFETY: `set` is not null, and valid for a write (nvml.h).
        unsafe { put(set, handle) }
    })
}

/// INVALID_ARGUMENT for a set this library does not hold (never made, or freed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> Code {
    guard(|| {
        with_events(|e| e.sets.remove(&set.addr()))
            .map(|_| ())
            .ok_or(INVALID_ARGUMENT)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    event_types: *mut c_ulonglong,
) -> Code {
    guard(|| {
        let s = state::current()?;
        devices::resolve(&s, device)?.whole_gpu()?;
        // SAFETY: `event_types` is null or valid for a write (nvml.h).
        unsafe { put(event_types, XID) }
    })
}

/// NOT_SUPPORTED when `event_types` asks for more than critical Xids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> Code {
    guard(|| {
        let s = state::current()?;
        let (_, gpu) = devices::resolve(&s, device)?.whole_gpu()?;
        if event_types & !XID != 0 {
            return Err(NOT_SUPPORTED);
        }
        with_events(|e| {
            let entry = e.sets.get_mut(&set.addr()).ok_or(INVALID_ARGUMENT)?;
            *entry.registered.entry(gpu.uuid.clone()).or_insert(0) |= event_types;
            Ok(())
        })
    })
}

/// Waits up to `timeoutms` for an undelivered Xid of a GPU registered with `set`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> Code {
    guard(|| {
        not_null(data)?;
        let deadline = Instant::now() + Duration::from_millis(u64::from(timeoutms));
        loop {
            let s = state::current()?;
            if let Some((uuid, xid)) = take(&s, set.addr())? {
                let event = nvmlEventData_t {
                    device: devices::handle_of(&uuid),
                    eventType: XID,
                    eventData: xid,
                    gpuInstanceId: 0xFFFF_FFFF,
                    computeInstanceId: 0xFFFF_FFFF,
                };
                // SAFETY: `data` is not null, and valid for a write (nvml.h).
                return unsafe { put(data, event) };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(TIMEOUT);
            }
            std::thread::sleep(left.min(POLL));
        }
    })
}

/// The first Xid of `s` not yet delivered whose GPU `set` has registered for critical
/// Xids, marked delivered; INVALID_ARGUMENT when the set is unknown.
fn take(s: &Scenario, set: usize) -> Result<Option<(String, u64)>, Code> {
    with_events(|e| {
        let registered = &e.sets.get(&set).ok_or(INVALID_ARGUMENT)?.registered;
        let found = s.xid_events.iter().find_map(|ev| {
            let gpu = s.devices.get(ev.gpu as usize)?;
            let wants = registered.get(&gpu.uuid).is_some_and(|t| t & XID != 0);
            (wants && !e.delivered.contains(&ev.id)).then(|| (ev.id, gpu.uuid.clone(), ev.xid))
        });
        Ok(found.map(|(id, uuid, xid)| {
            e.delivered.insert(id);
            (uuid, xid)
        }))
    })
}
