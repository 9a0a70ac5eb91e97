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
//! ([`check_enterable`]), or which directory on the way stops them ([`blocking_ancestor`]:
//! named in a task's start error and in the daemon's warning at start when its data directory
//! lies under a directory other users may not enter). Does not own where the directory is (the
//! caller's) or launching.

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
    let searcher = Searcher {
        uid: who.uid,
        gid: who.gid,
        groups: &who.groups,
    };
    let mut on_the_way: Vec<&Path> = dir.ancestors().collect();
    on_the_way.reverse();
    for path in on_the_way {
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("{} cannot be used: {e}", path.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", path.display()));
        }
        let mode = meta.mode();
        if !searcher.may_search(&meta) {
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

/// Who searches a directory, for [`blocking_ancestor`]: a uid, its group and its
/// supplementary groups.
#[derive(Debug, Clone, Copy)]
pub struct Searcher<'a> {
    /// The uid.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: &'a [u32],
}

impl Searcher<'static> {
    /// Any account that neither owns a directory nor is in its group: the "other" bits decide
    /// (`(uid_t) -1` owns no file; the kernel refuses it as an owner).
    pub const OTHERS: Self = Self {
        uid: u32::MAX,
        gid: u32::MAX,
        groups: &[],
    };
}

impl Searcher<'_> {
    /// Whether the mode bits of `meta` let this account search it (as the kernel checks
    /// them; ACLs are not read; root may search anything).
    fn may_search(&self, meta: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        if self.uid == 0 {
            return true;
        }
        let bit = if meta.uid() == self.uid {
            0o100
        } else if meta.gid() == self.gid || self.groups.contains(&meta.gid()) {
            0o010
        } else {
            0o001
        };
        meta.mode() & bit != 0
    }
}

/// A directory that stops an account on its way to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The directory it may not search.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner.
    pub owner: u32,
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is mode {:04o}, owned by uid {}",
            self.path.display(),
            self.mode,
            self.owner
        )
    }
}

/// The first directory from `/` down to `dir` (itself included) that `who` may not search,
/// by the mode bits; `None` when every one may be searched, and when one cannot be inspected
/// (missing, not a directory: nothing to say of permissions then).
pub fn blocking_ancestor(dir: &Path, who: Searcher<'_>) -> Option<Blocked> {
    use std::os::unix::fs::MetadataExt;
    let mut on_the_way: Vec<&Path> = dir.ancestors().collect();
    on_the_way.reverse();
    for path in on_the_way {
        let meta = std::fs::metadata(path).ok().filter(|m| m.is_dir())?;
        if !who.may_search(&meta) {
            return Some(Blocked {
                path: path.to_path_buf(),
                mode: meta.mode() & 0o7777,
                owner: meta.uid(),
            });
        }
    }
    None
}

/// Why `who` could not start a task's command, when a directory on the way to its working
/// directory `workdir` or to its `program` (an absolute path) is closed to them ("" when none
/// is): the directory, its mode and owner; and when it lies above `task_file` (a file of the
/// task's own directory: the daemon's data directory under a private one), that the daemon's
/// setup is what to change.
pub(crate) fn unreachable(
    who: Searcher<'_>,
    workdir: Option<&Path>,
    program: &str,
    task_file: &Path,
) -> String {
    let program = Path::new(program);
    let command_dir = program.parent().filter(|_| program.is_absolute());
    let places = [
        ("working directory", workdir),
        ("command's directory", command_dir),
    ];
    for (what, dir) in places {
        let Some((dir, blocked)) = dir.and_then(|d| Some((d, blocking_ancestor(d, who)?))) else {
            continue;
        };
        let daemons = if task_file.starts_with(&blocked.path) {
            " (it lies above the task's own directory: the daemon's data directory must be under directories every user may enter, e.g. /var/lib/gantry)"
        } else {
            ""
        };
        return format!(
            "; uid {} cannot reach its {what} {}: {blocked}{daemons}",
            who.uid,
            dir.display()
        );
    }
    String::new()
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

#[cfg(test)]
#[path = "task_files_tests.rs"]
mod tests;
