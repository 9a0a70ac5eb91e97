//! The environment of a task's command, chosen by the daemon: a small base taken from the
//! daemon's own (locale and time zone, plus `execution.env_passthrough`; `PATH` only for a
//! task that keeps the daemon's account, another account's starts from [`DEFAULT_PATH`]),
//! the account's `HOME`, `USER` and `LOGNAME`, then the scheduler's variables and the job's `env`. Nothing
//! else of the daemon's environment (its tokens, its `LD_*` variables, whatever the operator's
//! shell had) reaches a task or a check command.
//!
//! The shim itself starts with [`shim_env`] only: the job's `env` is written to a file the shim
//! reads ([`write_file`], [`read_file`]) and applies to the command it execs, after the switch
//! to the job's user, so `LD_PRELOAD` or `GCONV_PATH` given in a job never touch a process
//! that still runs as root.
//!
//! Owns: the base list, the env file format (NUL-separated `KEY=VALUE` entries, mode 0600).
//! Does not own the scheduler's variables (`scheduler::task_env`) or launching.

use std::io::{self, Write};
use std::path::Path;

use super::TaskIdentity;

/// `PATH` of a task when the daemon has none.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Variables of the daemon's environment every task gets (when the daemon has them).
const BASE: [&str; 8] = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
];

/// Largest env file the shim reads (a job's env is bounded far below this at submit).
const MAX_ENV_FILE: u64 = 64 << 20;

/// The environment of a task's command (or a check command): the base, `passthrough` names
/// of the daemon's environment, the account's identity variables (the daemon's own when
/// tasks keep its user), then `extra` in order (later entries win).
pub(crate) fn task_env(
    identity: Option<&TaskIdentity>,
    passthrough: &[String],
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| {
        env.retain(|(name, _)| name != k);
        env.push((k.to_owned(), v));
    };
    let names = BASE
        .iter()
        .copied()
        .chain(passthrough.iter().map(String::as_str));
    for name in names {
        // A task run as another account never gets the daemon's (root's) PATH: its own,
        // when its job sends one (`--export`), else the system's default.
        if name == "PATH" && identity.is_some() {
            continue;
        }
        if let Ok(value) = std::env::var(name) {
            set(name, value);
        }
    }
    if identity.is_some() || std::env::var_os("PATH").is_none() {
        set("PATH", DEFAULT_PATH.to_owned());
    }
    match identity {
        Some(who) => {
            set("HOME", who.home.clone());
            set("USER", who.name.clone());
            set("LOGNAME", who.name.clone());
        }
        None => {
            for name in ["HOME", "USER", "LOGNAME"] {
                if let Ok(value) = std::env::var(name) {
                    set(name, value);
                }
            }
        }
    }
    for (k, v) in extra {
        set(k, v.clone());
    }
    env
}

/// The whole environment the shim process starts with: `PATH` only.
pub(crate) fn shim_env() -> [(&'static str, String); 1] {
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
    [("PATH", path)]
}

/// Writes `env` to `path` (created or truncated, mode 0600, never through a link).
pub(crate) fn write_file(path: &Path, env: &[(String, String)]) -> io::Result<()> {
    let mut bytes = Vec::new();
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("environment variable {k:?} cannot be passed to a process"),
            ));
        }
        bytes.extend_from_slice(k.as_bytes());
        bytes.push(b'=');
        bytes.extend_from_slice(v.as_bytes());
        bytes.push(0);
    }
    let mut file = super::command_file::create_private(path)?;
    file.write_all(&bytes)?;
    file.sync_data()
}

/// Reads an env file written by [`write_file`].
pub(crate) fn read_file(path: &Path) -> io::Result<Vec<(String, String)>> {
    let bytes = super::command_file::read_private(path, MAX_ENV_FILE)?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed environment file");
    bytes
        .split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let text = std::str::from_utf8(entry).map_err(|_| bad())?;
            let (k, v) = text.split_once('=').ok_or_else(bad)?;
            Ok((k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_file_round_trips_and_refuses_bad_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task-0.env");
        let env = vec![
            ("A".to_owned(), "1=2".to_owned()),
            ("EMPTY".to_owned(), String::new()),
            ("LD_PRELOAD".to_owned(), "/home/alice/p.so".to_owned()),
        ];
        write_file(&path, &env).unwrap();
        assert_eq!(read_file(&path).unwrap(), env);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let bad = vec![("A=B".to_owned(), "x".to_owned())];
        assert!(write_file(&path, &bad).is_err());
    }

    #[test]
    fn the_env_file_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("task-0.env");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, &[("A".into(), "1".into())]).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn task_env_has_the_base_identity_and_job_variables_only() {
        let who = TaskIdentity {
            name: "alice".into(),
            uid: 1000,
            gid: 1000,
            groups: vec![1000],
            home: "/home/alice".into(),
        };
        let extra = vec![
            ("GANTRY_JOB_ID".to_owned(), "7".to_owned()),
            ("HOME".to_owned(), "/scratch".to_owned()),
        ];
        let env = task_env(Some(&who), &[], &extra);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        // Another account's task never gets the daemon's PATH.
        assert_eq!(get("PATH"), Some(DEFAULT_PATH));
        let own = task_env(Some(&who), &[], &[("PATH".into(), "/opt/conda/bin".into())]);
        let own_path = own
            .iter()
            .find(|(n, _)| n == "PATH")
            .map(|(_, v)| v.as_str());
        assert_eq!(own_path, Some("/opt/conda/bin"), "the job's own PATH wins");
        assert_eq!(get("USER"), Some("alice"));
        assert_eq!(get("HOME"), Some("/scratch"), "the job's own value wins");
        assert_eq!(get("GANTRY_JOB_ID"), Some("7"));
        let allowed: Vec<&str> = BASE
            .iter()
            .copied()
            .chain(["HOME", "USER", "LOGNAME", "GANTRY_JOB_ID"])
            .collect();
        for (name, _) in &env {
            assert!(
                allowed.contains(&name.as_str()),
                "{name} is not the daemon's to pass on"
            );
        }
    }
}
