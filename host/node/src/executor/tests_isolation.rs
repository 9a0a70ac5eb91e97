//! Tests of task isolation with real cgroups, real device nodes and real processes: a task's
//! cgroup gets its limits and is removed when the task ends, GPU device nodes of other GPUs
//! cannot be opened, the OOM killer is reported, leftovers are killed, `adopt` and
//! `sweep_cgroups` clean up after a restart, and the BPF device program works on a cgroup v2
//! hierarchy.
//!
//! Every test here needs root: without it, it FAILS saying so (CI runs the unit tests as
//! root); none passes without running. The cgroup tests use the host's cgroup version (v1
//! controllers, or v2 when the host is unified) and fail when it has neither. The BPF test
//! needs a cgroup v2 hierarchy, the unified mount of a hybrid host (CI's) or a v2 host's
//! root, and fails without one.
//!
//! Owns only tests; shared helpers come from `tests.rs`.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::tests::{
    ChildGuard, GroupGuard, SEP, SHIM_ARGS_ENV, launch, next_event, read, real_shim, spec,
    wait_for_log, wait_until,
};
use super::*;
use crate::config_execution::{CgroupMode, ExecutionConfig};

/// Fails the test unless it runs as root, saying `why` it needs root.
fn require_root(why: &str) {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    assert!(root, "{why} and needs root (CI runs it as root)");
}

/// A unique parent cgroup for one test, removed (with anything left in it) when dropped.
pub(super) struct Parent {
    name: String,
    version: CgroupVersion,
}

impl Parent {
    fn new(version: CgroupVersion) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Self {
            name: format!("gantry-unit-{}-{n}", std::process::id()),
            version,
        }
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        for name in cgroup::task_cgroups(self.version, &self.name) {
            TaskCgroup::open(self.version, &name).destroy();
        }
        TaskCgroup::open(self.version, &self.name).destroy();
    }
}

/// Four fake GPU device nodes `nvidia0..3` (char 195:N) in `dir`; their pattern.
fn fake_gpus(dir: &Path) -> String {
    for i in 0..4u32 {
        let path = CString::new(dir.join(format!("nvidia{i}")).as_os_str().as_bytes()).unwrap();
        // SAFETY: `path` is NUL-terminated; mknod only reads it.
        let rc =
            unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(195, i)) };
        assert_eq!(rc, 0, "mknod: {}", std::io::Error::last_os_error());
    }
    format!("{}/nvidia{{index}}", dir.display())
}

/// An executor with cgroups under a fresh parent; fails the test without root or cgroups.
fn isolated(dir: &Path) -> (Executor, UnboundedReceiver<TaskEvent>, Parent) {
    isolated_with(dir, MigCaps::none())
}

/// As [`isolated`], fencing MIG slices by `caps`.
pub(super) fn isolated_with(
    dir: &Path,
    caps: MigCaps,
) -> (Executor, UnboundedReceiver<TaskEvent>, Parent) {
    require_root("this test makes cgroups and device nodes");
    let version = if cgroups_rs::hierarchies::is_cgroup2_unified_mode() {
        CgroupVersion::V2
    } else {
        CgroupVersion::V1
    };
    // The file a mounted hierarchy of that version has (a v1 host's memory controller).
    let probe = match version {
        CgroupVersion::V1 => "/sys/fs/cgroup/memory/cgroup.procs",
        CgroupVersion::V2 => "/sys/fs/cgroup/cgroup.controllers",
    };
    assert!(
        Path::new(probe).exists(),
        "this test needs {version:?} cgroups and the host has no {probe} (CI runs it on a \
         cgroup v1 hybrid host)"
    );
    let parent = Parent::new(version);
    let config = ExecutionConfig {
        cgroups: CgroupMode::Required,
        cgroup_parent: parent.name.clone(),
        pids_max: 64,
        gpu_device_pattern: fake_gpus(dir),
        run_as_user: false,
        ..ExecutionConfig::default()
    };
    let isolation = Isolation::setup(&config, vec![0, 1, 2, 3])
        .unwrap_or_else(|e| panic!("this test needs usable {version:?} cgroups: {e}"))
        .with_mig_caps(caps);
    let (tx, rx) = unbounded_channel();
    let exec = Executor::with_isolation(real_shim(dir), tx, isolation);
    (exec, rx, parent)
}

fn cgroup_file(version: CgroupVersion, controller: &str, name: &str, file: &str) -> PathBuf {
    match version {
        CgroupVersion::V1 => Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(name)
            .join(file),
        CgroupVersion::V2 => Path::new("/sys/fs/cgroup").join(name).join(file),
    }
}

