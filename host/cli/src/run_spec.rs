//! The job spec of `gantry run` (and of `srun`/`salloc` outside a job): the command, as an
//! `interactive` job, with the resources asked read as `gantry submit` reads them (per-node
//! GPUs and memory divided over a node's tasks, SLURM's time forms), the working directory
//! (`-D`, else here; an image's own in an image) and the variables `--export` selects.
//!
//! Owns: the flags (`RunArgs`) and flags → spec. Does not own streaming the job (`run_cli`)
//! or the task arithmetic (`sbatch::Options::task_shape`).

use crate::sbatch::values::{Gres, parse_gres, parse_mem_mib};
use crate::sbatch::{CpuAmount, GpuAmount, MemAmount, Options};
use anyhow::{Context, bail};
use serde_json::{Value, json};

/// Options of `gantry run`: the resource flags of `gantry submit` (and srun's spellings).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// Whole GPUs per task.
    #[arg(long, visible_alias = "gpus-per-task", conflicts_with_all = ["gpu_milli", "gres"])]
    pub gpus: Option<u32>,
    /// A fraction of one GPU per task, in milli-GPU (e.g. 500).
    #[arg(long, conflicts_with = "gres")]
    pub gpu_milli: Option<u32>,
    /// GPUs per node, as srun --gres=gpu[:TYPE]:N (divided over a node's tasks).
    #[arg(long)]
    pub gres: Option<String>,
    /// Tasks (ranks) of the job (default 1).
    #[arg(short = 'n', long, visible_alias = "ntasks")]
    pub tasks: Option<u32>,
    /// CPU per task in milli-cores (default 1000).
    #[arg(long, conflicts_with = "cpus_per_task")]
    pub cpu_milli: Option<u32>,
    /// Whole cores per task.
    #[arg(short = 'c', long)]
    pub cpus_per_task: Option<u32>,
    /// Memory per task in MiB (default 1024).
    #[arg(long, conflicts_with = "mem")]
    pub mem_mib: Option<u64>,
    /// Memory per node, SLURM style (4096, 500M, 16G), divided over the node's tasks.
    #[arg(long)]
    pub mem: Option<String>,
    /// Time limit, as submit reads it: 90s, 15m, 4h, or SLURM's forms (a bare number is minutes,
    /// 1:00:00, 1-12); the queue may cap interactive jobs.
    #[arg(short = 't', long)]
    pub time: Option<String>,
    /// Queue (default: `default`).
    #[arg(short = 'p', long, visible_alias = "partition")]
    pub queue: Option<String>,
    /// Account.
    #[arg(short = 'A', long)]
    pub account: Option<String>,
    /// Job name (default: the command).
    #[arg(short = 'J', long, visible_alias = "job-name")]
    pub name: Option<String>,
    /// Working directory of the job (default: here).
    #[arg(short = 'D', long)]
    pub chdir: Option<std::path::PathBuf>,
    /// Which of your shell's variables the job gets, as submit's --export (ALL, NONE, or a
    /// list); default: none of them.
    #[arg(long)]
    pub export: Option<String>,
    /// Environment variable K=V (repeatable).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// Do not send this client's stdin (the job reads /dev/null), as `srun --input=none`.
    #[arg(long)]
    pub no_stdin: bool,
    /// No terminal for the job even when stdin is one (stdin is sent as bytes).
    #[arg(long)]
    pub no_pty: bool,
    /// Run in this container image (as `gantry submit --image`); the working directory is
    /// the image's.
    #[arg(long, visible_alias = "container-image")]
    pub image: Option<String>,
    /// A host path to see inside the image, SRC[:DST][:ro] (repeatable).
    #[arg(long = "mount", visible_alias = "container-mounts")]
    pub mounts: Vec<String>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// The resources `a` asks for, as the options `gantry submit` would have.
