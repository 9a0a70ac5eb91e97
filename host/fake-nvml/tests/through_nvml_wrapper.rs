//! The built fake NVML loaded through nvml-wrapper itself, as Gantry loads NVML: the
//! inventory, telemetry, health, MIG (through the raw `NvmlLib`, as Gantry's `nvml.rs`
//! does), Xid events delivered once, a lost and a removed GPU, rewrites picked up while
//! loaded, and scenarios refused at init with a message. Each `child_*` test runs in a
//! process of its own, started by the test above it with its scenario.

mod support;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{
    NvmlLib, nvmlDevice_t, nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT,
    nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND,
    nvmlReturn_enum_NVML_ERROR_UNINITIALIZED as UNINITIALIZED,
    nvmlReturn_enum_NVML_SUCCESS as SUCCESS,
};
use std::path::Path;
use std::time::Duration;
use support::*;

fn init() -> Nvml {
    Nvml::builder()
        .lib_path(library().as_os_str())
        .init()
        .expect("the fake NVML starts")
}

#[test]
fn answers_through_nvml_wrapper() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("scenario.json");
    write(&path, &two_gpus());
    let out = run_child("child_answers_through_nvml_wrapper", Some(&path), "");
    // The one refused rewrite was reported once, though read at many calls.
    let messages = library_messages(&out);
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(messages[0].contains("malformed scenario: unknown field `bogus`"));
    assert!(messages[0].contains("the last good scenario is still served"));
}

#[test]
fn refuses_bad_scenarios_at_init() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.json");
    let mut dup = two_gpus();
    dup["devices"][1]["uuid"] = UUID0.into();
    let cases: [(Option<String>, &str, &str); 4] = [
        (
            Some("{\"devices\": [".into()),
            "Unknown",
            "malformed scenario: EOF",
        ),
        (
            Some(dup.to_string()),
            "Unknown",
            "devices[1].uuid: the uuid \"GPU-00000000-0000-0000-0000-000000000000\" is also",
        ),
        (None, "DriverNotLoaded", "does not exist"),
        (
            None,
            "LibraryNotFound",
            "GANTRY_FAKE_NVML_SCENARIO is not set",
        ),
    ];
    for (text, expect, message) in cases {
        let _ = std::fs::remove_file(&bad);
        if let Some(text) = &text {
            write_text(&bad, text);
        }
        let scenario = (expect != "LibraryNotFound").then_some(bad.as_path());
        let out = run_child("child_init_fails", scenario, expect);
        let messages = library_messages(&out);
        assert_eq!(messages.len(), 1, "{expect}: {messages:?}");
        assert!(messages[0].contains(message), "{messages:?}");
    }
}

#[test]
fn child_init_fails() {
    if child().is_none() {
        return;
    }
    let expect = std::env::var(EXPECT).expect("the expected error");
    for _ in 0..2 {
        let err = Nvml::builder()
            .lib_path(library().as_os_str())
            .init()
            .map(|_| ())
            .expect_err("the scenario is refused");
        assert_eq!(format!("{err:?}"), expect);
    }
}

/// Gantry's own way: `Nvml::init()` and `NvmlLib::new("libnvidia-ml.so.1")` find the
/// fake through a link of that name on `LD_LIBRARY_PATH`.
#[test]
fn loads_as_libnvidia_ml() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("scenario.json");
    write(&path, &two_gpus());
    std::os::unix::fs::symlink(library(), dir.path().join("libnvidia-ml.so.1")).expect("link");
    let mut cmd = child_command("child_loads_as_libnvidia_ml", Some(&path), "");
    cmd.env("LD_LIBRARY_PATH", dir.path());
    let out = run(cmd);
    assert!(library_messages(&out).is_empty());
}

