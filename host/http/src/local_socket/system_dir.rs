//! The system socket's directory, `/run/gantry` (the parent of
//! [`gantry_config::SYSTEM_SOCKET`]): every local account must be able to search it, or the
//! socket in it is out of their reach and the CLI cannot talk to the system daemon. A root
//! daemon with a data directory of its own makes `/run/gantry` 0700 for its cgroup lock
//! (`gantry_node::executor`'s isolation) and leaves it so; the system daemon that starts
//! later opens it again (0755) before it binds the socket.
//!
//! Owns that one repair and its conditions: the socket is the system socket, the daemon is
//! root, and the directory is root's own (never a directory a configuration names elsewhere,
//! never one another account owns, never through a link). Does not own binding (`mod.rs`).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The mode the system socket's directory is given: searchable by everyone, writable by root.
const OPEN: u32 = 0o755;

/// When `socket` is the system socket and the daemon is root: makes its directory 0755 if
/// the group or others may not search it. Returns the mode it had when it was changed.
pub fn open_to_local_users(socket: &Path) -> io::Result<Option<u32>> {
    open_if_system(
        socket,
        Path::new(gantry_config::SYSTEM_SOCKET),
        gantry_node::sys::effective_uid(),
    )
}

/// [`open_to_local_users`] with the system socket and the daemon's uid given (for tests).
fn open_if_system(socket: &Path, system_socket: &Path, daemon_uid: u32) -> io::Result<Option<u32>> {
    if socket != system_socket || daemon_uid != 0 {
        return Ok(None);
    }
    let Some(dir) = system_socket.parent() else {
        return Ok(None);
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // A link or another account's directory is left as it is (the trust check refuses it).
    if !meta.is_dir() || meta.uid() != 0 {
        return Ok(None);
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o011 == 0o011 {
        return Ok(None);
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(OPEN))?;
    Ok(Some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_closed_system_socket_directory_of_root_is_opened_and_nothing_else_is() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run-gantry");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o700);
        let socket = dir.join("gantry.sock");
        let owned_by_root = std::fs::metadata(&dir).unwrap().uid() == 0;

        // Not the system socket, or a daemon that is not root: untouched.
        let other = root.path().join("elsewhere/gantry.sock");
        assert_eq!(open_if_system(&other, &socket, 0).unwrap(), None);
        assert_eq!(open_if_system(&socket, &socket, 1000).unwrap(), None);
        assert_eq!(mode(&dir), 0o700);

        // The system socket's directory, root's: opened (only where the test runs as root,
        // as CI does; elsewhere the directory is the tester's and stays closed).
        let got = open_if_system(&socket, &socket, 0).unwrap();
        if owned_by_root {
            assert_eq!(got, Some(0o700));
            assert_eq!(mode(&dir), 0o755);
        } else {
            assert_eq!((got, mode(&dir)), (None, 0o700));
        }
        // Already searchable by all (0711 too): left as it is.
        chmod(&dir, 0o711);
        assert_eq!(open_if_system(&socket, &socket, 0).unwrap(), None);
        assert_eq!(mode(&dir), 0o711);

        // Another account's directory, or a link in its place: never changed.
        if owned_by_root {
            chmod(&dir, 0o700);
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
            assert_eq!(open_if_system(&socket, &socket, 0).unwrap(), None);
            assert_eq!(mode(&dir), 0o700);
        }
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap();
        chmod(&target, 0o700);
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let linked = link.join("gantry.sock");
        assert_eq!(open_if_system(&linked, &linked, 0).unwrap(), None);
        assert_eq!(mode(&target), 0o700);
        // Missing: nothing to do (binding makes it).
        let missing = root.path().join("missing/gantry.sock");
        assert_eq!(open_if_system(&missing, &missing, 0).unwrap(), None);
    }
}
