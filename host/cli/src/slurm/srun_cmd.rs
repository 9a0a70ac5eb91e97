//! `srun` and `salloc`. Inside a Gantry job (`SLURM_JOB_ID` and `GANTRY_JOB_ID` set) `srun`
//! runs a job step on the job's own allocation, with no new scheduling: `--ntasks N` local
//! processes in a one-task job (each with its `SLURM_PROCID`, `SLURM_LOCALID` and the step's
//! `SLURM_STEP_*`), or the calling task's own rank in a job of several tasks (each task runs
//! the batch script, and so its `srun`); `--output`/`--error` patterns (`%j %J %s %t %n %N
//! %A %a %x %u`, appended to), `--chdir`, `--export`, `--unbuffered` (output is never
//! buffered here). It outlasts the signals the job's process group gets, which reach the
//! step's processes directly, and exits with the highest exit code of its processes.
//!
//! Outside a job, `srun CMD` is `gantry run` (an interactive job with the resources asked:
//! `-n`, `--gres`, `-G`, `--gpus-per-task`, `-c`, `--mem`, `-t`, `-p`, `-A`, `-J`, `-D`,
//! `--export`, `--container-image`) and `salloc [CMD]` runs `CMD`, or the user's shell,
//! likewise.
//!
//! Owns: srun's and salloc's options and the step's processes. Does not own the
//! interactive job (`run_cli`) or the task arithmetic (`sbatch`).

use super::SlurmCommand;
use super::args::{self, Opt, Takes};
use crate::cli::Client;
use anyhow::{Context, Result, bail};
use std::fs::{File, OpenOptions};
use std::process::{Command, Stdio};
use std::sync::Arc;

const OPTIONS: &[Opt] = &[
    ("ntasks", Some('n'), Takes::Value),
    ("nodes", Some('N'), Takes::Value),
    ("ntasks-per-node", None, Takes::Value),
    ("output", Some('o'), Takes::Value),
    ("error", Some('e'), Takes::Value),
    ("input", Some('i'), Takes::Value),
    ("unbuffered", Some('u'), Takes::Nothing),
    ("job-name", Some('J'), Takes::Value),
    ("cpus-per-task", Some('c'), Takes::Value),
    ("gres", None, Takes::Value),
    ("gpus", Some('G'), Takes::Value),
    ("gpus-per-task", None, Takes::Value),
    ("gpus-per-node", None, Takes::Value),
    ("mem", None, Takes::Value),
    ("mem-per-cpu", None, Takes::Value),
    ("mem-per-gpu", None, Takes::Value),
    ("time", Some('t'), Takes::Value),
    ("partition", Some('p'), Takes::Value),
    ("account", Some('A'), Takes::Value),
    ("export", None, Takes::Value),
    ("chdir", Some('D'), Takes::Value),
    ("container-image", None, Takes::Value),
    ("exclusive", None, Takes::Optional),
    ("overlap", None, Takes::Nothing),
    ("exact", None, Takes::Nothing),
    ("kill-on-bad-exit", Some('K'), Takes::Optional),
    ("wait", Some('W'), Takes::Value),
    ("quiet", Some('Q'), Takes::Nothing),
    ("verbose", Some('v'), Takes::Nothing),
    ("mpi", None, Takes::Value),
    ("cpu-bind", None, Takes::Value),
    ("gpu-bind", None, Takes::Value),
    ("mem-bind", None, Takes::Value),
    ("distribution", Some('m'), Takes::Value),
    ("nodelist", Some('w'), Takes::Value),
    ("open-mode", None, Takes::Value),
    ("pty", None, Takes::Nothing),
    ("jobid", None, Takes::Value),
];

/// Whether this process runs inside a Gantry job.
pub(super) fn inside_job() -> bool {
    std::env::var_os("SLURM_JOB_ID").is_some() && std::env::var_os("GANTRY_JOB_ID").is_some()
}

/// What a step's file pattern names for one of its processes.
struct StepNames<'a> {
    job: &'a str,
    step: u32,
    rank: u32,
    node_rank: &'a str,
    node: &'a str,
    array_job: &'a str,
    array_index: &'a str,
    name: &'a str,
    user: &'a str,
}