#[test]
fn child_loads_as_libnvidia_ml() {
    if child().is_none() {
        return;
    }
    let nvml = Nvml::init().expect("libnvidia-ml.so.1 from LD_LIBRARY_PATH");
    assert_eq!(nvml.device_count().expect("count"), 2);
    // SAFETY: the same library nvml-wrapper loaded and initialised above.
    let lib = unsafe { NvmlLib::new("libnvidia-ml.so.1") }.expect("raw NVML");
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    let mut max = 0;
    // SAFETY: a live handle of this library and a valid out-pointer.
    let code = unsafe { lib.nvmlDeviceGetMaxMigDeviceCount(d0.handle(), &mut max) };
    assert_eq!((code, max), (SUCCESS, 7));
}

#[test]
fn child_answers_through_nvml_wrapper() {
    let Some(path) = child() else { return };
    let nvml = init();
    // SAFETY: the same library nvml-wrapper loaded and initialised above.
    let lib = unsafe { NvmlLib::new(library()) }.expect("raw NVML");
    inventory(&nvml);
    telemetry(&nvml);
    health(&nvml, &lib);
    mig(&nvml, &lib);
    xid_events(&nvml, &path);
    rewrites(&nvml, &path);
    nvml.shutdown().expect("shutdown");
    let mut count = 0;
    // SAFETY: a valid out-pointer; NVML is shut down, so the call answers UNINITIALIZED.
    assert_eq!(
        unsafe { lib.nvmlDeviceGetCount_v2(&mut count) },
        UNINITIALIZED
    );
}

