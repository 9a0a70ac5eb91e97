//! The `task-shim` side of the executor: the small supervisor process that sits between the daemon
//! and a task's command. It runs the command with stdout and stderr appended to the task's log,
//! waits for it, and records how it ended in the exit file, so the end of a task is known even if
//! the daemon was restarted meanwhile. Plain `std::process`, no tokio.
//!
//! Owns the shim's command line (built here for `launch`, parsed here by `run_shim`) and its run.
//! It does not signal anything: `terminate` signals the whole process group, which reaches the
//! command directly while the shim itself survives SIGTERM (see `signals::shield_shim`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{TaskExit, TaskLaunch, record, signals};

/// The hidden subcommand under which the daemon binary acts as the shim.
pub const SHIM_SUBCOMMAND: &str = "task-shim";

/// Exit code of the shim, and recorded exit, when the command cannot be started.
pub(crate) const SPAWN_FAILED_CODE: i32 = 127;

/// Exit code of the shim when its own arguments are wrong (nothing is recorded then).
pub(crate) const USAGE_CODE: i32 = 2;

/// Exit code of the shim when waiting for the command failed (recorded as `Lost`).
const LOST_CODE: i32 = 255;

/// The shim's parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShimArgs {
    pub exit_file: PathBuf,
    pub log: PathBuf,
    pub workdir: Option<PathBuf>,
    pub argv: Vec<String>,
}

/// Why the shim's arguments could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ShimArgError {
    #[error("option {0} needs a value")]
    MissingValue(String),
    #[error("unknown option {0}")]
    UnknownOption(String),
    #[error("missing required option {0}")]
    MissingOption(&'static str),
    #[error("no command after --")]
    NoCommand,
}

/// The paths of a launch that go on the shim's command line, which must be UTF-8 because the shim
/// reads its arguments as `String`s.
pub(crate) struct ShimPaths<'a> {
    pub exit_file: &'a str,
    pub log: &'a str,
    pub workdir: Option<&'a str>,
}

/// The arguments given to the shim executable for `launch`, subcommand first:
/// `task-shim --exit-file F --log L [--workdir D] -- argv...`.
pub(crate) fn shim_command_args(paths: &ShimPaths<'_>, launch: &TaskLaunch) -> Vec<String> {
    let mut args = vec![
        SHIM_SUBCOMMAND.to_owned(),
        "--exit-file".to_owned(),
        paths.exit_file.to_owned(),
        "--log".to_owned(),
        paths.log.to_owned(),
    ];
    if let Some(dir) = paths.workdir {
        args.push("--workdir".to_owned());
        args.push(dir.to_owned());
    }
    args.push("--".to_owned());
    args.extend(launch.argv.iter().cloned());
    args
}

/// Parses the arguments that follow `task-shim`.
pub(crate) fn parse_args(args: &[String]) -> Result<ShimArgs, ShimArgError> {
    let mut exit_file = None;
    let mut log = None;
    let mut workdir = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let slot = match arg.as_str() {
            "--" => break,
            "--exit-file" => &mut exit_file,
            "--log" => &mut log,
            "--workdir" => &mut workdir,
            other => return Err(ShimArgError::UnknownOption(other.to_owned())),
        };
        let value = rest
            .next()
            .ok_or_else(|| ShimArgError::MissingValue(arg.clone()))?;
        *slot = Some(PathBuf::from(value));
    }
    let argv: Vec<String> = rest.cloned().collect();
    if argv.is_empty() {
        return Err(ShimArgError::NoCommand);
    }
    Ok(ShimArgs {
        exit_file: exit_file.ok_or(ShimArgError::MissingOption("--exit-file"))?,
        log: log.ok_or(ShimArgError::MissingOption("--log"))?,
        workdir,
        argv,
    })
}

