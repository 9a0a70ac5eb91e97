//! Running the CLI as a real local account would: `nobody`, over the daemon's Unix socket
//! (the kernel names the caller), from a directory of that account's own, with exactly the
//! environment given. Used by the first-day and sbatch-compatibility tests (issue 27).
//!
//! Needs root (it switches users); callers say so with `root::require_root` first.

use crate::Daemon;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// A daemon with `gpus` fake GPUs whose tasks run as their users, with its socket reachable
/// by other accounts; the daemon and its socket's path.
pub fn daemon_for_users(gpus: u32) -> (Daemon, PathBuf) {
    let d = Daemon::start_with_config(gpus, "[execution]\nrun_as_user = true\ncgroups = \"off\"\n");
    let root = d
        .out_dir()
        .parent()
        .expect("the daemon's directory")
        .to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
    let socket = root.join("data/gantry.sock");
    (d, socket)
}

/// A directory of nobody's own (mode 0700), as a user's home directory would be.
pub fn nobodys_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).expect("chown");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

/// Writes `text` to `dir/name` as nobody's file (a script a user wrote).
pub fn nobodys_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).expect("write");
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).expect("chown");
    path
}

/// The CLI as nobody, in `dir`, with `env` as its whole environment, on `socket`.
pub fn cli_as_nobody(socket: &Path, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(crate::gantry_bin())
        .arg("--server")
        .arg(format!("unix:{}", socket.display()))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run gantry as nobody")
}

/// The job ids `gantry submit` printed (an array prints one per member), in order.
pub fn submitted_ids(out: &Output) -> Vec<u64> {
    let text = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.parse().ok()))
        .collect();
    assert!(
        !ids.is_empty(),
        "no job id in {text:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ids
}