fn inventory(nvml: &Nvml) {
    assert_eq!(nvml.sys_driver_version().expect("driver"), "550.54.15");
    assert_eq!(nvml.device_count().expect("count"), 2);
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    assert_eq!(d0.name().expect("name"), A100);
    assert_eq!(d0.uuid().expect("uuid"), UUID0);
    assert_eq!(d0.index().expect("index"), 0);
    let mem = d0.memory_info().expect("memory");
    assert_eq!((mem.total, mem.used), (81920 << 20, 1000 << 20));
    assert_eq!(mem.free, mem.total - mem.used);
    assert_eq!(d0.pci_info().expect("pci").bus_id, "00000000:07:00.0");
    let link = d0.link_wrapper_for(0);
    assert!(link.is_active().expect("link 0"));
    let remote = link.remote_pci_info().expect("remote");
    assert_eq!(remote.bus_id, "00000000:08:00.0");
    assert!(!d0.link_wrapper_for(1).is_active().expect("link 1"));
    assert!(matches!(
        d0.link_wrapper_for(18).is_active(),
        Err(NvmlError::InvalidArg)
    ));
    let d1 = nvml.device_by_uuid(UUID1).expect("GPU 1 by uuid");
    assert_eq!(d1.index().expect("index"), 1);
    let by_bus = nvml
        .device_by_pci_bus_id("00000000:08:00.0")
        .expect("by bus");
    // SAFETY: comparing handle values only.
    assert_eq!(unsafe { by_bus.handle() }, unsafe { d1.handle() });
    assert!(matches!(
        nvml.device_by_index(2),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(
        nvml.device_by_uuid("GPU-none"),
        Err(NvmlError::NotFound)
    ));
}

fn telemetry(nvml: &Nvml) {
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    let u = d0.utilization_rates().expect("utilization");
    assert_eq!((u.gpu, u.memory), (40, 20));
    let procs = d0.running_compute_processes().expect("processes");
    let seen: Vec<_> = procs
        .iter()
        .map(|p| (p.pid, p.used_gpu_memory.clone(), p.gpu_instance_id))
        .collect();
    assert_eq!(
        seen,
        vec![
            (1234, UsedGpuMemory::Used(1000 << 20), None),
            (4321, UsedGpuMemory::Used(500 << 20), Some(0)),
        ]
    );
    let d1 = nvml.device_by_index(1).expect("GPU 1");
    assert!(d1.running_compute_processes().expect("none").is_empty());
    let first = d0.process_utilization_stats(None).expect("samples");
    assert_eq!(first.len(), 2);
    assert_eq!(
        (first[0].pid, first[0].sm_util, first[0].mem_util),
        (1234, 50, 10)
    );
    let last = first.iter().map(|s| s.timestamp).max().expect("a sample");
    let next = d0.process_utilization_stats(last).expect("newer samples");
    assert!(next.iter().all(|s| s.timestamp > last));
    assert!(matches!(
        d0.process_utilization_stats(u64::MAX),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(
        d1.process_utilization_stats(None),
        Err(NvmlError::NotFound)
    ));
}

fn health(nvml: &Nvml, lib: &NvmlLib) {
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    let ecc = d0.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
    assert_eq!(ecc.expect("ecc"), 2);
    assert!(d0.are_pages_pending_retired().expect("pending pages"));
    let d1 = nvml.device_by_index(1).expect("GPU 1");
    assert!(!d1.are_pages_pending_retired().expect("pending pages"));
    let (mut corr, mut unc, mut pending, mut failure) = (0, 0, 0, 0);
    // SAFETY: a live handle of this library and four valid out-pointers.
    let code = unsafe {
        lib.nvmlDeviceGetRemappedRows(d0.handle(), &mut corr, &mut unc, &mut pending, &mut failure)
    };
    assert_eq!((code, corr, unc, pending, failure), (SUCCESS, 1, 3, 1, 0));
}

fn mig(nvml: &Nvml, lib: &NvmlLib) {
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    let mode = d0.mig_mode().expect("MIG mode");
    assert_eq!((mode.current, mode.pending), (1, 1));
    let d1 = nvml.device_by_index(1).expect("GPU 1");
    assert!(matches!(d1.mig_mode(), Err(NvmlError::NotSupported)));
    // SAFETY: a live handle of this library.
    let parent = unsafe { d0.handle() };
    let mut max = 0;
    // SAFETY: a live handle and a valid out-pointer.
    assert_eq!(
        unsafe { lib.nvmlDeviceGetMaxMigDeviceCount(parent, &mut max) },
        SUCCESS
    );
    assert_eq!(max, 7);
    let slot = |i: u32| {
        let mut handle: nvmlDevice_t = std::ptr::null_mut();
        // SAFETY: a live handle and a valid out-pointer.
        let code = unsafe { lib.nvmlDeviceGetMigDeviceHandleByIndex(parent, i, &mut handle) };
        (code, handle)
    };
    assert_eq!(slot(1).0, NOT_FOUND);
    assert_eq!(slot(7).0, INVALID_ARGUMENT);
    let (code, handle) = slot(0);
    assert_eq!(code, SUCCESS);
    // SAFETY: a handle this NVML just gave; `nvml` outlives `m`.
    let m = unsafe { Device::new(handle, nvml) };
    assert_eq!(m.name().expect("name"), format!("{A100} MIG 1g.10gb"));
    assert_eq!(m.uuid().expect("uuid"), MIG0);
    assert_eq!(m.memory_info().expect("memory").total, 9856 << 20);
    assert_eq!(
        m.running_compute_processes().expect("processes")[0].pid,
        4321
    );
    let (mut is_mig, mut gi, mut ci, mut up): (u32, u32, u32, nvmlDevice_t) =
        (0, 9, 9, std::ptr::null_mut());
    // SAFETY: live handles and valid out-pointers.
    unsafe {
        assert_eq!(
            lib.nvmlDeviceIsMigDeviceHandle(handle, &mut is_mig),
            SUCCESS
        );
        assert_eq!(lib.nvmlDeviceGetGpuInstanceId(handle, &mut gi), SUCCESS);
        assert_eq!(lib.nvmlDeviceGetComputeInstanceId(handle, &mut ci), SUCCESS);
        assert_eq!(
            lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle, &mut up),
            SUCCESS
        );
        assert_eq!(
            lib.nvmlDeviceIsMigDeviceHandle(parent, &mut is_mig),
            SUCCESS
        );
    }
    assert_eq!((gi, ci, up), (0, 0, parent));
    assert_eq!(is_mig, 0, "the parent is not a MIG handle");
    let by_uuid = nvml.device_by_uuid(MIG0).expect("MIG by uuid");
    // SAFETY: comparing handle values only.
    assert_eq!(unsafe { by_uuid.handle() }, handle);
}

fn xid_events(nvml: &Nvml, path: &Path) {
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    let d1 = nvml.device_by_index(1).expect("GPU 1");
    let types = d0.supported_event_types().expect("event types");
    assert!(types.contains(EventTypes::CRITICAL_XID_ERROR));
    let set = nvml.create_event_set().expect("event set");
    let set = d0
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .expect("register GPU 0");
    let ev = set.wait(2000).expect("the pending Xid");
    assert_eq!(ev.event_data, Some(XidError::Value(79)));
    assert_eq!(ev.device.index().expect("index"), 0);
    assert!(matches!(set.wait(50), Err(NvmlError::Timeout)));
    // A second set does not get it again: once per process.
    let other = nvml.create_event_set().expect("event set");
    let other = d0
        .register_events(EventTypes::CRITICAL_XID_ERROR, other)
        .expect("register GPU 0");
    assert!(matches!(other.wait(50), Err(NvmlError::Timeout)));
    // Xids written while a wait is under way arrive during it; one of an unregistered
    // GPU waits until that GPU is registered.
    let mut next = two_gpus();
    next["xid_events"] = serde_json::json!([
        {"id": 1, "gpu": 0, "xid": 79},
        {"id": 2, "gpu": 1, "xid": 999},
        {"id": 3, "gpu": 0, "xid": 12345}
    ]);
    let writer = {
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            write(&path, &next);
        })
    };
    let ev = set.wait(5000).expect("the Xid written meanwhile");
    writer.join().expect("writer");
    assert_eq!(ev.event_data, Some(XidError::Value(12345)));
    assert!(matches!(set.wait(50), Err(NvmlError::Timeout)));
    let set = d1
        .register_events(EventTypes::CRITICAL_XID_ERROR, set)
        .expect("register GPU 1");
    let ev = set.wait(1000).expect("GPU 1's Xid");
    assert_eq!(
        ev.event_data,
        Some(XidError::Unknown),
        "999 is NVML's unknown"
    );
    assert_eq!(ev.device.index().expect("index"), 1);
    assert!(matches!(set.wait(0), Err(NvmlError::Timeout)));
}

