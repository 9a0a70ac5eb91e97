//! Whether a directory may hold what a root daemon writes: its data directory (jobs' exit
//! records, env files, the database, the API socket) and the socket's directory. A directory
//! another account owns, or one others may write, lets that account swap a job's directory
//! for its own, plant links the daemon would follow as root, or delete the socket and bind
//! its own (`docs/security.md`, attack R3). The check is made on the canonical path, from `/`
//! down: every directory must be owned by root or the daemon's account and writable by
//! nobody else, except a root-owned sticky directory such as `/tmp` on the way (there no one
//! may rename or delete what another made); the data directory itself must be the daemon's
//! and writable by it alone.
//!
//! Owns this rule and [`absolute_and_trusted`]. It does not create the directory's contents
//! or set their modes (`gantry_private_files`).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a directory may not hold the daemon's state.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedDir {
    /// It (or a directory above it) could not be made or inspected.
    #[error("cannot inspect {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// Another account owns it.
    #[error(
        "{} is owned by uid {owner}, neither root nor the daemon's account (uid {daemon}): its owner could swap what the daemon writes there; use a directory of the daemon's own (e.g. /var/lib/gantry)",
        path.display()
    )]
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The daemon's effective uid.
        daemon: u32,
    },
    /// Others may write into it.
    #[error(
        "{} may be written by its group or by others (mode {mode:04o}): they could swap what the daemon writes there; make it writable by its owner only",
        path.display()
    )]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is not a directory.
    #[error("{} is not a directory", path.display())]
    NotDirectory {
        /// The path.
        path: PathBuf,
    },
}

/// Makes `dir` absolute (against the current directory), creates it when missing (mode
/// 0700 from the daemon's umask; `gantry_private_files` sets the final mode) and checks it and every
/// directory above it by the rule of the module header. Returns the canonical path.
pub fn absolute_and_trusted(dir: &Path) -> Result<PathBuf, UntrustedDir> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UntrustedDir::Io { path, source }
    };
    let absolute = std::path::absolute(dir).map_err(io_err(dir))?;
    // Check what exists before creating anything under it.
    let existing = absolute
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let canonical = existing.canonicalize().map_err(io_err(existing))?;
    check_chain(&canonical, canonical == absolute)?;
    std::fs::create_dir_all(&absolute).map_err(io_err(&absolute))?;
    let canonical = absolute.canonicalize().map_err(io_err(&absolute))?;
    check_chain(&canonical, true)?;
    Ok(canonical)
}

/// Checks `canonical` and each directory above it; `last_is_own` demands that `canonical`
/// itself be the daemon's and not writable by others, sticky or not.
fn check_chain(canonical: &Path, last_is_own: bool) -> Result<(), UntrustedDir> {
    let daemon = gantry_private_files::daemon_uid();
    let dirs: Vec<&Path> = canonical.ancestors().collect();
    for (i, path) in dirs.iter().rev().enumerate() {
        let is_last = i + 1 == dirs.len();
        let meta = std::fs::symlink_metadata(path).map_err(|source| UntrustedDir::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(UntrustedDir::NotDirectory {
                path: path.to_path_buf(),
            });
        }
        let owner = meta.uid();
        let own = if is_last && last_is_own {
            owner == daemon
        } else {
            owner == 0 || owner == daemon
        };
        if !own {
            return Err(UntrustedDir::Owner {
                path: path.to_path_buf(),
                owner,
                daemon,
            });
        }
        let mode = meta.mode() & 0o7777;
        let others_write = mode & 0o022 != 0;
        let sticky_root = mode & 0o1000 != 0 && owner == 0 && !(is_last && last_is_own);
        if others_write && !sticky_root {
            return Err(UntrustedDir::Writable {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_directory_is_made_absolute_and_accepted() {
        let root = tempfile::tempdir().unwrap();
        chmod(root.path(), 0o700);
        let dir = root.path().join("a/data");
        let got = absolute_and_trusted(&dir).unwrap();
        assert!(got.is_absolute() && got.ends_with("a/data"), "{got:?}");
    }

    #[test]
    fn a_directory_others_may_write_is_refused_on_the_way_and_at_the_end() {
        let root = tempfile::tempdir().unwrap();
        chmod(root.path(), 0o777);
        let err = absolute_and_trusted(&root.path().join("data")).unwrap_err();
        assert!(matches!(err, UntrustedDir::Writable { .. }), "{err}");
        // Sticky is not enough for the data directory itself.
        chmod(root.path(), 0o1777);
        let err = absolute_and_trusted(root.path()).unwrap_err();
        assert!(matches!(err, UntrustedDir::Writable { .. }), "{err}");
    }

    #[test]
    fn a_symlink_is_judged_by_what_it_points_to() {
        let root = tempfile::tempdir().unwrap();
        chmod(root.path(), 0o700);
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&open, &link).unwrap();
        let err = absolute_and_trusted(&link.join("data")).unwrap_err();
        assert!(
            matches!(&err, UntrustedDir::Writable { path, .. } if path.ends_with("open")),
            "{err}"
        );
    }
}
