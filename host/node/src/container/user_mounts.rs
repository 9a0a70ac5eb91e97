//! A job's `--mount` sources, opened as the job's user before the runtime (root) binds them:
//! the user must reach the source with its own rights (search permission on every directory
//! above it, as for its own `cd`), so another user's project under a 0700 home is refused
//! even when it lies under `[containers] allowed_mounts`. The place the descriptor names
//! (links followed as the user) must still lie under `allowed_mounts`.
//!
//! What the runtime binds is what the user opened, with no window between check and mount:
//! the shim (root) first moves itself into a mount namespace of its own (`unshare`, its
//! mounts made slaves of the host's, so nothing it mounts is seen outside and all of it goes
//! when the shim ends), opens each source there as the user, binds that descriptor
//! (`/proc/self/fd/N`, which the kernel resolves to the open file, never to a path looked up
//! again) onto `task-N.mounts/<i>` beside the bundle (root's, 0700), and gives the runtime
//! those paths, which no user can reach or swap. The runtime, started from that namespace,
//! makes the container's from it. (A descriptor of another mount namespace cannot be bound:
//! the kernel refuses, so the runtime cannot be handed the descriptor itself.)
//!
//! Owns: opening the sources, the shim's mount namespace and binds, rewriting the request's
//! mounts. Does not own which sources a job may name (`Containers::mount_allowed`, checked
//! at submit and by the executor) nor the bundle's mount options (`bundle`).

use super::ContainerRequest;
use crate::user_open::{Credentials, open_as, path_of};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Why a mount's source was refused.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("mounts[{index}].source: {source}")]
    Open {
        index: usize,
        source: crate::user_open::UserOpenError,
    },
    #[error(
        "mounts[{index}].source: {given} is {resolved}, which is not under a directory of this node's [containers] allowed_mounts"
    )]
    Outside {
        index: usize,
        given: String,
        resolved: String,
    },
    #[error("mounts[{index}].source: {given}: {message}")]
    Resolve {
        index: usize,
        given: String,
        message: String,
    },
    #[error("the shim's mount namespace: {0}")]
    Namespace(io::Error),
    #[error("mounts[{index}]: binding {given} at {at}: {source}")]
    Bind {
        index: usize,
        given: String,
        at: PathBuf,
        source: io::Error,
    },
}

/// Whether `path` lies under one of `allowed` (as written, or as the kernel resolves them).
fn under_allowed(path: &Path, allowed: &[PathBuf]) -> bool {
    allowed.iter().any(|dir| {
        path.starts_with(dir) || std::fs::canonicalize(dir).is_ok_and(|real| path.starts_with(real))
    })
}

/// Opens every mount source of `req` as its user and, as root, binds each descriptor onto a
/// private path beside the bundle (`task-N.mounts/<i>`) in a mount namespace of this
/// process's own, which the request's mounts then name. Not root (the runtime then runs as
/// the user anyway): the source becomes the path its descriptor names. The job's own script
/// (the shim's `script` beside the bundle) is opened as the user too, but is not under
/// `allowed_mounts`.
pub(crate) fn open_as_user(req: &mut ContainerRequest) -> Result<(), MountError> {
    if req.mounts.is_empty() {
        return Ok(());
    }
    let who = Credentials {
        uid: req.uid,
        gid: req.gid,
        groups: req.groups.clone(),
    };
    // The job's directory is the daemon's (its links, if any, are the administrator's).
    let script = req
        .bundle_dir
        .parent()
        .map(|dir| dir.join("script"))
        .map(|script| std::fs::canonicalize(&script).unwrap_or(script))
        .unwrap_or_default();
    let root = gantry_private_files::daemon_uid() == 0;
    let binds = req.bundle_dir.with_extension("mounts");
    if root {
        private_namespace().map_err(MountError::Namespace)?;
        let _ = std::fs::remove_dir_all(&binds);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&binds)
            .map_err(|source| MountError::Bind {
                index: 0,
                given: String::new(),
                at: binds.clone(),
                source,
            })?;
    }
    for (index, m) in req.mounts.iter_mut().enumerate() {
        let given = m.source.clone();
        let fd = open_as(&who, Path::new(&given), libc::O_PATH)
            .map_err(|source| MountError::Open { index, source })?;
        let resolved = path_of(&fd).map_err(|e| MountError::Resolve {
            index,
            given: given.clone(),
            message: e.to_string(),
        })?;
        let own_script = m.destination == super::SCRIPT_IN_IMAGE && resolved == script;
        if !own_script && !under_allowed(&resolved, &req.allowed_mounts) {
            return Err(MountError::Outside {
                index,
                given,
                resolved: resolved.display().to_string(),
            });
        }
        if !root {
            m.source = resolved.to_string_lossy().into_owned();
            continue;
        }
        let at = binds.join(index.to_string());
        bind_descriptor(&fd, &at).map_err(|source| MountError::Bind {
            index,
            given,
            at: at.clone(),
            source,
        })?;
        m.source = at.to_string_lossy().into_owned();
    }
    Ok(())
}

