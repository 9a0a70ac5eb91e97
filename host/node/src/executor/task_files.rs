//! What a task starts from on disk, the same on the controller's node and on agents: its
//! command (the job's argv, or its script written into the task's directory: run directly
//! when it starts with `#!`, else with `/bin/sh`; the script belongs to the user the task runs
//! as, mode 0600/0700, and is readable by nobody else), and its working directory (the job's
//! own, else the task's directory, or `<dir>/work` owned by the user a task runs as, a bounded
//! tmpfs ([`super::scratch`]), so that the directory the daemon writes logs and exit records
//! into stays the daemon's, a task cannot plant links there, and its writes stay off the
//! daemon's file system). The task's directory and its parent are 0711 and the daemon's:
//! the user reaches its files by name, nobody lists them.
//!
//! Owns: these two rules, and whether a user may enter a given working directory
//! ([`check_enterable`]). Does not own where the directory is (the caller's) or launching.

use super::TaskIdentity;
use std::io;
use std::path::{Path, PathBuf};

/// argv of a task: `argv`, or `script` written to `<dir>/script` (`dir` is created), owned by
/// the user the task runs as (`identity`; the daemon's when `None`).
pub fn command(
    dir: &Path,
    argv: &[String],
    script: Option<&str>,
    identity: Option<&TaskIdentity>,
) -> io::Result<Vec<String>> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(parent) = dir.parent() {
        gantry_private_files::dir_with_mode(parent, gantry_private_files::TRAVERSE_ONLY)?;
    }
    gantry_private_files::dir_with_mode(dir, gantry_private_files::TRAVERSE_ONLY)?;
    let Some(script) = script else {
        return Ok(argv.to_vec());
    };
    let path = dir.join("script");
    let mode = if script.starts_with("#!") {
        0o700
    } else {
        0o600
    };
    // A fresh file every time, never through a link.
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    file.write_all(script.as_bytes())?;
    if let Some(who) = identity {
        std::os::unix::fs::fchown(&file, Some(who.uid), Some(who.gid))?;
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    drop(file);
    let path = path.to_string_lossy().into_owned();
    Ok(if script.starts_with("#!") {
        vec![path]
    } else {
        vec!["/bin/sh".into(), path]
    })
}

/// Whether `who` may enter `dir`: every directory on the way must be searchable by it (the
/// owner, group and other bits, as the kernel checks them; ACLs are not read). The error
/// names the directory that stops it, for a refusal at submit; the kernel still decides at
/// start, as the user.
pub fn check_enterable(dir: &Path, who: &TaskIdentity) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if who.uid == 0 {
        return Ok(());
    }
    let mut on_the_way: Vec<&Path> = dir.ancestors().collect();
    on_the_way.reverse();
    for path in on_the_way {
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("{} cannot be used: {e}", path.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", path.display()));
        }
        let mode = meta.mode();
        let bit = if meta.uid() == who.uid {
            0o100
        } else if meta.gid() == who.gid || who.groups.contains(&meta.gid()) {
            0o010
        } else {
            0o001
        };
        if mode & bit == 0 {
            return Err(format!(
                "user {} (uid {}) cannot enter {}: {} is mode {:04o}, owned by uid {}",
                who.name,
                who.uid,
                dir.display(),
                path.display(),
                mode & 0o7777,
                meta.uid()
            ));
        }
    }
    Ok(())
}

/// The working directory: `own` (the job's); else `dir` for a task that runs as the daemon's
/// user; else, for a task that runs as another user, `<dir>/work`: a tmpfs of `scratch_mib`
/// owned by that user ([`super::scratch`]), or, when `scratch_mib` is 0, a plain directory of
/// the data dir's file system owned by that user (unbounded: `docs/security.md`).
pub fn workdir(
    own: Option<&str>,
    dir: &Path,
    identity: Option<&TaskIdentity>,
    scratch_mib: u64,
) -> io::Result<PathBuf> {
    if let Some(own) = own {
        return Ok(PathBuf::from(own));
    }
    let Some(who) = identity else {
        return Ok(dir.to_path_buf());
    };
    if scratch_mib > 0 {
        return super::scratch::bounded(dir, who, scratch_mib);
    }
    let work = dir.join(super::scratch::WORK);
    std::fs::create_dir_all(&work)?;
    // lchown: never follow a link planted by an earlier run.
    std::os::unix::fs::lchown(&work, Some(who.uid), Some(who.gid))?;
    Ok(work)
}