fn rewrites(nvml: &Nvml, path: &Path) {
    let d0 = nvml.device_by_index(0).expect("GPU 0");
    // SAFETY: comparing handle values only.
    let before = unsafe { d0.handle() };
    let mut next = two_gpus();
    next["devices"][0]["utilization"]["gpu"] = 77.into();
    write(path, &next);
    assert_eq!(d0.utilization_rates().expect("utilization").gpu, 77);
    let again = nvml.device_by_index(0).expect("GPU 0");
    // SAFETY: comparing handle values only.
    assert_eq!(
        unsafe { again.handle() },
        before,
        "handles outlive rewrites"
    );
    // A refused rewrite: the last good scenario is still served (reported once).
    write_text(path, r#"{"bogus": 1}"#);
    for _ in 0..3 {
        assert_eq!(d0.utilization_rates().expect("utilization").gpu, 77);
    }
    // A lost GPU: its handle answers GpuLost to everything; the other is unaffected.
    next["devices"][1]["lost"] = true.into();
    write(path, &next);
    let d1 = nvml
        .device_by_index(1)
        .expect("a lost GPU still has a handle");
    assert!(matches!(d1.memory_info(), Err(NvmlError::GpuLost)));
    assert!(matches!(d1.name(), Err(NvmlError::GpuLost)));
    let ecc = d1.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile);
    assert!(matches!(ecc, Err(NvmlError::GpuLost)));
    assert_eq!(d0.name().expect("GPU 0 still answers"), A100);
    // A removed GPU: not found by UUID; its old handle answers GpuLost.
    let devices = next["devices"].as_array_mut().expect("devices");
    devices.truncate(1);
    next["xid_events"] = serde_json::json!([]);
    write(path, &next);
    assert_eq!(nvml.device_count().expect("count"), 1);
    assert!(matches!(
        nvml.device_by_uuid(UUID1),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(d1.uuid(), Err(NvmlError::GpuLost)));
}