#[tokio::test]
async fn task_cgroup_has_its_limits_fences_gpus_and_is_removed_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx, parent) = isolated(dir.path());
    let d = dir.path().display().to_string();
    let script = format!(
        "for g in 0 1; do (exec 3<'{d}/nvidia'$g) 2>>'{d}/opens' || true; done; \
         echo ok > /dev/null && echo devnull-ok; echo ready; \
         while [ ! -e '{d}/release' ]; do sleep 0.05; done"
    );
    let mut l = spec(dir.path(), &["sh", "-c", &script]);
    (l.gpus, l.memory_mib, l.cpu_milli) = (vec![1], 64, 500);
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "ready").await;

    let name = cgroup::task_name(&parent.name, 7, 2);
    let v = parent.version;
    let file = |c: &str, f: &str| read(&cgroup_file(v, c, &name, f)).trim().to_owned();
    if v == CgroupVersion::V1 {
        assert_eq!(
            file("memory", "memory.limit_in_bytes"),
            (64u64 << 20).to_string()
        );
        assert_eq!(
            file("memory", "memory.memsw.limit_in_bytes"),
            (64u64 << 20).to_string()
        );
        assert_eq!(file("cpu", "cpu.cfs_quota_us"), "50000");
        assert_eq!(file("cpu", "cpu.cfs_period_us"), "100000");
    } else {
        assert_eq!(file("memory", "memory.max"), (64u64 << 20).to_string());
        assert_eq!(file("cpu", "cpu.max"), "50000 100000");
    }
    assert_eq!(file("pids", "pids.max"), "64");
    let procs = file("pids", "cgroup.procs");
    assert!(!procs.is_empty(), "the command is in the cgroup");
    assert!(
        !procs.lines().any(|p| p == task.pid.to_string()),
        "the shim stays outside: {procs}"
    );
    let opens = read(&dir.path().join("opens"));
    let lines: Vec<&str> = opens.lines().collect();
    assert_eq!(lines.len(), 2, "{opens}");
    assert!(
        lines[0].contains("Operation not permitted"),
        "GPU 0 is fenced: {opens}"
    );
    assert!(
        lines[1].contains("No such device"),
        "GPU 1 reaches the (absent) driver: {opens}"
    );
    assert!(read(&l.log_path).contains("devnull-ok"));

    fs::write(dir.path().join("release"), "").unwrap();
    let event = next_event(&mut rx).await;
    assert_eq!(event.exit, TaskExit::Exited(0));
    assert!(event.usage.memory_peak_mib > 0, "{:?}", event.usage);
    assert!(!event.usage.oom_killed);
    assert!(
        !TaskCgroup::open(v, &name).exists(),
        "cgroup removed after the task"
    );
}

#[tokio::test]
async fn oom_kill_is_reported_in_the_usage() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx, parent) = isolated(dir.path());
    let mut l = spec(
        dir.path(),
        &["/usr/bin/python3", "-c", "b = bytearray(256 << 20)"],
    );
    l.memory_mib = 64;
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    let event = next_event(&mut rx).await;
    assert_eq!(
        event.exit,
        TaskExit::Signaled(libc::SIGKILL),
        "{}",
        read(&l.log_path)
    );
    // The shim never reports OOM itself: this is the kernel's `oom_kill` count of the task's
    // cgroup (memory.oom_control on v1, memory.events on v2), read before it was removed.
    assert!(event.usage.oom_killed, "{:?}", event.usage);
    assert!(event.usage.memory_peak_mib >= 60, "{:?}", event.usage);
    // The shim's ru_maxrss may count mapped file pages the cgroup did not charge.
    assert!(event.usage.memory_peak_mib < 128, "{:?}", event.usage);
    let name = cgroup::task_name(&parent.name, 7, 2);
    assert!(!TaskCgroup::open(parent.version, &name).exists());
}

#[tokio::test]
async fn leftover_processes_are_killed_with_the_cgroup() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx, parent) = isolated(dir.path());
    let pid_file = dir.path().join("escapee.pid");
    let cgroup_file = dir.path().join("escapee.cgroup");
    // setsid leaves the task's process group, so only the cgroup still holds it.
    let script = format!(
        "setsid sleep 1000 & echo $! > '{}'; cat /proc/$!/cgroup > '{}'",
        pid_file.display(),
        cgroup_file.display()
    );
    let l = spec(dir.path(), &["sh", "-c", &script]);
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Exited(0));
    let escapee: u32 = read(&pid_file).trim().parse().unwrap();
    let name = cgroup::task_name(&parent.name, 7, 2);
    let cgroups = read(&cgroup_file);
    assert!(
        cgroups.lines().any(|l| l.ends_with(&format!(":/{name}"))),
        "the escaped process was in the task's cgroup {name}: {cgroups}"
    );
    assert!(
        wait_until(|| !signals::process_alive(escapee)).await,
        "the escaped process {escapee} survived its task"
    );
}

