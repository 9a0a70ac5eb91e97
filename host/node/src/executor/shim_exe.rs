//! Which executable the daemon starts as a task's shim.
//!
//! The shim's code is in every `gantry` binary (`gantry task-shim`), but an `exec` of that
//! binary, tens of MB with the daemon, the CLI and wasmtime in it, cost about 1.9 ms of CPU
//! per task in relocations and page faults before the shim did anything
//! (`docs/benchmarks/core-loop.md`). `gantry-task-shim`, built beside it from the same code
//! (`host/gantry/src/bin/gantry-task-shim.rs`), is that shim alone. The daemon starts it when
//! it lies next to its own executable and is as well protected: a regular executable file
//! and a directory owned by root or the daemon's user and writable by no one else (the shim
//! runs as root). Otherwise it falls back to its own executable, saying why.
//!
//! Owns: that choice. Does not own the shim's run (`shim`) nor how it is started
//! (`spawn_shim`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file name of the shim-only executable.
pub const SHIM_BINARY: &str = "gantry-task-shim";

/// The shim to start for tasks of the daemon whose executable is `daemon_exe`: the
/// `gantry-task-shim` beside it when it can be trusted, else `daemon_exe` itself.
pub fn shim_executable(daemon_exe: &Path) -> PathBuf {
    let Some(dir) = daemon_exe.parent() else {
        return daemon_exe.to_path_buf();
    };
    let candidate = dir.join(SHIM_BINARY);
    if !candidate.exists() {
        tracing::info!(
            "no {SHIM_BINARY} beside {}: tasks are supervised by `gantry task-shim`",
            daemon_exe.display()
        );
        return daemon_exe.to_path_buf();
    }
    match untrusted_because(&candidate) {
        None => candidate,
        Some(why) => {
            tracing::warn!(
                "not using {}: {why}; tasks are supervised by `gantry task-shim`",
                candidate.display()
            );
            daemon_exe.to_path_buf()
        }
    }
}

/// Why `shim` (and the directory it is in) may not be run as root, if it may not.
fn untrusted_because(shim: &Path) -> Option<String> {
    let own = gantry_private_files::daemon_uid();
    let owned_well =
        |m: &std::fs::Metadata| (m.uid() == 0 || m.uid() == own) && m.mode() & 0o022 == 0;
    let file = match std::fs::metadata(shim) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    if !file.is_file() || file.mode() & 0o100 == 0 {
        return Some("it is not an executable file".into());
    }
    if !owned_well(&file) {
        return Some(format!(
            "it is owned by uid {} with mode {:o}: only root or the daemon's user may own it, and no one else may write it",
            file.uid(),
            file.mode() & 0o7777
        ));
    }
    let dir = shim.parent().and_then(|d| std::fs::metadata(d).ok());
    match dir {
        Some(d) if owned_well(&d) => None,
        Some(d) => Some(format!(
            "its directory is owned by uid {} with mode {:o}: others could replace it",
            d.uid(),
            d.mode() & 0o7777
        )),
        None => Some("cannot read its directory".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path, mode: u32) {
        std::fs::write(path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_shim_beside_the_daemon_is_used_only_when_no_one_else_can_write_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let daemon = dir.path().join("gantry");
        exe(&daemon, 0o755);
        assert_eq!(shim_executable(&daemon), daemon, "none beside it");
        let shim = dir.path().join(SHIM_BINARY);
        exe(&shim, 0o755);
        assert_eq!(shim_executable(&daemon), shim);
        exe(&shim, 0o775);
        assert_eq!(shim_executable(&daemon), daemon, "group-writable shim");
        exe(&shim, 0o644);
        assert_eq!(shim_executable(&daemon), daemon, "not executable");
        exe(&shim, 0o755);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(shim_executable(&daemon), daemon, "world-writable directory");
    }
}