/// Entry point of the hidden `task-shim` subcommand, to be called by `main` when `argv[1]` is
/// `task-shim`, before any runtime is started. `args` are the arguments after `task-shim`. Returns
/// the process exit code: the command's code, 128 + signal if it was killed by a signal, 127 if it
/// could not be started, 2 if the shim's own arguments are wrong.
pub fn run_shim(args: &[String]) -> i32 {
    signals::shield_shim();
    match parse_args(args) {
        Ok(parsed) => execute(&parsed),
        Err(e) => {
            // stderr may be /dev/null or closed; a failed write must not panic the shim.
            let _ = writeln!(std::io::stderr(), "gantry {SHIM_SUBCOMMAND}: {e}");
            USAGE_CODE
        }
    }
}

/// Runs the command of `args` to its end and records the result; returns the shim's exit code.
/// Does not touch signal dispositions (so tests can call it in-process).
pub(crate) fn execute(args: &ShimArgs) -> i32 {
    let exit = match open_log(&args.log) {
        Ok(log) => run_command(args, &log),
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "gantry {SHIM_SUBCOMMAND}: cannot open log {}: {e}",
                args.log.display()
            );
            TaskExit::Exited(SPAWN_FAILED_CODE)
        }
    };
    if let Err(e) = record::write_atomic(&args.exit_file, exit) {
        let _ = writeln!(
            std::io::stderr(),
            "gantry {SHIM_SUBCOMMAND}: cannot write exit record {}: {e}",
            args.exit_file.display()
        );
    }
    exit_code(exit)
}

/// Starts the command with its output appended to `log`, and waits for it.
fn run_command(args: &ShimArgs, log: &File) -> TaskExit {
    let (program, rest) = match args.argv.split_first() {
        Some(split) => split,
        None => return TaskExit::Exited(SPAWN_FAILED_CODE),
    };
    let started = log_stdio(log).and_then(|(out, err)| {
        let mut cmd = Command::new(program);
        cmd.args(rest).stdin(Stdio::null()).stdout(out).stderr(err);
        if let Some(dir) = &args.workdir {
            cmd.current_dir(dir);
        }
        cmd.spawn()
    });
    let mut child = match started {
        Ok(child) => child,
        Err(e) => {
            log_line(log, &format!("cannot start `{program}`: {e}"));
            return TaskExit::Exited(SPAWN_FAILED_CODE);
        }
    };
    match child.wait() {
        Ok(status) => record::exit_from_status(status),
        Err(e) => {
            log_line(log, &format!("cannot wait for `{program}`: {e}"));
            TaskExit::Lost
        }
    }
}

/// Opens the log for appending, creating it and its parent directories.
fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

fn log_stdio(log: &File) -> std::io::Result<(Stdio, Stdio)> {
    Ok((Stdio::from(log.try_clone()?), Stdio::from(log.try_clone()?)))
}

/// Appends one line of the shim's own to the task log (best effort).
fn log_line(mut log: &File, message: &str) {
    let _ = writeln!(log, "gantry {SHIM_SUBCOMMAND}: {message}");
}

