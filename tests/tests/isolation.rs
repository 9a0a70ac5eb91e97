//! Task isolation in a real daemon, with real cgroups: GPU device nodes of other GPUs are
//! fenced off, a task over its memory limit is OOM-killed (the kernel's own count says so)
//! and its job ends `out-of-memory` while others run on, a job runs as its user and its
//! files are that user's, and task cgroups are removed when jobs end, also across a daemon
//! SIGKILL and restart.
//!
//! These tests need root and cgroup v1 controllers (this host and CI are cgroup v1, hybrid).
//! Without either they FAIL, saying which is missing; they never pass without running. On a
//! cgroup v2-only host they fail naming that: the paths they read are v1's.
//!
//! Fake GPUs are character device nodes `195:N` made with `mknod` in a temp dir that
//! `execution.gpu_device_pattern` points to; without the NVIDIA driver, opening one that the
//! cgroup allows fails with ENXIO ("No such device or address"), one that it denies with
//! EPERM ("Operation not permitted").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::root::{V1_CONTROLLERS as CONTROLLERS, open_dir, require_cgroup_v1, require_root};
use gantry_e2e::{Daemon, Serve, WAIT, gpu_set, with_execution_defaults};
use serde_json::{Value, json};
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Fake GPU nodes, a unique cgroup parent, and the daemon config that uses them. Dropping it
/// removes the parent cgroup (after the daemon, declared later, is gone).
struct Setup {
    devices: tempfile::TempDir,
    parent: String,
}

impl Setup {
    /// Fails the test unless it runs as root on a host with the v1 controllers it reads.
    fn new() -> Self {
        require_root("task isolation makes cgroups and device nodes");
        require_cgroup_v1();
        static N: AtomicU32 = AtomicU32::new(0);
        let parent = format!(
            "gantry-e2e-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let devices = tempfile::tempdir().unwrap();
        for i in 0..4u32 {
            let path = CString::new(
                devices
                    .path()
                    .join(format!("nvidia{i}"))
                    .as_os_str()
                    .as_bytes(),
            )
            .unwrap();
            // SAFETY: `path` is NUL-terminated; mknod only reads it.
            let rc =
                unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(195, i)) };
            assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
        }
        Self { devices, parent }
    }

    fn config(&self, run_as_user: bool) -> String {
        format!(
            "[execution]\ncgroups = \"required\"\ncgroup_parent = \"{}\"\n\
             gpu_device_pattern = \"{}/nvidia{{index}}\"\nrun_as_user = {run_as_user}\n",
            self.parent,
            self.devices.path().display()
        )
    }

    /// The memory cgroup directory of task `task` of job `id`.
    fn task_dir(&self, id: u64, task: u32) -> PathBuf {
        PathBuf::from(format!(
            "/sys/fs/cgroup/memory/{}/job-{id}-task-{task}",
            self.parent
        ))
    }

    /// Whether the cgroup of task `task` of job `id` exists in every controller.
    fn task_cgroup_in_every_controller(&self, id: u64, task: u32) -> bool {
        CONTROLLERS.iter().all(|c| {
            Path::new(&format!(
                "/sys/fs/cgroup/{c}/{}/job-{id}-task-{task}",
                self.parent
            ))
            .is_dir()
        })
    }

    /// Whether the cgroup of task `task` of job `id` exists in any controller.
    fn task_cgroup_exists(&self, id: u64, task: u32) -> bool {
        CONTROLLERS.iter().any(|c| {
            Path::new(&format!(
                "/sys/fs/cgroup/{c}/{}/job-{id}-task-{task}",
                self.parent
            ))
            .exists()
        })
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        for c in CONTROLLERS {
            let parent = PathBuf::from(format!("/sys/fs/cgroup/{c}/{}", self.parent));
            for entry in fs::read_dir(&parent).into_iter().flatten().flatten() {
                if entry.path().is_dir() {
                    let _ = fs::remove_dir(entry.path());
                }
            }
            let _ = fs::remove_dir(&parent);
        }
    }
}

fn job(d: &Daemon, name: &str, argv: Value, memory_mib: u64, gpus: u32) -> Value {
    json!({
        "name": name,
        "argv": argv,
        "env": {"OUTDIR": d.out_dir()},
        "tasks": [{"count": 1, "gpus": gpus, "gpu_milli": 0, "cpu_milli": 1000, "memory_mib": memory_mib}],
    })
}

fn logs(d: &Daemon, id: u64) -> String {
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{text}");
    text
}

