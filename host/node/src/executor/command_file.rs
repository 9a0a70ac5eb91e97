//! The command file: a task's argv, written by the executor next to its exit record
//! (`task-N.argv`, NUL-separated, mode 0600, the daemon's) and read by the shim, so the job's
//! arguments never appear on the shim's command line, which every account may read in `ps`
//! (`docs/security.md`, attack U9).
//!
//! Owns the format, the write (a fresh file, never through a link) and the read, and the
//! two calls every daemon-private file of a task goes through ([`create_private`],
//! [`read_private`]). It does not decide what runs (`task_files.rs`) nor where the file
//! lives (`mod.rs`).

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest command file the shim reads (argv is bounded far below this by the API).
const MAX_COMMAND_FILE: u64 = 8 << 20;

/// Writes `argv` to `path`: a new file (a leftover is removed first; links are not followed).
pub(crate) fn write(path: &Path, argv: &[String]) -> io::Result<()> {
    let mut bytes = Vec::new();
    for arg in argv {
        if arg.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument holds a NUL byte and cannot be passed to a process",
            ));
        }
        bytes.extend_from_slice(arg.as_bytes());
        bytes.push(0);
    }
    // No fsync: the shim reads it at once, and after a power loss the task is gone anyway.
    create_private(path)?.write_all(&bytes)
}

/// A new file of the daemon's at `path`, mode 0600: a leftover is removed first (unlink does
/// not follow links) and the file is created exclusively, never through a link. Also used for
/// the env file (`environment.rs`).
pub(crate) fn create_private(path: &Path) -> io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// At most `max` bytes of the file at `path`, never read through a link.
pub(crate) fn read_private(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads a command file written by [`write`].
pub(crate) fn read(path: &Path) -> io::Result<Vec<String>> {
    let bytes = read_private(path, MAX_COMMAND_FILE)?;
    let Some(body) = bytes.strip_suffix(&[0]) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "malformed command file (empty, or not NUL-terminated)",
        ));
    };
    body.split(|b| *b == 0)
        .map(|arg| {
            String::from_utf8(arg.to_vec())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "malformed command file"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_round_trips_with_empty_and_spaced_arguments_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task-0.argv");
        let argv: Vec<String> = ["sh", "-c", "echo a  b", ""].map(String::from).to_vec();
        write(&path, &argv).unwrap();
        assert_eq!(read(&path).unwrap(), argv);
        let target = dir.path().join("root-only");
        std::fs::write(&target, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        write(&path, &argv).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(write(&path, &["a\0b".to_string()]).is_err());
    }
}
