//! The MIG capability fence with real cgroups, real device nodes and a real process: a task
//! given one MIG slice opens its own slice's capability devices and not another slice's of
//! the same GPU. Needs root and cgroups, and fails without them (as `tests_isolation.rs`).
//!
//! Owns only this test; helpers come from `tests.rs` and `tests_isolation.rs`.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;

use super::tests::{GroupGuard, launch, next_event, read, spec, wait_for_log};
use super::tests_isolation::isolated_with;
use super::*;
use gantry_api::mig::slice_index;
use gantry_api::node::{GpuInfo, MigDevice};

/// The major given to the fake capability devices (unused on a test host).
const CAPS_MAJOR: u32 = 238;

fn slice(slot: u32, gi: u32) -> MigDevice {
    MigDevice {
        parent_index: 0,
        slot,
        gpu_instance: Some(gi),
        compute_instance: Some(0),
        uuid: format!("MIG-test-{slot}"),
        profile: "3g.40gb".into(),
        name: "NVIDIA A100 MIG 3g.40gb".into(),
        memory_mib: 40_000,
    }
}

#[tokio::test]
async fn a_task_given_one_slice_cannot_open_another_slices_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    // GPU 0 in MIG mode: slot 0 is GI 1 (caps 12, 13), slot 1 is GI 2 (caps 21, 22).
    let mut gpu = GpuInfo::configured(0, "NVIDIA A100", 81_920);
    gpu.mig_enabled = true;
    gpu.mig_devices = vec![slice(0, 1), slice(1, 2)];
    let minors =
        "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n";
    let devices = format!("Character devices:\n195 nvidia\n{CAPS_MAJOR} nvidia-caps\n");
    let caps = MigCaps::from_tables(&[gpu], minors, &devices);
    let (exec, mut rx, _parent) = isolated_with(dir.path(), caps);
    for minor in [12u32, 13, 21, 22] {
        let path = CString::new(
            dir.path()
                .join(format!("cap{minor}"))
                .as_os_str()
                .as_bytes(),
        )
        .unwrap();
        // SAFETY: `path` is NUL-terminated; mknod only reads it.
        let rc = unsafe {
            libc::mknod(
                path.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(CAPS_MAJOR, minor),
            )
        };
        assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    }
    let d = dir.path().display().to_string();
    let script = format!(
        "for c in 12 13 21 22; do (exec 3<'{d}/cap'$c) 2>&1 | sed \"s/.*: /$c /\"; done; echo done"
    );
    let mut l = spec(dir.path(), &["sh", "-c", &script]);
    l.gpus = vec![slice_index(0, 0)];
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "done").await;
    let event = next_event(&mut rx).await;
    assert_eq!(event.exit, TaskExit::Exited(0));
    let log = read(&l.log_path);
    // Its own slice's caps reach the (absent) driver; the other slice's are fenced.
    for own in ["12 No such device", "13 No such device"] {
        assert!(log.contains(own), "{own}: {log}");
    }
    for other in ["21 Operation not permitted", "22 Operation not permitted"] {
        assert!(log.contains(other), "{other}: {log}");
    }
    fs::remove_dir_all(dir.path()).ok();
}
