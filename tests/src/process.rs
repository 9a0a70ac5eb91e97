//! Processes: starting `gantry serve` and waiting for its address, and killing whatever task
//! processes a daemon left behind.

use crate::{POLL, gantry_bin};
use std::fs::{self, File};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bound for the daemon to print its address.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether process `pid` exists (zombies included).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// SIGKILLs every process whose command line mentions `dir` (the task shims of a daemon),
/// together with its process group when it leads one.
pub(crate) fn kill_tasks_under(dir: &Path) {
    // Shims are given paths under `<dir>/data/`; the slash keeps other dirs from matching.
    let needle = format!("{}/", dir.display()).into_bytes();
    let me = std::process::id() as i32;
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if pid == me
            || !cmdline
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
        {
            continue;
        }
        // SAFETY: plain syscalls on a pid; a stale pid at worst yields ESRCH.
        unsafe {
            if libc::getpgid(pid) == pid {
                libc::kill(-pid, libc::SIGKILL);
            }
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// A file in a daemon's directory naming the address it listens on (else a free port).
pub(crate) const LISTEN_FILE: &str = "listen";

/// A file in a daemon's directory naming a fake NVML scenario (`crate::fake_nvml`): when
/// it is there, the daemon reads its GPUs through NVML (no `--no-nvml`, no `--gpus`) with
/// `GANTRY_FAKE_NVML_SCENARIO` set to the file it names, at every start.
pub(crate) const FAKE_NVML_FILE: &str = "fake-nvml-scenario";

/// A file in a daemon's directory naming the `gantry` binary it runs (default: this build's).
pub(crate) const BINARY_FILE: &str = "daemon-binary";

/// Starts `gantry serve` on `dir` and waits for the address it prints.
pub(crate) fn spawn(dir: &Path, gpus: u32, generation: u32) -> (Child, String) {
    spawn_prepared(dir, gpus, generation, &|_| {})
}

/// Like [`spawn`], letting `prepare` change the command first (its stdin, a `pre_exec`).
pub(crate) fn spawn_prepared(
    dir: &Path,
    gpus: u32,
    generation: u32,
    prepare: &dyn Fn(&mut Command),
) -> (Child, String) {
    let out_path = dir.join(format!("daemon-{generation}.out"));
    let err_path = dir.join(format!("daemon-{generation}.err"));
    let listen = fs::read_to_string(dir.join(LISTEN_FILE)).unwrap_or_else(|_| "127.0.0.1:0".into());
    // Another build of gantry (an earlier release) when the directory names one.
    let bin = fs::read_to_string(dir.join(BINARY_FILE))
        .map_or_else(|_| gantry_bin().to_path_buf(), std::path::PathBuf::from);
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .arg("--config")
        .arg(dir.join("gantry.toml"))
        .args(["--listen", listen.trim()]);
    match fs::read_to_string(dir.join(FAKE_NVML_FILE)) {
        Ok(scenario) => command.env(crate::fake_nvml::SCENARIO_ENV, scenario.trim()),
        Err(_) => command.args(["--no-nvml", "--gpus", &gpus.to_string()]),
    };
    command
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("cannot create the daemon's stdout file"))
        .stderr(File::create(&err_path).expect("cannot create the daemon's stderr file"));
    prepare(&mut command);
    let mut child = command.spawn().expect("cannot start gantry");
    let deadline = Instant::now() + READY_TIMEOUT;
    let logs = || {
        let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
        format!("stdout:\n{}\nstderr:\n{}", read(&out_path), read(&err_path))
    };
    loop {
        let out = fs::read_to_string(&out_path).unwrap_or_default();
        let addr = out
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .find_map(|l| l.strip_prefix("gantry listening on "))
            .map(str::trim);
        if let Some(addr) = addr {
            return (child, addr.to_string());
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("gantry exited ({status}) before listening\n{}", logs());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gantry did not listen within {READY_TIMEOUT:?}\n{}", logs());
        }
        std::thread::sleep(POLL);
    }
}

/// Unmounts every scratch tmpfs a killed daemon left mounted under `dir` (a task run as
/// another user works in one: `host/node/src/executor/scratch.rs`), so the temporary
/// directory can be removed.
pub(crate) fn unmount_scratch_under(dir: &Path) {
    let Ok(mounts) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = format!("{}/", dir.display());
    for line in mounts.lines() {
        let Some((mount, fs_part)) = line.split_once(" - ") else {
            continue;
        };
        let is_scratch = fs_part.split_whitespace().nth(1) == Some("gantry-work");
        let Some(point) = mount.split_whitespace().nth(4) else {
            continue;
        };
        if !is_scratch || !point.starts_with(&prefix) {
            continue;
        }
        let Ok(c) = std::ffi::CString::new(point) else {
            continue;
        };
        // SAFETY: `c` is a NUL-terminated path that lives across the call.
        unsafe {
            libc::umount2(c.as_ptr(), libc::MNT_DETACH);
        }
    }
}