#[test]
fn a_task_cannot_open_the_device_nodes_of_gpus_it_was_not_given() {
    let s = Setup::new();
    let d = Daemon::start_with_config(4, &s.config(false));
    let (_, health) = d.get("/v1/health");
    assert_eq!(health["isolation"]["cgroups"], "v1", "{health}");

    let first = d.submit(&d.blocking_job("first", 1, 1));
    d.wait_state(first, "running");
    let first_gpus = gpu_set(&d.task_env(first, 0)["CUDA_VISIBLE_DEVICES"]);
    assert_eq!(first_gpus, vec![0], "the first job takes GPU 0");

    let dev = s.devices.path().display().to_string();
    let script = format!(
        "echo \"visible=$CUDA_VISIBLE_DEVICES\"; for g in 0 1 2 3; do \
         if (exec 3<'{dev}/nvidia'$g) 2>/dev/null; then echo \"nvidia$g opened\"; \
         else (exec 3<'{dev}/nvidia'$g) 2>&1 | sed \"s/.*: /nvidia$g: /\"; fi; done; \
         echo fine > /dev/null && echo devnull-ok; \
         sed -n 's/^[0-9]*:devices:/devices-cgroup=/p' /proc/self/cgroup"
    );
    let second = d.submit(&job(&d, "second", json!(["/bin/sh", "-c", script]), 64, 1));
    d.wait_state(second, "succeeded");
    let log = logs(&d, second);
    assert!(
        log.contains("visible=1\n"),
        "the second job is given GPU 1: {log}"
    );
    for g in [0, 2, 3] {
        assert!(
            log.contains(&format!("nvidia{g}: Operation not permitted")),
            "GPU {g}: {log}"
        );
    }
    assert!(
        log.contains("nvidia1: No such device"),
        "GPU 1 reaches the driver: {log}"
    );
    assert!(log.contains("devnull-ok"), "{log}");
    // The fence is Gantry's: the task ran in its own devices cgroup under the test's parent.
    assert!(
        log.contains(&format!(
            "devices-cgroup=/{}/job-{second}-task-0\n",
            s.parent
        )),
        "the task is in its devices cgroup: {log}"
    );
    assert!(
        !s.task_cgroup_exists(second, 0),
        "cgroup removed after the job"
    );

    d.release(first);
    d.wait_state(first, "succeeded");
    assert!(!s.task_cgroup_exists(first, 0));
}

#[test]
fn a_task_over_its_memory_limit_is_oom_killed_and_others_run_on() {
    let s = Setup::new();
    let d = Daemon::start_with_config(2, &s.config(false));
    let bystander = d.submit(&d.blocking_job("bystander", 1, 0));
    d.wait_state(bystander, "running");

    // The shell outlives the hog (the OOM killer takes the largest process) and reports the
    // kernel's own view from the task's memory cgroup before the daemon removes it.
    let script = "python3 -c 'b = bytearray(256 << 20)'; code=$?; echo \"hog-exit=$code\"; \
                  cg=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); echo \"memory-cgroup=$cg\"; \
                  cat \"/sys/fs/cgroup/memory$cg/memory.limit_in_bytes\" \"/sys/fs/cgroup/memory$cg/memory.oom_control\"; \
                  exit $code";
    let hog = d.submit(&job(&d, "hog", json!(["/bin/sh", "-c", script]), 64, 0));
    let ended = d.wait_state(hog, "failed");
    let log = logs(&d, hog);
    assert!(
        log.contains("hog-exit=137\n"),
        "the hog died of SIGKILL: {log}"
    );
    assert!(
        log.contains(&format!("memory-cgroup=/{}/job-{hog}-task-0\n", s.parent)),
        "the hog ran in its task's memory cgroup: {log}"
    );
    assert!(
        log.contains(&format!("\n{}\n", 64u64 << 20)),
        "the cgroup's limit is the job's 64 MiB: {log}"
    );
    assert!(
        log.lines().any(|l| l == "oom_kill 1"),
        "the kernel counted one OOM kill in the task's cgroup: {log}"
    );
    assert_eq!(ended["end_reason"], "out-of-memory", "{ended}");
    let message = ended["reason"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("64 MiB"),
        "the reason names the limit: {ended}"
    );
    assert_eq!(ended["tasks"][0]["usage"]["oom_killed"], true, "{ended}");
    assert!(!s.task_cgroup_exists(hog, 0));

    let (status, _) = d.get("/v1/health");
    assert_eq!(status, 200, "the daemon keeps answering");
    assert_eq!(
        d.job(bystander)["state"],
        "running",
        "the other task is unaffected"
    );
    d.release(bystander);
    d.wait_state(bystander, "succeeded");
}

