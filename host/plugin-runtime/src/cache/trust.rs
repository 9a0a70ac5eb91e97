//! Whether the compile cache may be trusted with native code: the directory and each
//! compiled file must belong to this process's effective user and be writable by no one
//! else, and a file must be a regular file reached without following a symlink. Also
//! writes new files privately (mode 0600, a temporary file renamed into place).
//!
//! Owns: those checks and the private write. Does not own what is cached (`cache`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode bits that let the group or others write.
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// Why a cache directory or file is not trusted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Untrusted {
    /// A directory was expected.
    #[error("not a directory")]
    NotADirectory,
    /// A regular file was expected (a symlink is never followed).
    #[error("not a regular file (symlinks are not followed)")]
    NotARegularFile,
    /// Someone else owns it.
    #[error("owned by uid {owner}, not by this process's effective uid {euid}")]
    Owner {
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        euid: u32,
    },
    /// The group or others may write it.
    #[error("mode {mode:o} lets the group or others write it")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// It could not be inspected.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn private(meta: &std::fs::Metadata) -> Result<(), Untrusted> {
    let euid = euid();
    if meta.uid() != euid {
        return Err(Untrusted::Owner {
            owner: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & WRITABLE_BY_OTHERS != 0 {
        return Err(Untrusted::Writable { mode });
    }
    Ok(())
}

/// Creates `dir` (mode 0700) if it is missing, then checks that it is a directory owned
/// by this process's effective user that the group and others cannot write.
pub(crate) fn private_dir(dir: &Path) -> Result<(), Untrusted> {
    let meta = match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            std::fs::metadata(dir)?
        }
        other => other?,
    };
    if !meta.is_dir() {
        return Err(Untrusted::NotADirectory);
    }
    private(&meta)
}

/// Opens `path` for reading without following a symlink (nor waiting on a FIFO), and
/// checks that it is a regular file owned by this process's effective user that the
/// group and others cannot write. `Ok(None)` when there is no such file.
pub(crate) fn open_private_file(path: &Path) -> Result<Option<File>, Untrusted> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(Untrusted::NotARegularFile),
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Untrusted::NotARegularFile);
    }
    private(&meta)?;
    Ok(Some(file))
}

/// Writes `bytes` to `path` with mode 0600: into a new temporary file of the same
/// directory, then renamed over `path` (replacing whatever was there, a symlink itself
/// rather than its target).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(|| "entry".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
