//! The scratch working directory of a task that runs as another user and names no `workdir`:
//! `<task dir>/work`, a tmpfs of `execution.work_dir_mib` owned by that user (mode 0700,
//! `nosuid`, `nodev`). A job's writes there never reach the file system that holds the
//! daemon's state, and they are bounded twice: by the tmpfs's size (a write past it fails
//! with `ENOSPC`) and, under cgroups, by the memory limit of the task that writes them (tmpfs
//! pages are charged to the writer's memory cgroup). Like a Kubernetes `emptyDir`, it lives as
//! long as the job's run: it is unmounted when the run ends ([`release`]), and what was in it
//! is gone.
//!
//! Owns: mounting, recognising and unmounting that tmpfs. Does not own when a task needs one
//! (`task_files::workdir`), nor removing the task's directory (the daemon's retention).

use super::TaskIdentity;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The scratch directory's name inside a task's directory.
pub const WORK: &str = "work";

/// The source name of a scratch tmpfs in the mount table.
const SOURCE: &str = "gantry-work";

/// `<dir>/work` as a tmpfs of `limit_mib` owned by `who`; mounted unless a run of the same
/// job mounted it already. `dir` is the daemon's own directory (`task_files::command` made
/// it), so nobody else can have put anything at `work`; a `work` that is not the daemon's
/// plain directory is refused all the same.
pub fn bounded(dir: &Path, who: &TaskIdentity, limit_mib: u64) -> io::Result<PathBuf> {
    let work = dir.join(WORK);
    match std::fs::symlink_metadata(&work) {
        Ok(meta) if meta.file_type().is_dir() => {
            if is_mount_point(dir, &work)? {
                return Ok(work);
            }
            if meta.uid() != gantry_private_files::daemon_uid() {
                return Err(io::Error::other(format!(
                    "{} is owned by uid {}, not the daemon's",
                    work.display(),
                    meta.uid()
                )));
            }
        }
        Ok(_) => {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                work.display()
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().mode(0o700).create(&work)?;
        }
        Err(e) => return Err(e),
    }
    mount_tmpfs(&work, who, limit_mib).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot mount a tmpfs of {limit_mib} MiB (execution.work_dir_mib) at {}: {e}",
                work.display()
            ),
        )
    })?;
    Ok(work)
}

/// Unmounts `<dir>/work` when it is a mount point (detached: a process still inside keeps
/// its view until it leaves); whether there was one. Safe to call for any directory, any
/// number of times.
pub fn release(dir: &Path) -> io::Result<bool> {
    let work = dir.join(WORK);
    if !is_mount_point(dir, &work)? {
        return Ok(false);
    }
    let target = c_path(&work)?;
    // SAFETY: `target` is a NUL-terminated string that lives across the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(true)
}

/// The directories under `root` (`<root>/<name>`) whose `work` is a scratch tmpfs, as
/// `/proc/self/mountinfo` lists them: after a restart, the daemon releases those whose run is
/// over (a daemon killed while its tasks ran left them mounted).
pub fn mounted_under(root: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let mut fs = fs.split_whitespace();
            if fs.next() != Some("tmpfs") || fs.next() != Some(SOURCE) {
                return None;
            }
            let point = PathBuf::from(unescape(mount.split_whitespace().nth(4)?));
            let dir = point.parent()?;
            (point.file_name()? == WORK && dir.parent()? == root).then(|| dir.to_path_buf())
        })
        .collect()
}

/// A mountinfo path with its `\ooo` escapes (space, tab, newline, backslash) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `work` (a child of `dir`) is a directory on another file system than `dir`.
fn is_mount_point(dir: &Path, work: &Path) -> io::Result<bool> {
    let inner = match std::fs::symlink_metadata(work) {
        Ok(meta) if meta.file_type().is_dir() => meta,
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let outer = std::fs::symlink_metadata(dir)?;
    Ok(inner.dev() != outer.dev())
}

fn mount_tmpfs(work: &Path, who: &TaskIdentity, limit_mib: u64) -> io::Result<()> {
    let target = c_path(work)?;
    let source = c_str(SOURCE)?;
    let fstype = c_str("tmpfs")?;
    // One inode per 4 KiB of space: a job cannot pin kernel memory with empty files either.
    let inodes = (limit_mib * 256).max(1024);
    let data = c_str(&format!(
        "size={limit_mib}m,nr_inodes={inodes},mode=0700,uid={},gid={}",
        who.uid, who.gid
    ))?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: every pointer is a NUL-terminated string that lives across the call; `data` is
    // the text option string tmpfs expects.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

fn c_str(text: &str) -> io::Result<CString> {
    CString::new(text)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a string holds a NUL byte"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_plain_directory_is_no_mount_point_and_release_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!release(dir.path()).unwrap());
        std::fs::create_dir(dir.path().join(WORK)).unwrap();
        assert!(!release(dir.path()).unwrap());
        assert!(dir.path().join(WORK).is_dir());
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape("/data/my\\040dir/work"), "/data/my dir/work");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
    }

    #[test]
    fn a_link_at_work_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join(WORK)).unwrap();
        let who = TaskIdentity {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
            home: "/".into(),
        };
        let err = bounded(dir.path(), &who, 16).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        assert!(!release(dir.path()).unwrap());
    }
}