fn options(a: &RunArgs) -> anyhow::Result<Options> {
    let mut gpu_models = None;
    let gpus = match (a.gpus, a.gpu_milli, &a.gres) {
        (Some(n), ..) => Some(GpuAmount::PerTask(n)),
        (None, Some(m), _) => Some(GpuAmount::MilliPerTask(m)),
        (None, None, Some(text)) => {
            let mut per_node = None;
            for g in parse_gres(text).map_err(|e| anyhow::anyhow!("--gres {e}"))? {
                match g {
                    Gres::Gpu { count, model } => {
                        per_node = Some(GpuAmount::PerNode(count));
                        gpu_models = model.map(|m| vec![m]);
                    }
                    Gres::Other(name) => {
                        bail!("--gres {name}: GPUs are the only generic resource Gantry has")
                    }
                }
            }
            per_node
        }
        (None, None, None) => None,
    };
    let cpu = match (a.cpu_milli, a.cpus_per_task) {
        (Some(m), _) => Some(CpuAmount::MilliPerTask(m)),
        (None, Some(c)) => Some(CpuAmount::MilliPerTask(
            c.checked_mul(1000)
                .context("--cpus-per-task is too large")?,
        )),
        (None, None) => None,
    };
    let memory = match (a.mem_mib, &a.mem) {
        (Some(m), _) => Some(MemAmount::PerTask(m)),
        (None, Some(t)) => Some(MemAmount::PerNode(
            parse_mem_mib(t).map_err(|e| anyhow::anyhow!("--mem {e}"))?,
        )),
        (None, None) => None,
    };
    Ok(Options {
        ntasks: a.tasks,
        gpus,
        gpu_models,
        cpu,
        memory,
        ..Options::default()
    })
}

/// The job spec of `gantry run`.
pub fn run_body(a: &RunArgs, with_token: bool) -> anyhow::Result<Value> {
    let shape = options(a)?.task_shape().map_err(anyhow::Error::msg)?;
    let mut env = match &a.export {
        Some(spec) => crate::export::exported(spec, std::env::vars_os())?,
        None => serde_json::Map::new(),
    };
    let user = if with_token {
        String::new()
    } else {
        std::env::var("USER").unwrap_or_default()
    };
    crate::export::drop_roots_identity(&mut env, &user, crate::export::own_uid());
    env.extend(crate::cli::env_vars(&a.env)?);
    let mut mounts = Vec::new();
    for m in &a.mounts {
        mounts.extend(
            gantry_api::model::ContainerMount::parse_list(m)
                .map_err(|e| anyhow::anyhow!("--mount: {e}"))?,
        );
    }
    // In an image the host's directory means nothing: the image's working directory.
    let workdir = match (&a.image, &a.chdir) {
        (Some(_), _) => None,
        (None, Some(dir)) => Some(dir.to_string_lossy().into_owned()),
        (None, None) => std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned()),
    };
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| a.command.first().cloned().unwrap_or_default());
    Ok(json!({
        "image": a.image,
        "mounts": mounts,
        "name": name,
        "kind": "interactive",
        "argv": a.command,
        "env": env,
        "workdir": workdir,
        "tasks": shape.task_groups(),
        "share_node_gpus": shape.shared_gpus > 0,
        "nodes": (shape.shared_gpus > 0).then_some(1),
        "time_limit_s": a.time.as_deref().map(crate::submit_cli::parse_time_flag).transpose()?.unwrap_or(0),
        "user": user,
        "account": a.account.clone().unwrap_or_default(),
        "queue": a.queue.clone().unwrap_or_else(|| "default".into()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn body(args: &[&str]) -> anyhow::Result<Value> {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))?;
        run_body(&cli.run, true)
    }

    #[test]
    fn run_reads_submits_resource_flags() {
        let b = body(&[
            "-n",
            "2",
            "--gres=gpu:2",
            "-c",
            "3",
            "--mem",
            "4G",
            "-t",
            "5",
            "-J",
            "x",
            "-p",
            "gpu",
            "-D",
            "/srv",
            "--",
            "true",
        ])
        .unwrap();
        let t = &b["tasks"][0];
        assert_eq!(
            (t["count"].as_u64(), t["gpus"].as_u64()),
            (Some(2), Some(1))
        );
        assert_eq!(t["cpu_milli"], 3000);
        assert_eq!(t["memory_mib"], 2048);
        assert_eq!(b["time_limit_s"], 300);
        assert_eq!(
            (b["name"].as_str(), b["queue"].as_str()),
            (Some("x"), Some("gpu"))
        );
        assert_eq!(b["workdir"], "/srv");
        let plain = body(&["--", "date"]).unwrap();
        assert_eq!(plain["tasks"][0]["cpu_milli"], 1000);
        assert_eq!(plain["time_limit_s"], 0);
        assert!(body(&["-t", "1:00:00", "--", "true"]).is_ok());
        assert!(body(&["--gres=license:1", "--", "true"]).is_err());
    }
}