/// The shim's own exit code for `exit`, shell style.
fn exit_code(exit: TaskExit) -> i32 {
    match exit {
        TaskExit::Exited(code) => code,
        TaskExit::Signaled(sig) => 128 + sig,
        TaskExit::Lost => LOST_CODE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    fn shim_args(dir: &Path, argv: &[&str]) -> ShimArgs {
        ShimArgs {
            exit_file: dir.join("run/exit.json"),
            log: dir.join("logs/nested/task.log"),
            workdir: None,
            argv: strings(argv),
        }
    }

    #[test]
    fn parse_full_and_minimal() {
        let full = strings(&[
            "--exit-file",
            "/e",
            "--log",
            "/l",
            "--workdir",
            "/w",
            "--",
            "a",
            "--",
            "b",
        ]);
        let parsed = parse_args(&full).unwrap();
        assert_eq!(parsed.exit_file, PathBuf::from("/e"));
        assert_eq!(parsed.log, PathBuf::from("/l"));
        assert_eq!(parsed.workdir, Some(PathBuf::from("/w")));
        assert_eq!(parsed.argv, strings(&["a", "--", "b"]));
        let minimal = parse_args(&strings(&["--log", "/l", "--exit-file", "/e", "--", "x"]));
        assert_eq!(minimal.unwrap().workdir, None);
    }

    #[test]
    fn parse_errors() {
        let err = |a: &[&str]| parse_args(&strings(a)).unwrap_err();
        assert_eq!(
            err(&["--log", "/l", "--"]),
            ShimArgError::NoCommand,
            "empty command"
        );
        assert_eq!(
            err(&["--log", "/l", "--", "x"]),
            ShimArgError::MissingOption("--exit-file")
        );
        assert_eq!(
            err(&["--bogus"]),
            ShimArgError::UnknownOption("--bogus".into())
        );
        assert_eq!(err(&["--log"]), ShimArgError::MissingValue("--log".into()));
    }

    #[test]
    fn built_args_parse_back() {
        let launch = TaskLaunch {
            job_id: 1,
            task_index: 0,
            argv: strings(&["sh", "-c", "echo hi"]),
            env: vec![],
            workdir: None,
            log_path: PathBuf::from("/l"),
            exit_path: PathBuf::from("/e"),
        };
        let paths = ShimPaths {
            exit_file: "/e",
            log: "/l",
            workdir: Some("/w"),
        };
        let args = shim_command_args(&paths, &launch);
        assert_eq!(args[0], SHIM_SUBCOMMAND);
        let parsed = parse_args(&args[1..]).unwrap();
        assert_eq!(parsed.argv, launch.argv);
        assert_eq!(parsed.workdir, Some(PathBuf::from("/w")));
    }

    #[test]
    fn records_exit_code_and_captures_output() {
        let dir = tempfile::tempdir().unwrap();
        let args = shim_args(
            dir.path(),
            &["/bin/sh", "-c", "echo hi; echo oops >&2; exit 3"],
        );
        fs::create_dir_all(args.log.parent().unwrap()).unwrap();
        fs::write(&args.log, "earlier line\n").unwrap();
        assert_eq!(execute(&args), 3);
        let exit = fs::read_to_string(&args.exit_file).unwrap();
        assert_eq!(exit.trim(), r#"{"exit":{"Exited":3}}"#);
        let log = fs::read_to_string(&args.log).unwrap();
        assert!(log.starts_with("earlier line\n"), "log is appended: {log}");
        assert!(log.contains("hi\n") && log.contains("oops\n"), "log: {log}");
    }

    #[test]
    fn records_signal() {
        let dir = tempfile::tempdir().unwrap();
        let args = shim_args(dir.path(), &["/bin/sh", "-c", "kill -KILL $$"]);
        assert_eq!(execute(&args), 128 + 9);
        assert_eq!(
            record::read(&args.exit_file).unwrap(),
            Some(TaskExit::Signaled(9))
        );
    }

    #[test]
    fn missing_command_is_127_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let args = shim_args(dir.path(), &["gantry-no-such-command-xyz", "arg"]);
        assert_eq!(execute(&args), SPAWN_FAILED_CODE);
        assert_eq!(
            record::read(&args.exit_file).unwrap(),
            Some(TaskExit::Exited(127))
        );
        let log = fs::read_to_string(&args.log).unwrap();
        assert!(
            log.contains("cannot start `gantry-no-such-command-xyz`"),
            "log: {log}"
        );
    }

    #[test]
    fn workdir_is_applied_and_path_is_searched() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir(&work).unwrap();
        let mut args = shim_args(dir.path(), &["sh", "-c", "pwd -P"]);
        args.workdir = Some(work.clone());
        assert_eq!(execute(&args), 0);
        let log = fs::read_to_string(&args.log).unwrap();
        let expected = fs::canonicalize(&work).unwrap();
        assert_eq!(log.trim(), expected.to_str().unwrap());
    }
}