/// `pattern` with srun's `%` fields filled in (`%3t`: the rank zero-padded to 3 digits).
fn expand(pattern: &str, n: &StepNames<'_>) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            width.push(d);
        }
        let w: usize = width.parse().unwrap_or(0);
        let num = |v: &str| match v.parse::<u64>() {
            Ok(x) => format!("{x:0w$}"),
            Err(_) => v.to_string(),
        };
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j') => out.push_str(&num(n.job)),
            Some('J') => out.push_str(&format!("{}.{}", n.job, n.step)),
            Some('s') => out.push_str(&num(&n.step.to_string())),
            Some('t') => out.push_str(&num(&n.rank.to_string())),
            Some('n') => out.push_str(&num(n.node_rank)),
            Some('N') => out.push_str(n.node),
            Some('A') => out.push_str(&num(n.array_job)),
            Some('a') => out.push_str(&num(n.array_index)),
            Some('x') => out.push_str(n.name),
            Some('u') => out.push_str(n.user),
            Some(other) => {
                out.push('%');
                out.push_str(&width);
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Opens an output file of the step as this process's user, appending.
fn open_output(path: &str) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {path} for the step's output"))
}

/// Runs a job step: `srun [OPTIONS] CMD ARGS` inside a job.
pub(super) fn step(args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, true)?;
    let Some((program, program_args)) = line.operands.split_first() else {
        bail!("No command given to execute.");
    };
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let job_tasks: u32 = var("SLURM_NTASKS").parse().unwrap_or(1);
    let asked: Option<u32> = match line.value("ntasks") {
        Some(n) => Some(
            n.parse()
                .with_context(|| format!("--ntasks {n}: not a number"))?,
        ),
        None => None,
    };
    // In a job of several tasks every task runs the script: its srun is its own rank.
    let own_rank_only = job_tasks > 1;
    let count = if own_rank_only {
        1
    } else {
        asked.unwrap_or(1).max(1)
    };
    if own_rank_only && asked.is_some_and(|n| n != job_tasks) && !line.has("quiet") {
        eprintln!(
            "srun: note: each of the job's {job_tasks} tasks runs the batch script; this step \
             runs its rank {} only",
            var("SLURM_PROCID")
        );
    }
    if count > 1024 {
        bail!("--ntasks {count}: at most 1024 processes in one step");
    }
    let step = var("SLURM_STEP_ID").parse::<u32>().map_or(0, |s| s + 1);
    let exported = match line.value("export") {
        Some(spec) => Some(crate::export::exported(spec, std::env::vars_os())?),
        None => None,
    };
    let job = var("SLURM_JOB_ID");
    let (node_rank, node) = (var("SLURM_NODEID"), var("SLURMD_NODENAME"));
    let (array_job, array_index) = (var("SLURM_ARRAY_JOB_ID"), var("SLURM_ARRAY_TASK_ID"));
    let (name, user) = (var("SLURM_JOB_NAME"), var("SLURM_JOB_USER"));
    gantry_node::sys::outlast_group_signals();
    let mut children = Vec::new();
    for i in 0..count {
        let rank = if own_rank_only {
            var("SLURM_PROCID").parse().unwrap_or(0)
        } else {
            i
        };
        let names = StepNames {
            job: &job,
            step,
            rank,
            node_rank: &node_rank,
            node: &node,
            array_job: &array_job,
            array_index: &array_index,
            name: &name,
            user: &user,
        };
        let mut cmd = Command::new(program);
        cmd.args(program_args);
        if let Some(vars) = &exported {
            cmd.env_clear();
            for (k, v) in vars {
                cmd.env(k, v.as_str().unwrap_or_default());
            }
            for k in ["SLURM_JOB_ID", "GANTRY_JOB_ID", "PATH"] {
                if let Some(v) = std::env::var_os(k) {
                    cmd.env(k, v);
                }
            }
        }
        cmd.envs([
            ("SLURM_STEP_ID", step.to_string()),
            ("SLURM_STEPID", step.to_string()),
            ("SLURM_STEP_NUM_TASKS", count.to_string()),
            ("SLURM_STEP_NUM_NODES", "1".into()),
            ("SLURM_STEP_NODELIST", node.clone()),
            ("SLURM_STEP_TASKS_PER_NODE", count.to_string()),
        ]);
        if !own_rank_only {
            cmd.envs([
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_LOCALID", rank.to_string()),
                ("SLURM_NTASKS", count.to_string()),
                ("SLURM_NPROCS", count.to_string()),
                ("RANK", rank.to_string()),
                ("LOCAL_RANK", rank.to_string()),
                ("WORLD_SIZE", count.to_string()),
            ]);
        }
        if let Some(dir) = line.value("chdir") {
            cmd.current_dir(dir);
        }
        if let Some(pattern) = line.value("output") {
            let out = open_output(&expand(pattern, &names))?;
            let err = match line.value("error") {
                Some(e) => open_output(&expand(e, &names))?,
                None => out.try_clone()?,
            };
            cmd.stdout(out).stderr(err);
        } else if let Some(e) = line.value("error") {
            cmd.stderr(open_output(&expand(e, &names))?);
        }
        if let Some(input) = line.value("input") {
            cmd.stdin(File::open(input).with_context(|| format!("cannot open {input}"))?);
        } else if i > 0 {
            cmd.stdin(Stdio::null());
        }
        children.push(
            cmd.spawn()
                .with_context(|| format!("{program}: cannot execute"))?,
        );
    }
    let mut worst = 0;
    for mut child in children {
        let status = child.wait()?;
        let code = status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        });
        worst = worst.max(code);
    }
    Ok(worst)
}

