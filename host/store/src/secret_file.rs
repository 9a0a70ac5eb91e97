//! A password kept apart from configuration files others may read: read from a file only
//! its owner may read (mode 0600 or stricter, as `ssh` demands of a private key), or from
//! an environment variable (issue 43, findings 13 and 14: etcd's and PostgreSQL's
//! passwords).
//!
//! Owns: reading such a secret and the messages of a file that is not private, empty or
//! unreadable. Does not own which key or variable names it (the daemon's `[store]` and
//! `[history]`, the CLI).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why a secret cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file cannot be read.
    #[error("{key} {path}: {source}")]
    Read {
        /// The configuration key that named the file.
        key: String,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Its group or others may read it.
    #[error(
        "{key} {path} may be read by its group or others (mode {mode:04o}): make it private (chmod 600)"
    )]
    Exposed {
        /// The configuration key that named the file.
        key: String,
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// It holds nothing.
    #[error("{key} {path} is empty")]
    Empty {
        /// The configuration key that named the file.
        key: String,
        /// The file.
        path: String,
    },
}

/// The secret in `path` (named by configuration key `key`, for messages): its first line,
/// without the line end. A file its group or others may read is refused.
pub fn read_private(key: &str, path: &Path) -> Result<String, SecretError> {
    let shown = path.display().to_string();
    let read_error = |source| SecretError::Read {
        key: key.into(),
        path: shown.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed {
            key: key.into(),
            path: shown,
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let secret = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if secret.is_empty() {
        return Err(SecretError::Empty {
            key: key.into(),
            path: shown,
        });
    }
    Ok(secret.to_owned())
}

/// The secret in environment variable `name`, when it is set and not empty.
pub fn from_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_private_non_empty_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\nignored\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_private("store.password_file", &file).unwrap(),
            "s3cret"
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = read_private("store.password_file", &file)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("store.password_file") && err.contains("0640"),
            "{err}"
        );
        std::fs::write(&file, "\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            read_private("k", &file),
            Err(SecretError::Empty { .. })
        ));
        assert!(matches!(
            read_private("k", &dir.path().join("none")),
            Err(SecretError::Read { .. })
        ));
    }
}
