//! The shim's command line, built by the daemon for `launch` and parsed back by the shim:
//!
//! ```text
//! task-shim --exit-file F --log L [--log-max-bytes N] [--env-file E] [--workdir D]
//!           [--cgroup-procs P]... [--uid U --gid G [--groups G1,G2,...]]
//!           [--input pipe|tty:ROWSxCOLS --input-fifo F] [--stdout-file O] [--stderr-file E]
//!           (--argv-file A | -- argv...)
//! ```
//!
//! The executor passes the command in a file (`--argv-file`, `command_file.rs`): the job's
//! arguments stay off the shim's command line, which every account can read.
//!
//! Owns the format. It does not run anything (`shim.rs`).

use std::path::PathBuf;

use super::child::Ids;
use super::naming::SHIM_SUBCOMMAND;
use super::task_input::TaskInput;

/// The shim's parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShimArgs {
    pub exit_file: PathBuf,
    pub log: PathBuf,
    /// The log's size limit (`log_cap.rs`); output goes straight to the log when `None`.
    pub log_max_bytes: Option<u64>,
    /// The command's whole environment (`environment.rs`); the shim's own when `None`.
    pub env_file: Option<PathBuf>,
    /// Entered by the command after the switch to its user.
    pub workdir: Option<PathBuf>,
    /// `cgroup.procs` files the command joins before it execs.
    pub cgroup_procs: Vec<PathBuf>,
    /// The user the command runs as; the shim's own when `None`.
    pub ids: Option<Ids>,
    /// The command's stdin (`shim_input.rs`): `/dev/null` unless the task is interactive.
    pub input: TaskInput,
    /// The FIFO the task's input arrives through (`task_input.rs`).
    pub input_fifo: Option<PathBuf>,
    /// Files the command's stdout and stderr go to instead of the log, opened by the
    /// command's child as its user (`child.rs`).
    pub stdout_file: Option<PathBuf>,
    pub stderr_file: Option<PathBuf>,
    /// The file holding the command (`command_file.rs`); then `argv` is empty.
    pub argv_file: Option<PathBuf>,
    pub argv: Vec<String>,
    /// The task runs in an image: the request the executor wrote (`container.rs`).
    pub container: Option<PathBuf>,
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
    #[error("option {0} has a bad value {1:?}")]
    BadValue(&'static str, String),
    #[error("the command must be given either after -- or in --argv-file, not both")]
    NoCommand,
}

/// The arguments given to the shim executable, subcommand first. Paths must be UTF-8 (the
/// shim reads its arguments as `String`s); the caller checks that.
pub(crate) fn build(args: &ShimArgs) -> Vec<String> {
    let path = |p: &PathBuf| p.to_string_lossy().into_owned();
    let mut out = vec![
        SHIM_SUBCOMMAND.to_owned(),
        "--exit-file".to_owned(),
        path(&args.exit_file),
        "--log".to_owned(),
        path(&args.log),
    ];
    if let Some(max) = args.log_max_bytes {
        out.extend(["--log-max-bytes".to_owned(), max.to_string()]);
    }
    if let Some(file) = &args.env_file {
        out.extend(["--env-file".to_owned(), path(file)]);
    }
    if let Some(dir) = &args.workdir {
        out.extend(["--workdir".to_owned(), path(dir)]);
    }
    for procs in &args.cgroup_procs {
        out.extend(["--cgroup-procs".to_owned(), path(procs)]);
    }
    if let Some(ids) = &args.ids {
        out.extend(["--uid".to_owned(), ids.uid.to_string()]);
        out.extend(["--gid".to_owned(), ids.gid.to_string()]);
        if !ids.groups.is_empty() {
            let list: Vec<String> = ids.groups.iter().map(u32::to_string).collect();
            out.extend(["--groups".to_owned(), list.join(",")]);
        }
    }
    match args.input {
        TaskInput::None => {}
        TaskInput::Pipe => out.extend(["--input".to_owned(), "pipe".to_owned()]),
        TaskInput::Tty { rows, cols } => {
            out.extend(["--input".to_owned(), format!("tty:{rows}x{cols}")]);
        }
    }
    if let Some(fifo) = &args.input_fifo {
        out.extend(["--input-fifo".to_owned(), path(fifo)]);
    }
    if let Some(file) = &args.stdout_file {
        out.extend(["--stdout-file".to_owned(), path(file)]);
    }
    if let Some(file) = &args.stderr_file {
        out.extend(["--stderr-file".to_owned(), path(file)]);
    }
    if let Some(file) = &args.argv_file {
        out.extend(["--argv-file".to_owned(), path(file)]);
    }
    if let Some(file) = &args.container {
        out.extend(["--container".to_owned(), path(file)]);
    }
    out.push("--".to_owned());
    out.extend(args.argv.iter().cloned());
    out
}

