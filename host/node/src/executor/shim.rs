//! The `task-shim` side of the executor: the small supervisor process that sits between the daemon
//! and a task's command. It runs the command with stdout and stderr appended to the task's log
//! (opened by the shim, never through a link, mode 0600; with a size limit, through a pipe the
//! shim copies up to the limit, `log_cap.rs`, the log staying the daemon's so the task cannot
//! reopen it by name; without one, handed to the task's user), inside
//! the task's cgroups, as the task's user and in its working directory entered as that user
//! (`child.rs`), with exactly the environment of its env file (`environment.rs`: the shim
//! itself starts with the daemon's choice, so nothing of the job's reaches a root process),
//! waits for it with `wait4` to learn what its process tree used, and records how it ended in
//! the exit file, so the end of a task is known even if the daemon was restarted meanwhile.
//! Plain `std::process`, no tokio; one thread, and a second one copying output when the log
//! has a size limit.
//!
//! Owns the shim's run. It does not own its command line (`shim_args.rs`), nor signal anything:
//! `terminate` signals the whole process group, which reaches the command directly while the
//! shim itself survives SIGTERM and hands on what arrived before the command ran
//! (`shim_signals.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use super::child::{ChildSetup, Ids};
use super::log_cap::{self, Copier, Piped};
use super::naming::SHIM_SUBCOMMAND;
use super::record::ExitRecord;
use super::shim_args::{self, ShimArgs};
use super::shim_input::Input;
use super::{TaskExit, record, shim_signals, signals};

/// Exit code of the shim, and recorded exit, when the command cannot be started.
pub(crate) const SPAWN_FAILED_CODE: i32 = 127;

/// Exit code of the shim, and recorded exit, when a task's image could not be made ready or
/// its bundle written (the reason is in the task's log), as `docker run` answers 125.
pub const IMAGE_FAILED_CODE: i32 = 125;

/// Exit code of the shim when its own arguments are wrong (nothing is recorded then).
pub(crate) const USAGE_CODE: i32 = 2;

/// Exit code of the shim when waiting for the command failed (recorded as `Lost`).
const LOST_CODE: i32 = 255;

/// Entry point of the hidden `task-shim` subcommand, to be called by `main` when `argv[1]` is
/// `task-shim`, before any runtime is started. `args` are the arguments after `task-shim`. Returns
/// the process exit code: the command's code, 128 + signal if it was killed by a signal, 127 if it
/// could not be started, 2 if the shim's own arguments are wrong.
pub fn run_shim(args: &[String]) -> i32 {
    shim_signals::shield_shim();
    // Whatever started the shim, nothing above fd 2 reaches the command (its own pipes and
    // log are opened close-on-exec and handed over as stdout and stderr).
    if let Err(e) = crate::process_hygiene::mark_inherited_fds_cloexec() {
        let _ = writeln!(
            std::io::stderr(),
            "gantry {SHIM_SUBCOMMAND}: cannot mark inherited descriptors close-on-exec: {e}"
        );
        return USAGE_CODE;
    }
    match shim_args::parse(args) {
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
    // With a size limit the command writes into a pipe the shim copies up to the limit, so
    // the log stays the daemon's: a task that reopened it by name could write past the limit.
    let owner = args.ids.as_ref().filter(|_| args.log_max_bytes.is_none());
    let record = match open_log(&args.log, owner) {
        Ok(log) => run_command(args, &log),
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "gantry {SHIM_SUBCOMMAND}: cannot open log {}: {e}",
                args.log.display()
            );
            ExitRecord::exit_only(TaskExit::Exited(SPAWN_FAILED_CODE))
        }
    };
    if let Err(e) = record::write_atomic(&args.exit_file, &record) {
        let _ = writeln!(
            std::io::stderr(),
            "gantry {SHIM_SUBCOMMAND}: cannot write exit record {}: {e}",
            args.exit_file.display()
        );
    }
    exit_code(record.exit)
}

