//! GPUs in container images (issue 29), end to end: a node's CDI specification gives a task
//! in an image the device node of the GPU it was given (at the spec's path, `/dev/nvidiaN`),
//! never another GPU's, with the spec's common mount (read-only) and variable; for one task
//! and for each rank of a gang of two.
//!
//! Fake GPUs are character device nodes `195:N` made with `mknod` in a temp dir, as in
//! `tests/tests/isolation.rs`, named by `execution.gpu_device_pattern` and by the spec's
//! `hostPath`s. Without the NVIDIA driver, opening the task's own node inside fails with
//! ENXIO ("No such device or address": allowed, it reaches the missing driver); the other
//! GPU's node does not exist inside.
//!
//! Needs root (runc, mknod, cgroups) and runc, umoci, busybox-static (`.ci/run` installs
//! them): without them the test fails, it never skips.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::images::build_image;
use gantry_e2e::root::{CgroupParent, open_dir, require_root};
use gantry_e2e::{Daemon, TERMINAL, WAIT};
use serde_json::{Value, json};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// What each task prints: its device nodes, whether it can open GPU 0's and GPU 1's, the
/// spec's library, whether it can write it, and the variables.
const PROBE: &str = r#"ls /dev
for f in /dev/nvidia[0-9]*; do echo "node $f"; done
for g in 0 1; do echo "open nvidia$g: $( (exec 3</dev/nvidia$g) 2>&1 )"; done
echo "lib: $(cat /usr/lib/libcuda-fake.so)"
(echo x >> /usr/lib/libcuda-fake.so) 2>/dev/null && echo LIB-WRITABLE
echo "cdi=$GANTRY_TEST_CDI visible=$CUDA_VISIBLE_DEVICES""#;

/// Makes `dir/nvidia0` and `dir/nvidia1`, character devices `195:0` and `195:1`.
fn fake_gpus(dir: &Path) {
    for i in 0..2u32 {
        let path = CString::new(dir.join(format!("nvidia{i}")).as_os_str().as_bytes()).unwrap();
        // SAFETY: `path` is NUL-terminated; mknod only reads it.
        let rc =
            unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(195, i)) };
        assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    }
}

/// A CDI spec naming the fake GPUs "0" and "1" at `/dev/nvidiaN` inside, with a common
/// mount of `lib` (no `ro` asked: read-only by default) and a variable.
fn write_spec(cdi: &Path, dev: &Path, lib: &Path) {
    let device = |i: u32| {
        json!({"name": i.to_string(), "containerEdits": {"deviceNodes": [
            {"path": format!("/dev/nvidia{i}"), "hostPath": dev.join(format!("nvidia{i}"))}]}})
    };
    let spec = json!({
        "cdiVersion": "0.6.0",
        "kind": "nvidia.com/gpu",
        "devices": [device(0), device(1)],
        "containerEdits": {
            "env": ["GANTRY_TEST_CDI=yes"],
            "mounts": [{"hostPath": lib, "containerPath": "/usr/lib/libcuda-fake.so",
                        "options": ["nosuid", "nodev", "bind"]}]
        }
    });
    std::fs::create_dir_all(cdi).unwrap();
    std::fs::write(cdi.join("nvidia.json"), spec.to_string()).unwrap();
}

fn gpu_job(image: &str, count: u32) -> Value {
    json!({"name": "gpus-in-image", "image": image, "argv": ["sh", "-c", PROBE],
           "tasks": [{"count": count, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]})
}

/// Waits for job `id` to end and asserts it succeeded, showing its tasks' logs otherwise.
fn succeeded(d: &Daemon, id: u64, tasks: usize) -> Value {
    let job = d.wait_for(&format!("job {id} to end"), WAIT, || {
        let job = d.job(id);
        TERMINAL
            .contains(&job["state"].as_str().unwrap_or_default())
            .then_some(job)
    });
    if job["state"] != "succeeded" {
        let logs: Vec<String> = (0..tasks)
            .map(|t| d.get_text(&format!("/v1/jobs/{id}/logs?task={t}")).1)
            .collect();
        panic!("job {id} did not succeed: {job}\nlogs: {logs:#?}");
    }
    job
}

/// The index of the GPU task `task` of `job` was given.
fn given_gpu(job: &Value, task: usize) -> u64 {
    let gpus = job["tasks"][task]["gpus"]
        .as_array()
        .expect("the task's GPUs");
    assert_eq!(gpus.len(), 1, "{job}");
    gpus[0]["index"].as_u64().expect("a GPU index")
}

/// `log` shows that its task sees GPU `g`'s node and not the other's, the library
/// read-only, the spec's variable and `CUDA_VISIBLE_DEVICES=g`.
fn sees_only(log: &str, g: u64) {
    let other = 1 - g;
    let nodes: Vec<&str> = log.lines().filter(|l| l.starts_with("node ")).collect();
    assert_eq!(nodes, [format!("node /dev/nvidia{g}")], "{log}");
    let open = |i: u64| {
        let prefix = format!("open nvidia{i}: ");
        let line = log.lines().find(|l| l.starts_with(&prefix));
        line.unwrap_or_else(|| panic!("no {prefix}: {log}"))
            .to_string()
    };
    assert!(
        open(g).contains("No such device or address"),
        "its own GPU is allowed and reaches the (missing) driver: {log}"
    );
    assert!(
        open(other).to_lowercase().contains("no such file"),
        "another GPU's node is inside: {log}"
    );
    assert!(log.contains("lib: fake driver library\n"), "{log}");
    assert!(
        !log.contains("LIB-WRITABLE"),
        "the spec's mount is writable: {log}"
    );
    assert!(log.contains(&format!("cdi=yes visible={g}\n")), "{log}");
}

#[test]
fn a_task_in_an_image_gets_its_gpu_from_the_cdi_spec_and_never_another() {
    require_root("runc, mknod and cgroups need root");
    let work = open_dir();
    let (dev, cdi, images) = (
        work.path().join("dev"),
        work.path().join("cdi"),
        work.path().join("images"),
    );
    std::fs::create_dir_all(&dev).unwrap();
    fake_gpus(&dev);
    // Writable by anyone on the host: only the read-only mount keeps the task from it.
    let lib = work.path().join("libcuda-fake.so");
    std::fs::write(&lib, "fake driver library\n").unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
    write_spec(&cdi, &dev, &lib);
    let layout = build_image(&images);
    let image = format!("oci:{}:test", layout.display());
    let parent = CgroupParent::new("gantry-e2e-ctr-gpus");
    let d = Daemon::start_with_config(
        2,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"auto\"\ncgroup_parent = \"{}\"\n\
             gpu_device_pattern = \"{}/nvidia{{index}}\"\n\
             [containers]\nimage_dirs = [\"{}\"]\ncdi_dirs = [\"{}\"]\n",
            parent.0,
            dev.display(),
            images.display(),
            cdi.display()
        ),
    );
    let log = |id: u64, task: usize| d.get_text(&format!("/v1/jobs/{id}/logs?task={task}")).1;

    // One task, one GPU.
    let id = d.submit(&gpu_job(&image, 1));
    let job = succeeded(&d, id, 1);
    sees_only(&log(id, 0), given_gpu(&job, 0));

    // A gang of two ranks in the image, a GPU each: each sees its own only.
    let id = d.submit(&gpu_job(&image, 2));
    let job = succeeded(&d, id, 2);
    let (first, second) = (given_gpu(&job, 0), given_gpu(&job, 1));
    assert_ne!(first, second, "two ranks on one GPU: {job}");
    sees_only(&log(id, 0), first);
    sees_only(&log(id, 1), second);
}
