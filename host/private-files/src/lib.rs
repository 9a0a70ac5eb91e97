//! Who may read what the daemon keeps on disk. The daemon (and an agent) runs with umask 077,
//! so everything it creates is its own unless said otherwise here: the data directory is 0711
//! (nobody else may list it; a job's user reaches the files of its own job by name), the
//! database directory 0700, a job's (or agent run's) directory 0711 and owned by the daemon, so
//! no task can plant a link in it. The files a job's user needs (its log, its script, `work/`)
//! are handed to that user, mode 0600/0700, by the executor (`gantry-node`'s `executor::task_files`,
//! the shim);
//! exit records and env files stay the daemon's, 0600.
//!
//! A crate of its own, below `gantry-node` and `gantry-store`, so the store makes its private
//! directories without linking the node's executor.
//!
//! Owns: the umask and these directory modes. Does not own the files tasks get (`gantry-node`).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Mode of the data directory and of each job's directory: traverse only, for others.
pub const TRAVERSE_ONLY: u32 = 0o711;

/// Mode of directories only the daemon may enter (the database).
pub const DAEMON_ONLY: u32 = 0o700;

/// The daemon's account: its effective uid.
pub fn daemon_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The daemon's effective gid (beside [`daemon_uid`], for the same reason).
pub fn daemon_gid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// Sets the process umask to 077 (the daemon's files are its own unless made otherwise).
pub fn restrict_umask() {
    // SAFETY: umask has no preconditions and cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `dir` (and its parents) when missing and sets its mode to `mode`. Refuses a `dir`
/// that is a link or not the daemon's own (someone else's directory put in its place), so
/// nothing the daemon then writes into it goes through another account's link.
pub fn dir_with_mode(dir: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() || meta.uid() != daemon_uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory of the daemon's own (a link, or owned by uid {}): refusing to write into it",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
}

/// The permission bits of `path` when its group or others may read it, `None` when only its
/// owner may: a file that holds a secret (a cluster token, a TLS key) must be private, as
/// `ssh` demands of a private key.
pub fn readable_by_others(path: &Path) -> io::Result<Option<u32>> {
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    Ok((mode & 0o044 != 0).then_some(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_get_their_mode_even_when_they_exist() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir_with_mode(&dir, TRAVERSE_ONLY).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o711);
        dir_with_mode(&dir.join("db"), DAEMON_ONLY).unwrap();
        let mode = std::fs::metadata(dir.join("db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_file_readable_by_group_or_others_is_named() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("secret");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert_eq!(readable_by_others(&file).unwrap(), Some(0o640));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(readable_by_others(&file).unwrap(), None);
    }
}