/// Starts the command with its output appended to `log` (in its cgroups, as its user), and
/// waits for it.
fn run_command(args: &ShimArgs, log: &File) -> ExitRecord {
    let failed = ExitRecord::exit_only(TaskExit::Exited(SPAWN_FAILED_CODE));
    let argv = match &args.argv_file {
        Some(file) => match super::command_file::read(file) {
            Ok(argv) => argv,
            Err(e) => {
                log_line(
                    log,
                    &format!("cannot read the command file {}: {e}", file.display()),
                );
                return failed;
            }
        },
        None => args.argv.clone(),
    };
    let env = args
        .env_file
        .as_deref()
        .map(super::environment::read_file)
        .transpose();
    // In an image, the runtime (as root, in the task's cgroups) runs the command as the
    // user inside: it gets the environment through the bundle, and the runtime only PATH.
    let (argv, env, ids) = match (&args.container, env) {
        (Some(request), Ok(env)) => {
            let task_env = env.unwrap_or_default();
            let mut say = |line: &str| log_line(log, line);
            match super::container_launch::prepare_in_shim(
                request,
                &argv,
                &task_env,
                &args.cgroup_procs,
                &mut say,
            ) {
                Ok(runtime_argv) => (
                    runtime_argv,
                    Ok(Some(
                        super::environment::shim_env()
                            .map(|(k, v)| (k.to_string(), v))
                            .to_vec(),
                    )),
                    None,
                ),
                Err(e) => {
                    log_line(log, &format!("cannot run the task in its image: {e}"));
                    return ExitRecord::exit_only(TaskExit::ImageFailed);
                }
            }
        }
        (_, env) => (argv, env, args.ids.as_ref()),
    };
    let Some((program, rest)) = argv.split_first() else {
        return failed;
    };
    let setup = ChildSetup::new(&args.cgroup_procs, ids, args.workdir.as_deref()).and_then(|s| {
        s.with_output_files(args.stdout_file.as_deref(), args.stderr_file.as_deref())
    });
    for (what, file) in [("stdout", &args.stdout_file), ("stderr", &args.stderr_file)] {
        if let Some(f) = file {
            log_line(
                log,
                &format!("{what} goes to {} (--output/--error)", f.display()),
            );
        }
    }
    let (setup, env) = match (setup, env) {
        (Ok(setup), Ok(env)) => (setup, env),
        (Err(e), _) | (_, Err(e)) => {
            log_line(log, &format!("cannot prepare `{program}`: {e}"));
            return failed;
        }
    };
    let input = match Input::open(args.input, args.input_fifo.as_deref(), args.ids.as_ref()) {
        Ok(input) => input,
        Err(e) => {
            log_line(log, &format!("cannot open the input of `{program}`: {e}"));
            return failed;
        }
    };
    // A terminal's output, or a log with a size limit: the shim copies it into the log.
    let captured = match input.terminal_output() {
        Some(terminal) => terminal.and_then(|(out, err, master)| {
            let limit = args.log_max_bytes.unwrap_or(u64::MAX);
            Ok((
                Some(Copier::start(master, log.try_clone()?, limit)?),
                out,
                err,
            ))
        }),
        None => match args.log_max_bytes.map(|max| Piped::start(log, max)) {
            Some(Ok(piped)) => piped
                .stdio()
                .map(|(out, err)| (Some(piped.into_copier()), out, err)),
            Some(Err(e)) => Err(e),
            None => log_stdio(log).map(|(out, err)| (None, out, err)),
        },
    };
    let (copier, out, err) = match captured {
        Ok(captured) => captured,
        Err(e) => {
            log_line(
                log,
                &format!("cannot capture the output of `{program}`: {e}"),
            );
            return failed;
        }
    };
    let started = input.stdin().and_then(|stdin| {
        let mut cmd = Command::new(program);
        cmd.args(rest).stdin(stdin).stdout(out).stderr(err);
        if let Some(env) = env {
            cmd.env_clear()
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        // SAFETY: `apply` makes only async-signal-safe calls on data prepared before the
        // fork (see child.rs).
        // `pass_caught_signals_to_command` comes last, after the user switch.
        unsafe {
            cmd.pre_exec(move || {
                setup.apply()?;
                shim_signals::pass_caught_signals_to_command()
            });
        }
        cmd.spawn()
    });
    let child = match started {
        Ok(child) => child,
        Err(e) => {
            drop(input);
            if let Some(copier) = copier {
                copier.finish(log_cap::DRAIN_GRACE);
            }
            let files = if args.stdout_file.is_some() || args.stderr_file.is_some() {
                " (its --output/--error file must be one its user may write)"
            } else {
                ""
            };
            let unreachable = ids.map_or_else(String::new, |ids| {
                let who = super::task_files::Searcher {
                    uid: ids.uid,
                    gid: ids.gid,
                    groups: &ids.groups,
                };
                super::task_files::unreachable(who, args.workdir.as_deref(), program, &args.log)
            });
            log_line(
                log,
                &format!("cannot start `{program}`: {e}{files}{unreachable}"),
            );
            return failed;
        }
    };
    if let Err(e) = input.start_relay() {
        log_line(log, &format!("cannot relay the input of `{program}`: {e}"));
    }
    let record = match signals::wait_with_usage(child.id()) {
        Ok((status, usage)) => ExitRecord {
            exit: record::exit_from_status(ExitStatus::from_raw(status)),
            usage: Some(usage),
        },
        Err(e) => {
            log_line(log, &format!("cannot wait for `{program}`: {e}"));
            ExitRecord::exit_only(TaskExit::Lost)
        }
    };
    if let Some(copier) = copier {
        copier.finish(log_cap::DRAIN_GRACE);
    }
    record
}

/// Opens the log for appending (never through a link), creating it and its parent
/// directories, readable by nobody else; handed to `owner` when given (a log without a size
/// limit, which the command writes to directly).
fn open_log(path: &Path, ids: Option<&Ids>) -> std::io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, fchown};
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let log = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    if let Some(ids) = ids {
        fchown(&log, Some(ids.uid), Some(ids.gid))?;
    }
    use std::os::unix::fs::PermissionsExt;
    log.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(log)
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
        TaskExit::ImageFailed => IMAGE_FAILED_CODE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::task_input::TaskInput;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    fn shim_args(dir: &Path, argv: &[&str]) -> ShimArgs {
        ShimArgs {
            exit_file: dir.join("run/exit.json"),
            log: dir.join("logs/nested/task.log"),
            log_max_bytes: None,
            env_file: None,
            workdir: None,
            cgroup_procs: vec![],
            ids: None,
            input: TaskInput::None,
            input_fifo: None,
            stdout_file: None,
            stderr_file: None,
            argv_file: None,
            argv: strings(argv),
            container: None,
        }
    }

    fn exit_of(path: &Path) -> Option<TaskExit> {
        record::read(path).unwrap().map(|r| r.exit)
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
        assert!(
            exit.starts_with(r#"{"exit":{"Exited":3},"usage":{"#),
            "{exit}"
        );
        let log = fs::read_to_string(&args.log).unwrap();
        assert!(log.starts_with("earlier line\n"), "log is appended: {log}");
        assert!(log.contains("hi\n") && log.contains("oops\n"), "log: {log}");
    }

    #[test]
    fn a_capped_log_ends_with_the_cut_line_and_a_lingering_child_does_not_hold_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("lingering.pid");
        // 100 kB of output, then a background process that keeps the output pipe open.
        let script = format!(
            "head -c 100000 /dev/zero | tr '\\0' x; sleep 20 & echo $! > {}; exit 4",
            pid_file.display()
        );
        let mut args = shim_args(dir.path(), &["/bin/sh", "-c", &script]);
        args.log_max_bytes = Some(4096);
        let started = std::time::Instant::now();
        assert_eq!(execute(&args), 4);
        let took = started.elapsed();
        if let Ok(pid) = fs::read_to_string(&pid_file) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");
        assert_eq!(exit_of(&args.exit_file), Some(TaskExit::Exited(4)));
        let log = fs::read_to_string(&args.log).unwrap();
        let cut = format!("\n{}\n", log_cap::cut_line(4096));
        assert!(
            log.ends_with(&cut),
            "{}",
            &log[log.len().saturating_sub(200)..]
        );
        assert_eq!(log.len(), 4096 + cut.len());
        assert!(log[..4096].bytes().all(|b| b == b'x'));
    }

    #[test]
    fn records_signal() {
        let dir = tempfile::tempdir().unwrap();
        let args = shim_args(dir.path(), &["/bin/sh", "-c", "kill -KILL $$"]);
        assert_eq!(execute(&args), 128 + 9);
        assert_eq!(exit_of(&args.exit_file), Some(TaskExit::Signaled(9)));
    }

    #[test]
    fn missing_command_is_127_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let args = shim_args(dir.path(), &["gantry-no-such-command-xyz", "arg"]);
        assert_eq!(execute(&args), SPAWN_FAILED_CODE);
        assert_eq!(exit_of(&args.exit_file), Some(TaskExit::Exited(127)));
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

    #[test]
    fn records_cpu_time_and_peak_memory_of_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        // A grandchild (python, reaped by sh) touches 64 MiB and burns CPU for ~300 ms.
        let script = "python3 -c 'import time\nb=bytearray(64<<20)\nt=time.time()\n\
                      while time.time()-t<0.3: pass'; true";
        let args = shim_args(dir.path(), &["/bin/sh", "-c", script]);
        assert_eq!(
            execute(&args),
            0,
            "{}",
            fs::read_to_string(&args.log).unwrap_or_default()
        );
        let usage = record::read(&args.exit_file)
            .unwrap()
            .unwrap()
            .usage
            .unwrap();
        assert!(usage.memory_peak_mib >= 64, "{usage:?}");
        assert!(usage.memory_peak_mib < 1024, "{usage:?}");
        assert!(usage.cpu_ms >= 200, "{usage:?}");
        assert!(!usage.oom_killed);
    }

    #[test]
    fn runs_as_the_given_user_and_refuses_unjoinable_cgroups() {
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "switching users needs root: this test needs root (CI runs it as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        // A directory the user may write in, where the command leaves a file of its own.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        let made = open.join("made");
        let script = format!("id -u; id -g; id -G; touch '{}'", made.display());
        let mut args = shim_args(dir.path(), &["sh", "-c", &script]);
        args.ids = Some(super::super::child::Ids {
            uid: 65534,
            gid: 65534,
            groups: vec![65534, 4242],
        });
        assert_eq!(execute(&args), 0);
        let log = fs::read_to_string(&args.log).unwrap();
        assert_eq!(log, "65534\n65534\n65534 4242\n");
        let meta = fs::metadata(&made).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (65534, 65534),
            "the command's file is the user's"
        );

        let mut args = shim_args(dir.path(), &["sh", "-c", "echo ran"]);
        args.cgroup_procs = vec![dir.path().join("no-such-cgroup/cgroup.procs")];
        assert_eq!(execute(&args), SPAWN_FAILED_CODE);
        let log = fs::read_to_string(&args.log).unwrap();
        assert!(
            !log.contains("ran"),
            "the command must not run outside its cgroup: {log}"
        );
        assert!(log.contains("cannot start `sh`"), "{log}");
    }

    #[test]
    fn a_user_stopped_on_the_way_to_its_workdir_is_told_which_directory_stops_it() {
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(root, "switching users needs root (CI runs it as root)");
        // The task's directory in a data dir under a 0700 `mktemp -d`.
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let work = dir.path().join("data/jobs/1/work");
        fs::create_dir_all(&work).unwrap();
        std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();
        let mut args = shim_args(dir.path(), &["true"]);
        args.workdir = Some(work.clone());
        args.ids = Some(super::super::child::Ids {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        });
        assert_eq!(execute(&args), SPAWN_FAILED_CODE);
        let log = fs::read_to_string(&args.log).unwrap();
        let expected = format!(
            "cannot start `true`: Permission denied (os error 13); uid 65534 cannot reach its working directory {}: {} is mode 0700, owned by uid 0 (it lies above the task's own directory",
            work.display(),
            dir.path().display()
        );
        assert!(log.contains(&expected), "{log}");
    }
}