/// `pipe` or `tty:ROWSxCOLS`.
fn input_mode(value: &str) -> Result<TaskInput, ShimArgError> {
    let bad = || ShimArgError::BadValue("--input", value.to_owned());
    if value == "pipe" {
        return Ok(TaskInput::Pipe);
    }
    let (rows, cols) = value
        .strip_prefix("tty:")
        .and_then(|size| size.split_once('x'))
        .ok_or_else(bad)?;
    Ok(TaskInput::Tty {
        rows: rows.parse().map_err(|_| bad())?,
        cols: cols.parse().map_err(|_| bad())?,
    })
}

fn number(option: &'static str, value: &str) -> Result<u32, ShimArgError> {
    value
        .parse()
        .map_err(|_| ShimArgError::BadValue(option, value.to_owned()))
}

/// Parses the arguments that follow `task-shim`.
pub(crate) fn parse(args: &[String]) -> Result<ShimArgs, ShimArgError> {
    let (mut exit_file, mut log, mut workdir, mut env_file) = (None, None, None, None);
    let (mut argv_file, mut input_fifo) = (None, None);
    let (mut stdout_file, mut stderr_file) = (None, None);
    let mut container = None;
    let mut input = TaskInput::None;
    let mut log_max_bytes = None;
    let (mut uid, mut gid, mut groups) = (None, None, Vec::new());
    let mut cgroup_procs = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        if !matches!(
            arg.as_str(),
            "--exit-file"
                | "--log"
                | "--log-max-bytes"
                | "--env-file"
                | "--argv-file"
                | "--workdir"
                | "--cgroup-procs"
                | "--uid"
                | "--gid"
                | "--groups"
                | "--input"
                | "--input-fifo"
                | "--stdout-file"
                | "--stderr-file"
                | "--container"
        ) {
            return Err(ShimArgError::UnknownOption(arg.clone()));
        }
        let value = rest
            .next()
            .ok_or_else(|| ShimArgError::MissingValue(arg.clone()))?;
        match arg.as_str() {
            "--exit-file" => exit_file = Some(PathBuf::from(value)),
            "--log" => log = Some(PathBuf::from(value)),
            "--log-max-bytes" => {
                let max = value
                    .parse()
                    .map_err(|_| ShimArgError::BadValue("--log-max-bytes", value.clone()))?;
                log_max_bytes = Some(max);
            }
            "--env-file" => env_file = Some(PathBuf::from(value)),
            "--argv-file" => argv_file = Some(PathBuf::from(value)),
            "--workdir" => workdir = Some(PathBuf::from(value)),
            "--input" => input = input_mode(value)?,
            "--input-fifo" => input_fifo = Some(PathBuf::from(value)),
            "--stdout-file" => stdout_file = Some(PathBuf::from(value)),
            "--stderr-file" => stderr_file = Some(PathBuf::from(value)),
            "--container" => container = Some(PathBuf::from(value)),
            "--cgroup-procs" => cgroup_procs.push(PathBuf::from(value)),
            "--uid" => uid = Some(number("--uid", value)?),
            "--gid" => gid = Some(number("--gid", value)?),
            _ => {
                groups = value
                    .split(',')
                    .filter(|g| !g.is_empty())
                    .map(|g| number("--groups", g))
                    .collect::<Result<_, _>>()?;
            }
        }
    }
    let argv: Vec<String> = rest.cloned().collect();
    if argv.is_empty() == argv_file.is_none() {
        return Err(ShimArgError::NoCommand);
    }
    let ids = match (uid, gid) {
        (Some(uid), Some(gid)) => Some(Ids { uid, gid, groups }),
        (None, None) if groups.is_empty() => None,
        (Some(_), None) => return Err(ShimArgError::MissingOption("--gid")),
        _ => return Err(ShimArgError::MissingOption("--uid")),
    };
    Ok(ShimArgs {
        exit_file: exit_file.ok_or(ShimArgError::MissingOption("--exit-file"))?,
        log: log.ok_or(ShimArgError::MissingOption("--log"))?,
        log_max_bytes,
        env_file,
        workdir,
        cgroup_procs,
        ids,
        input,
        input_fifo,
        stdout_file,
        stderr_file,
        argv_file,
        argv,
        container,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parse_full_and_minimal() {
        let full = strings(&[
            "--exit-file",
            "/e",
            "--log",
            "/l",
            "--log-max-bytes",
            "1048576",
            "--env-file",
            "/env",
            "--workdir",
            "/w",
            "--cgroup-procs",
            "/c1",
            "--uid",
            "1000",
            "--gid",
            "100",
            "--groups",
            "100,27",
            "--cgroup-procs",
            "/c2",
            "--",
            "a",
            "--",
            "b",
        ]);
        let parsed = parse(&full).unwrap();
        assert_eq!(parsed.exit_file, PathBuf::from("/e"));
        assert_eq!(parsed.log, PathBuf::from("/l"));
        assert_eq!(parsed.log_max_bytes, Some(1 << 20));
        assert_eq!(parsed.workdir, Some(PathBuf::from("/w")));
        assert_eq!(parsed.env_file, Some(PathBuf::from("/env")));
        assert_eq!(
            parsed.cgroup_procs,
            vec![PathBuf::from("/c1"), PathBuf::from("/c2")]
        );
        let ids = Ids {
            uid: 1000,
            gid: 100,
            groups: vec![100, 27],
        };
        assert_eq!(parsed.ids, Some(ids));
        assert_eq!(parsed.argv, strings(&["a", "--", "b"]));
        let minimal = parse(&strings(&["--log", "/l", "--exit-file", "/e", "--", "x"])).unwrap();
        assert_eq!((minimal.workdir, minimal.ids), (None, None));
        assert_eq!(minimal.log_max_bytes, None);
        assert!(minimal.cgroup_procs.is_empty());
    }

    #[test]
    fn parse_errors() {
        let err = |a: &[&str]| parse(&strings(a)).unwrap_err();
        assert_eq!(err(&["--log", "/l", "--"]), ShimArgError::NoCommand);
        assert_eq!(
            err(&["--log", "/l", "--", "x"]),
            ShimArgError::MissingOption("--exit-file")
        );
        assert_eq!(
            err(&["--bogus"]),
            ShimArgError::UnknownOption("--bogus".into())
        );
        assert_eq!(err(&["--log"]), ShimArgError::MissingValue("--log".into()));
        let base = ["--log", "/l", "--exit-file", "/e"];
        let with = |extra: &[&str]| {
            let mut a = base.to_vec();
            a.extend_from_slice(extra);
            a.extend_from_slice(&["--", "x"]);
            parse(&strings(&a)).unwrap_err()
        };
        assert_eq!(
            with(&["--uid", "x1"]),
            ShimArgError::BadValue("--uid", "x1".into())
        );
        assert_eq!(with(&["--uid", "1"]), ShimArgError::MissingOption("--gid"));
        assert_eq!(
            with(&["--log-max-bytes", "-1"]),
            ShimArgError::BadValue("--log-max-bytes", "-1".into())
        );
        assert_eq!(with(&["--gid", "1"]), ShimArgError::MissingOption("--uid"));
        assert_eq!(
            with(&["--input", "tty:24"]),
            ShimArgError::BadValue("--input", "tty:24".into())
        );
        assert_eq!(
            with(&["--uid", "1", "--gid", "1", "--groups", "1,-2"]),
            ShimArgError::BadValue("--groups", "-2".into())
        );
    }

    #[test]
    fn a_command_file_keeps_the_arguments_off_the_command_line() {
        let args = ShimArgs {
            exit_file: PathBuf::from("/e"),
            log: PathBuf::from("/l"),
            log_max_bytes: None,
            env_file: None,
            workdir: None,
            cgroup_procs: vec![],
            ids: None,
            input: TaskInput::None,
            input_fifo: None,
            stdout_file: None,
            stderr_file: None,
            argv_file: Some(PathBuf::from("/e.argv")),
            argv: vec![],
            container: None,
        };
        let built = build(&args);
        assert_eq!(
            built,
            strings(&[
                "task-shim",
                "--exit-file",
                "/e",
                "--log",
                "/l",
                "--argv-file",
                "/e.argv",
                "--"
            ])
        );
        assert_eq!(parse(&built[1..]).unwrap(), args);
        let both = strings(&[
            "--exit-file",
            "/e",
            "--log",
            "/l",
            "--argv-file",
            "/a",
            "--",
            "x",
        ]);
        assert_eq!(parse(&both), Err(ShimArgError::NoCommand));
    }

    #[test]
    fn built_args_parse_back() {
        let args = ShimArgs {
            exit_file: PathBuf::from("/e"),
            log: PathBuf::from("/l"),
            log_max_bytes: Some(5 << 20),
            env_file: Some(PathBuf::from("/env")),
            workdir: Some(PathBuf::from("/w")),
            cgroup_procs: vec![PathBuf::from("/sys/fs/cgroup/memory/g/cgroup.procs")],
            ids: Some(Ids {
                uid: 65534,
                gid: 65534,
                groups: vec![65534],
            }),
            input: TaskInput::Tty {
                rows: 40,
                cols: 132,
            },
            input_fifo: Some(PathBuf::from("/e.stdin")),
            stdout_file: Some(PathBuf::from("out-1.txt")),
            stderr_file: Some(PathBuf::from("err-1.txt")),
            argv_file: None,
            argv: strings(&["sh", "-c", "echo hi"]),
            container: None,
        };
        let built = build(&args);
        assert_eq!(built[0], SHIM_SUBCOMMAND);
        assert_eq!(parse(&built[1..]).unwrap(), args);
        let plain = ShimArgs {
            log_max_bytes: None,
            env_file: None,
            workdir: None,
            cgroup_procs: vec![],
            ids: None,
            input: TaskInput::None,
            input_fifo: None,
            stdout_file: None,
            stderr_file: None,
            ..args
        };
        let built = build(&plain);
        assert_eq!(
            built,
            strings(&[
                "task-shim",
                "--exit-file",
                "/e",
                "--log",
                "/l",
                "--",
                "sh",
                "-c",
                "echo hi"
            ])
        );
        assert_eq!(parse(&built[1..]).unwrap(), plain);
    }
}
