//! A job's `--mount` sources, opened as the job's user before the runtime (root) binds them:
//! the user must reach the source with its own rights (search permission on every directory
//! above it, as for its own `cd`), so another user's project under a 0700 home is refused
//! even when it lies under `[containers] allowed_mounts`. What the runtime binds is the
//! descriptor the user opened (`/proc/<shim>/fd/N`, a link the kernel resolves to that open
//! file, never to a path looked up again), so nothing renamed or replaced by a link between
//! the check and the mount changes what is mounted: there is no window. The place the
//! descriptor names (links followed as the user) must still lie under `allowed_mounts`.
//!
//! Owns: opening the sources and rewriting the request's mounts. Does not own which sources
//! a job may name (`Containers::mount_allowed`, checked at submit and by the executor) nor
//! the bundle's mount options (`bundle`).

use super::ContainerRequest;
use crate::user_open::{Credentials, open_as, path_of};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
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
}

/// Whether `path` lies under one of `allowed` (as written, or as the kernel resolves them).
fn under_allowed(path: &Path, allowed: &[PathBuf]) -> bool {
    allowed.iter().any(|dir| {
        path.starts_with(dir) || std::fs::canonicalize(dir).is_ok_and(|real| path.starts_with(real))
    })
}

/// Opens every mount source of `req` as its user and points each mount at the descriptor
/// (`/proc/<this process>/fd/N`); the descriptors stay open (close-on-exec) for the rest of
/// this process, which outlives the runtime that binds them. The job's own script (the
/// shim's `script` beside the bundle) is opened as the user too, but is not under
/// `allowed_mounts`.
pub(crate) fn open_as_user(req: &mut ContainerRequest) -> Result<(), MountError> {
    let who = Credentials {
        uid: req.uid,
        gid: req.gid,
        groups: req.groups.clone(),
    };
    let script = req
        .bundle_dir
        .parent()
        .map(|dir| dir.join("script"))
        .unwrap_or_default();
    let mut opened: Vec<OwnedFd> = Vec::new();
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
        m.source = format!("/proc/{}/fd/{}", std::process::id(), fd.as_raw_fd());
        opened.push(fd);
    }
    // Kept open until this process ends: the runtime resolves the links above while it
    // starts the container (they are close-on-exec, so no task inherits them).
    for fd in opened {
        let _ = fd.into_raw_fd();
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

        let mut ok = request(tmp.path(), vec![(&open, "/data")], &shared);
        open_as_user(&mut ok).unwrap();
        let link = ok.mounts[0].source.clone();
        assert!(link.starts_with("/proc/"), "{link}");
        assert_eq!(std::fs::canonicalize(&link).unwrap(), open);

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