#[tokio::test]
async fn adopt_and_sweep_clean_up_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx, parent) = isolated(dir.path());
    let v = parent.version;
    // A shim "left by the previous daemon": the real shim in its own cgroup, started directly.
    let name = cgroup::task_name(&parent.name, 7, 2);
    let limits = cgroup::Limits {
        memory_mib: 128,
        cpu_milli: 1000,
        pids_max: 64,
        denied: vec![],
    };
    let cg = TaskCgroup::create(v, &name, &limits).unwrap();
    let l = spec(
        dir.path(),
        &[
            "sh",
            "-c",
            &format!(
                "echo ready; while [ ! -e '{}/release' ]; do sleep 0.05; done",
                dir.path().display()
            ),
        ],
    );
    let args = ShimArgs {
        exit_file: l.exit_path.clone(),
        log: l.log_path.clone(),
        log_max_bytes: None,
        env_file: None,
        workdir: None,
        cgroup_procs: cg.procs_files(),
        ids: None,
        input: super::task_input::TaskInput::None,
        input_fifo: None,
        stdout_file: None,
        stderr_file: None,
        argv_file: None,
        argv: l.argv.clone(),
        container: None,
    };
    // The test binary acts as the shim (see `tests::shim_entry`); the exit path, given as an
    // extra test filter, puts it on the command line where `adopt` recognises its shim.
    let joined = shim_args::build(&args).join(&SEP.to_string());
    let mut shim = std::process::Command::new(std::env::current_exe().unwrap());
    shim.args([
        "--exact",
        "executor::tests::shim_entry",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .arg(&l.exit_path)
    .env(SHIM_ARGS_ENV, joined);
    // A session of its own, as the executor starts a shim (adoption checks it).
    // SAFETY: new_session_for_child makes only async-signal-safe calls.
    unsafe {
        shim.pre_exec(crate::process_hygiene::new_session_for_child);
    }
    let shim = ChildGuard(shim.spawn().unwrap());
    wait_for_log(&l, "ready").await;
    // A stray cgroup of a task that ended while the daemon was down, with a process in it.
    let stray_name = cgroup::task_name(&parent.name, 9, 0);
    let stray = TaskCgroup::create(v, &stray_name, &limits).unwrap();
    let join = child::ChildSetup::new(&stray.procs_files(), None, None).unwrap();
    let mut sleeper = std::process::Command::new("sleep");
    sleeper.arg("1000");
    // SAFETY: `apply` makes only async-signal-safe calls.
    unsafe {
        sleeper.pre_exec(move || join.apply());
    }
    let sleeper = ChildGuard(sleeper.spawn().unwrap());

    exec.adopt(7, 2, shim.0.id(), l.exit_path.clone());
    exec.sweep_cgroups();
    assert!(!stray.exists(), "the stray cgroup is swept");
    assert!(
        cg.exists(),
        "the adopted task keeps its cgroup while it runs"
    );
    let sleeper_pid = sleeper.0.id();
    assert!(wait_until(|| !signals::process_alive(sleeper_pid)).await);

    fs::write(dir.path().join("release"), "").unwrap();
    let event = next_event(&mut rx).await;
    assert_eq!(
        (event.job_id, event.task_index, event.exit),
        (7, 2, TaskExit::Exited(0))
    );
    assert!(event.usage.memory_peak_mib > 0, "{:?}", event.usage);
    assert!(!cg.exists(), "adopt removes the cgroup when the task ends");
}

/// The BPF device program on a real cgroup v2 hierarchy: on a hybrid host the v2 tree at
/// /sys/fs/cgroup/unified has no controllers, but device programs still apply to its cgroups.
#[test]
fn bpf_device_program_fences_devices_on_cgroup_v2() {
    let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.subtree_control").exists());
    require_root("attaching a BPF device program");
    let root = root.unwrap_or_else(|| {
        panic!(
            "this test needs a cgroup v2 hierarchy (/sys/fs/cgroup/unified on a hybrid host, as \
             CI's, or /sys/fs/cgroup on a v2 host) and this host has none"
        )
    });
    let dir = tempfile::tempdir().unwrap();
    fake_gpus(dir.path());
    let cg = root.join(format!("gantry-bpf-test-{}", std::process::id()));
    fs::create_dir(&cg).unwrap();
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = fs::remove_dir(&self.0);
        }
    }
    let _remove = Remove(cg.clone());
    let full = devices::char_device(Path::new("/dev/full")).unwrap();
    let denied = [
        DeviceId {
            major: 195,
            minor: 0,
        },
        DeviceId {
            major: 195,
            minor: 2,
        },
        full,
    ];
    bpf::attach_device_filter(&cg, &denied).unwrap();

    let d = dir.path().display();
    let script = format!(
        "for f in '{d}/nvidia0' '{d}/nvidia1' '{d}/nvidia2' /dev/full /dev/zero; do \
         if (exec 3<\"$f\") 2>/dev/null; then echo \"$f ok\"; else (exec 3<\"$f\") 2>&1 | sed 's/.*: //'; fi; done"
    );
    let join = child::ChildSetup::new(&[cg.join("cgroup.procs")], None, None).unwrap();
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &script]);
    // SAFETY: `apply` makes only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || join.apply());
    }
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].contains("Operation not permitted"),
        "nvidia0 denied: {text}"
    );
    assert!(
        lines[1].contains("No such device"),
        "nvidia1 allowed (no driver): {text}"
    );
    assert!(
        lines[2].contains("Operation not permitted"),
        "nvidia2 denied: {text}"
    );
    assert!(
        lines[3].contains("Operation not permitted"),
        "/dev/full denied: {text}"
    );
    assert_eq!(lines[4], "/dev/zero ok", "{text}");
}