/// `srun CMD` or `salloc [CMD]` outside a job: an interactive job with the asked resources.
pub(super) fn interactive(client: Client, cmd: SlurmCommand, args: &[String]) -> Result<i32> {
    let line = args::parse(OPTIONS, args, true)?;
    let mut command = line.operands.clone();
    if command.is_empty() {
        if cmd == SlurmCommand::Srun {
            bail!("No command given to execute.");
        }
        command.push(std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()));
    }
    for unserved in [
        "nodes",
        "ntasks-per-node",
        "gpus-per-node",
        "mem-per-cpu",
        "mem-per-gpu",
    ] {
        if line.has(unserved) {
            bail!(
                "--{unserved} is not served by srun outside a job: submit a batch job \
                 (sbatch) for that shape"
            );
        }
    }
    let value = |k: &str| line.value(k).map(str::to_string);
    let number = |k: &str| -> Result<Option<u32>> {
        line.value(k)
            .map(|v| {
                v.parse::<u32>()
                    .with_context(|| format!("--{k} {v}: not a number"))
            })
            .transpose()
    };
    let run = crate::run_cli::RunArgs {
        gpus: number("gpus-per-task")?,
        gres: value("gres").or_else(|| line.value("gpus").map(|g| format!("gpu:{g}"))),
        tasks: number("ntasks")?,
        cpus_per_task: number("cpus-per-task")?,
        mem: value("mem"),
        time: value("time"),
        queue: value("partition"),
        account: value("account"),
        name: value("job-name"),
        chdir: value("chdir").map(std::path::PathBuf::from),
        export: value("export"),
        no_pty: !line.has("pty") && cmd == SlurmCommand::Srun,
        image: value("container-image"),
        command,
        ..Default::default()
    };
    crate::run_cli::run(Arc::new(client), &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_patterns_name_the_step_and_rank() {
        let n = StepNames {
            job: "42",
            step: 1,
            rank: 3,
            node_rank: "0",
            node: "gpu01",
            array_job: "40",
            array_index: "2",
            name: "train",
            user: "alice",
        };
        assert_eq!(expand("/o/%j_%t_log.out", &n), "/o/42_3_log.out");
        assert_eq!(
            expand("%A_%a_%3t.%J.%N.%x.%u.%%", &n),
            "40_2_003.42.1.gpu01.train.alice.%"
        );
        assert_eq!(expand("%q", &n), "%q");
    }
}
