//! The exit record: the small JSON file (`{"exit": <TaskExit>, "usage": <TaskUsage>}`) in which
//! the shim writes how its command ended and what it used, written atomically (`<path>.tmp`,
//! then rename) and read back by the executor. Records written before `usage` existed (only
//! `exit`) still read, with no usage.
//!
//! Owns the file format, the atomic write, the read and the removal of stale records. It does not
//! decide what an absent record means (the executor falls back to the shim's status, or `Lost`).

use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use serde::{Deserialize, Serialize};

use super::{TaskExit, TaskUsage};

/// What the exit file holds: `{"exit": {"Exited": 0}, "usage": {...}}` or
/// `{"exit": {"Signaled": 15}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExitRecord {
    /// How the command ended.
    pub exit: TaskExit,
    /// What the command's process tree used, as the shim measured it (`wait4`); absent in
    /// records of older shims and when the command never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TaskUsage>,
}

impl ExitRecord {
    /// A record of `exit` without usage.
    pub fn exit_only(exit: TaskExit) -> Self {
        Self { exit, usage: None }
    }
}

/// Why an exit record could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The file exists but could not be read.
    #[error("cannot read exit record {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file is not a valid exit record.
    #[error("malformed exit record {}: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// The temporary file the record is written to before the rename.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes `record` to `path` atomically, creating the parent directory if needed.
pub(crate) fn write_atomic(path: &Path, record: &ExitRecord) -> io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let body = serde_json::to_vec(record).map_err(io::Error::other)?;
    let tmp = tmp_path(path);
    // A fresh file, never through a link (whoever could plant one there must not make root
    // write through it).
    let mut file = super::command_file::create_private(&tmp)?;
    file.write_all(&body)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)
}

/// Reads the record at `path`: `Ok(None)` if there is none.
pub(crate) fn read(path: &Path) -> Result<Option<ExitRecord>, RecordError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RecordError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let record: ExitRecord =
        serde_json::from_slice(&bytes).map_err(|source| RecordError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(Some(record))
}

/// Reads the record at `path`, logging (not returning) a read or parse failure as `None`.
pub(crate) fn read_or_warn(path: &Path) -> Option<ExitRecord> {
    match read(path) {
        Ok(exit) => exit,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring unusable exit record");
            None
        }
    }
}

/// Removes a record (and its temporary file) left by an earlier run of the same task.
pub(crate) fn remove_stale(path: &Path) -> io::Result<()> {
    for p in [path.to_path_buf(), tmp_path(path)] {
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How a process ended, from its wait status.
pub(crate) fn exit_from_status(status: ExitStatus) -> TaskExit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => TaskExit::Exited(code),
        (None, Some(sig)) => TaskExit::Signaled(sig),
        (None, None) => TaskExit::Lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_at_the_temporary_file_is_replaced_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("root-only");
        fs::write(&target, "keep").unwrap();
        let path = dir.path().join("task-0.exit");
        std::os::unix::fs::symlink(&target, tmp_path(&path)).unwrap();
        write_atomic(&path, &ExitRecord::exit_only(TaskExit::Exited(0))).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(
            read(&path).unwrap(),
            Some(ExitRecord::exit_only(TaskExit::Exited(0)))
        );
    }

    #[test]
    fn round_trip_and_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/exit.json");
        assert_eq!(read(&path).unwrap(), None);
        let record = ExitRecord::exit_only(TaskExit::Signaled(15));
        write_atomic(&path, &record).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim(), r#"{"exit":{"Signaled":15}}"#);
        assert_eq!(read(&path).unwrap(), Some(record));
        assert!(!tmp_path(&path).exists());
        remove_stale(&path).unwrap();
        assert_eq!(read(&path).unwrap(), None);
        remove_stale(&path).unwrap();
    }

    #[test]
    fn usage_round_trips_and_old_records_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit.json");
        let usage = TaskUsage {
            cpu_ms: 1500,
            memory_peak_mib: 12,
            oom_killed: false,
        };
        let record = ExitRecord {
            exit: TaskExit::Exited(0),
            usage: Some(usage),
        };
        write_atomic(&path, &record).unwrap();
        assert_eq!(read(&path).unwrap(), Some(record));
        assert!(
            fs::read_to_string(&path)
                .unwrap()
                .contains(r#""cpu_ms":1500"#)
        );
        fs::write(&path, r#"{"exit":{"Exited":3}}"#).unwrap();
        assert_eq!(
            read(&path).unwrap(),
            Some(ExitRecord::exit_only(TaskExit::Exited(3))),
            "a record of an older shim"
        );
    }

    #[test]
    fn malformed_record_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit.json");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(read(&path), Err(RecordError::Parse { .. })));
        assert_eq!(read_or_warn(&path), None);
    }
}
