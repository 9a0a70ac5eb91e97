//! The job spec of `gantry run` (and of `srun`/`salloc` outside a job): the command, as an
//! `interactive` job, with the resources asked read as `gantry submit` reads them (per-node
//! GPUs and memory divided over a node's tasks, SLURM's time forms), the working directory
//! (`-D`, else here; an image's own in an image) and the variables `--export` selects.
//!
//! Owns: flags → spec. Does not own streaming the job (`run_cli`) or the task arithmetic
//! (`sbatch::Options::task_shape`).

use crate::run_cli::RunArgs;
use crate::sbatch::values::{Gres, parse_gres, parse_mem_mib};
use crate::sbatch::{CpuAmount, GpuAmount, MemAmount, Options};
use anyhow::{Context, bail};
use serde_json::{Value, json};

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