#[test]
fn a_job_runs_as_its_user() {
    let s = Setup::new();
    let d = Daemon::start_with_config(1, &s.config(true));
    let (_, health) = d.get("/v1/health");
    assert_eq!(health["isolation"]["run_as_user"], true, "{health}");

    let script = json!([
        "/bin/sh",
        "-c",
        "id -u; id -g; echo \"home=$HOME\"; touch mine && echo wrote"
    ]);
    let work = open_dir();
    let mut spec = job(&d, "as-nobody", script.clone(), 64, 0);
    spec["user"] = json!("nobody");
    spec["workdir"] = json!(work.path());
    let nobody = d.submit(&spec);
    d.wait_state(nobody, "succeeded");
    let log = logs(&d, nobody);
    assert!(log.starts_with("65534\n65534\n"), "runs as nobody: {log}");
    assert!(
        log.contains("wrote"),
        "it can write in its working directory: {log}"
    );
    let mine = fs::metadata(work.path().join("mine")).expect("the job's file");
    assert_eq!(
        (mine.uid(), mine.gid()),
        (65534, 65534),
        "the file the job wrote is nobody's"
    );
    fs::remove_file(work.path().join("mine")).unwrap();

    // A job without identity (TCP, no token) runs as the fallback user (nobody), whatever
    // user it names.
    spec["user"] = json!("gantry-no-such-user");
    let stranger = d.submit(&spec);
    d.wait_state(stranger, "succeeded");
    assert!(logs(&d, stranger).starts_with("65534\n"));
    let theirs = fs::metadata(work.path().join("mine")).expect("the stranger's file");
    assert_eq!(theirs.uid(), 65534, "the fallback user's file");

    // Root is refused at submit (this is the cluster's only node), not requeued and failed.
    spec["user"] = json!("root");
    let (status, body) = d.post("/v1/jobs", &spec);
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("user")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("jobs may not run as root (execution.allow_root)"),
        "{body}"
    );
}

#[test]
fn task_cgroups_are_removed_also_across_a_daemon_sigkill() {
    let s = Setup::new();
    let mut d = Daemon::start_with_config(2, &s.config(false));
    let survivor = d.submit(&d.blocking_job("survivor", 1, 0));
    d.wait_state(survivor, "running");
    let shell = d.task_env(survivor, 0)["TASK_SHELL_PID"].clone();
    let procs = fs::read_to_string(s.task_dir(survivor, 0).join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|p| p == shell),
        "the task runs in its cgroup: {procs}"
    );
    assert!(
        s.task_cgroup_in_every_controller(survivor, 0),
        "the task has a cgroup in each of {CONTROLLERS:?}"
    );

    d.restart_after_sigkill();
    d.wait_state(survivor, "running");
    assert!(
        s.task_cgroup_exists(survivor, 0),
        "the adopted task keeps its cgroup"
    );
    d.release(survivor);
    d.wait_state(survivor, "succeeded");
    d.wait_for("the adopted task's cgroup to go", WAIT, || {
        (!s.task_cgroup_exists(survivor, 0)).then_some(())
    });
    assert!(
        !s.task_dir(survivor, 0).exists(),
        "no memory cgroup left for the adopted task"
    );
}

#[test]
fn execution_defaults_merge_into_a_tests_own_table() {
    let plain = with_execution_defaults("[plugins]\ndeadline_ms = 100");
    assert!(
        plain.ends_with("[execution]\nrun_as_user = false\ncgroups = \"off\"\n"),
        "{plain}"
    );
    let own = with_execution_defaults("[execution]\ncgroups = \"required\"\n[auth]\nx = 1");
    assert_eq!(
        own,
        "[execution]\nrun_as_user = false\ncgroups = \"required\"\n[auth]\nx = 1\n"
    );
    assert_eq!(own.matches("[execution]").count(), 1);
}

#[test]
fn without_usable_cgroups_auto_says_so_and_required_refuses_to_start() {
    let s = Setup::new();
    // The control: with a parent it can make, `required` starts and reports v1 cgroups; the
    // refusal below is then the unusable parent's doing, not this host's.
    let usable = Daemon::start_with_config(1, &s.config(false));
    let (_, health) = usable.get("/v1/health");
    assert_eq!(health["isolation"]["cgroups"], "v1", "{health}");
    assert!(
        Path::new(&format!("/sys/fs/cgroup/memory/{}", s.parent)).is_dir(),
        "the daemon made its parent cgroup"
    );
    drop(usable);
    // A parent below a file cannot be created: cgroups are unusable under it.
    let unusable = "[execution]\ncgroup_parent = \"cgroup.procs/gantry\"\nrun_as_user = false\n";
    let mut auto = Serve::start("127.0.0.1:0", &format!("{unusable}cgroups = \"auto\"\n"));
    assert_eq!(auto.wait_listening_or_exit(), None, "{}", auto.stderr());
    let log = auto.stdout() + &auto.stderr();
    assert!(
        log.contains("cgroups unavailable (cannot create the parent cgroup cgroup.procs/gantry")
            && log.contains("tasks run with environment-only isolation"),
        "{log}"
    );
    let mut required = Serve::start(
        "127.0.0.1:0",
        &format!("{unusable}cgroups = \"required\"\n"),
    );
    let status = required
        .wait_listening_or_exit()
        .expect("it must not start");
    assert!(!status.success());
    assert!(
        required
            .stderr()
            .contains("execution.cgroups = \"required\" but cgroups are unavailable"),
        "{}",
        required.stderr()
    );
}