/// Moves the calling thread (the shim's, which later starts the runtime) into a mount
/// namespace of its own whose mounts are slaves of the host's: the host's later mounts are
/// seen here, nothing mounted here is seen outside.
fn private_namespace() -> io::Result<()> {
    // SAFETY: unshare and mount take plain values and NUL-terminated strings that live for
    // the calls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Binds what `fd` is (a directory or a file) onto `at`, made for it (root's, private).
fn bind_descriptor(fd: &OwnedFd, at: &Path) -> io::Result<()> {
    // SAFETY: a zeroed stat is valid; fstat fills it from a live descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is a live stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        std::fs::DirBuilder::new().mode(0o700).create(at)?;
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(at)?;
    }
    let source = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let target = CString::new(at.as_os_str().as_bytes())?;
    // SAFETY: NUL-terminated strings that live for the call; a bind takes no data.
    let done = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn request(dir: &Path, mounts: Vec<(&Path, &str)>, allowed: &Path) -> ContainerRequest {
        let json = serde_json::json!({
            "image": "oci:/x:y", "uid": 65534, "gid": 65534, "groups": [],
            "cwd": null, "devices": [], "cgroups_path": null, "runtime": "/bin/true",
            "cache_dir": dir, "insecure": false, "auth_file": null, "name": "t",
            "bundle_dir": dir.join("job/task-0.bundle"),
            "allowed_mounts": [allowed],
            "mounts": mounts.iter().map(|(s, d)| serde_json::json!({
                "source": s, "destination": d, "read_only": true})).collect::<Vec<_>>(),
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_source_behind_another_owners_private_directory_or_a_link_out_is_refused() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "this test switches users and needs root (CI runs it as root)"
        );
        let tmp = tempfile::tempdir().unwrap();
        let mode = |p: &Path, m: u32| std::fs::set_permissions(p, PermissionsExt::from_mode(m));
        mode(tmp.path(), 0o755).unwrap();
        let shared = tmp.path().join("shared");
        let open = shared.join("open");
        let home = shared.join("alice");
        let project = home.join("project");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        mode(&shared, 0o755).unwrap();
        mode(&open, 0o755).unwrap();
        mode(&project, 0o755).unwrap();
        mode(&home, 0o700).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        mode(&outside, 0o755).unwrap();
        std::os::unix::fs::symlink(&outside, open.join("out")).unwrap();

        std::fs::create_dir(tmp.path().join("job")).unwrap();
        std::fs::write(open.join("data.txt"), "shared\n").unwrap();
        let mut ok = request(tmp.path(), vec![(&open, "/data")], &shared);
        // In a thread of its own: the namespace is the calling thread's.
        let bound = std::thread::scope(|s| {
            s.spawn(|| {
                open_as_user(&mut ok).unwrap();
                let at = PathBuf::from(&ok.mounts[0].source);
                let seen = std::fs::read_to_string(at.join("data.txt")).unwrap();
                let target = CString::new(at.as_os_str().as_bytes()).unwrap();
                // SAFETY: a NUL-terminated path that lives for the call.
                unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
                (at, seen)
            })
            .join()
            .unwrap()
        });
        assert_eq!(bound.0, tmp.path().join("job/task-0.mounts/0"));
        assert_eq!(bound.1, "shared\n");
        // Outside that namespace the mount point is an empty directory.
        assert_eq!(std::fs::read_dir(&bound.0).unwrap().count(), 0);

        let mut private = request(tmp.path(), vec![(&project, "/p")], &shared);
        let err = open_as_user(&mut private).unwrap_err().to_string();
        assert!(
            err.contains("mounts[0].source") && err.contains("Permission denied"),
            "{err}"
        );
        let out = open.join("out");
        let mut linked = request(tmp.path(), vec![(&out, "/o")], &shared);
        let err = open_as_user(&mut linked).unwrap_err().to_string();
        assert!(err.contains("not under"), "{err}");
    }
}
