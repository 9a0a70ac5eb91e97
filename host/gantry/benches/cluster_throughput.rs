//! Load generator for multi-node: a controller and three agents on 127.0.0.1, each agent a
//! real `gantry agent` process with 4 fake GPUs (`--gpus 4 --no-nvml`), tasks run through the
//! agents' executors (cgroups as `BENCH_CGROUPS`, default "off" so that several agents can
//! share this host; one cgroup parent per agent otherwise).
//!
//! `cargo bench -p gantry --bench cluster_throughput` measures, with one sequential client:
//!
//! * `gang_latency`: `BENCH_GANG_REPS` (30) jobs of 2 tasks × 4 GPUs, which cannot share a
//!   4-GPU node, so every one spans two agents; each task writes its own start time
//!   (`date +%s.%N`); latency = the later rank's time minus the wall clock just before the
//!   submit request (submit → all ranks running). Median and p90.
//! * `complete`: `BENCH_N` (2000) one-GPU `/bin/true` jobs submitted back to back, then waited
//!   for: jobs per second from the first submit to the last end, and the controller's CPU
//!   seconds and memory (VmRSS and VmHWM from `/proc/<pid>/status`) over the run.
//!
//! Prints `RESULT {json}` lines and appends them to `target/bench-cluster/gantry-<time>.jsonl`.
//! It asserts nothing about speed. Knobs: `BENCH_N`, `BENCH_GANG_REPS`, `BENCH_CGROUPS`,
//! `GANTRY_BIN`.

#[allow(dead_code)]
#[path = "exec_throughput/support.rs"]
mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{
    Result, agent, binary, cpu, cpu_report, get, merge, one_gpu_task, outcome, stats, submit,
    unix_now, wait_idle,
};

const TOKEN: &str = "bench-cluster-token-0123456789";
const AGENTS: usize = 3;

/// A child process killed however the benchmark ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads stdout until a line starting with `prefix`; returns the rest of the line, and keeps
/// draining the pipe afterwards.
fn wait_line(child: &mut Child, prefix: &str) -> Result<String> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let found = loop {
        let line = lines
            .next()
            .ok_or("the process exited before listening")??;
        if let Some(i) = line.find(prefix) {
            break line[i + prefix.len()..].to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok(found)
}

fn execution(parent: &str) -> String {
    let cgroups = std::env::var("BENCH_CGROUPS").unwrap_or_else(|_| "off".into());
    format!(
        "[auth]\nanonymous_role = \"admin\"\n[execution]\ncgroups = \"{cgroups}\"\nrun_as_user = false\ncgroup_parent = \"{parent}\"\n"
    )
}

fn start_controller(dir: &Path) -> Result<(Proc, String)> {
    let cfg = dir.join("controller.toml");
    let parent = format!("gantry-bench-ctl-{}", std::process::id());
    std::fs::write(
        &cfg,
        format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 500\nnode_down_after_ms = 5000\n{}",
            execution(&parent)
        ),
    )?;
    let mut child = Command::new(binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--no-nvml", "--config"])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.join("controller"))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("controller.err"))?)
        .spawn()?;
    let base = wait_line(&mut child, "gantry listening on ")?;
    Ok((Proc(child), base))
}

fn start_agent(dir: &Path, base: &str, i: usize) -> Result<Proc> {
    let name = format!("bench-{i}");
    let cfg = dir.join(format!("{name}.toml"));
    let parent = format!("gantry-bench-{name}-{}", std::process::id());
    std::fs::write(
        &cfg,
        format!(
            "[node]\ncpu_milli = 32000\nmemory_mib = 8192\n{}",
            execution(&parent)
        ),
    )?;
    let mut child = Command::new(binary())
        .args(["agent", "--controller", base, "--listen", "127.0.0.1:0"])
        .args(["--name", &name, "--gpus", "4", "--no-nvml", "--config"])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.join(&name))
        .env("GANTRY_CLUSTER_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join(format!("{name}.err")))?)
        .spawn()?;
    wait_line(&mut child, "listening on ")?;
    Ok(Proc(child))
}

/// Waits until `n` nodes are up.
fn wait_nodes_up(http: &ureq::Agent, base: &str, n: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = get(http, &format!("{base}/v1/nodes"))?;
        let up = nodes
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["state"] == "up")
            .count();
        if up >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {up} of {n} nodes up: {nodes}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Controller memory now: (VmRSS, VmHWM) in MiB.
fn memory_mib(pid: u32) -> Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0))
}

fn read_stamp(file: &Path, deadline: Instant) -> Result<f64> {
    loop {
        match std::fs::read_to_string(file) {
            Ok(s) if s.ends_with('\n') => return Ok(s.trim().parse::<f64>()?),
            _ if Instant::now() > deadline => {
                return Err(format!("{} never written", file.display()).into());
            }
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn gang_latency(http: &ureq::Agent, base: &str, reps: usize, outdir: &Path) -> Result<Value> {
    let mut lats = Vec::new();
    for r in 0..reps {
        let spec = json!({
            "name": format!("gang-{r}"),
            "argv": ["/bin/sh", "-c", "date +%s.%N > \"$OUTDIR/gang-$GANTRY_JOB_ID-$RANK\""],
            "env": {"OUTDIR": outdir.to_string_lossy()},
            "tasks": [{"count": 2, "gpus": 4, "cpu_milli": 1000, "memory_mib": 256}],
        });
        let t0 = unix_now();
        let id = submit(http, base, &spec)?["id"].as_u64().ok_or("no id")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = 0.0f64;
        for rank in 0..2 {
            let stamp = read_stamp(&outdir.join(format!("gang-{id}-{rank}")), deadline)?;
            last = last.max(stamp);
        }
        lats.push(last - t0);
        wait_idle(
            http,
            base,
            Duration::from_millis(20),
            Duration::from_secs(30),
        )?;
    }
    let mut f = stats("submit_to_all_ranks_running_", lats);
    f["reps"] = json!(reps);
    Ok(f)
}

fn throughput(http: &ureq::Agent, base: &str, pid: u32, n: usize) -> Result<Value> {
    let before = cpu(pid)?;
    let mut ids = Vec::with_capacity(n);
    let t0 = unix_now();
    for i in 0..n {
        let spec =
            json!({"name": format!("thr-{i}"), "argv": ["/bin/true"], "tasks": one_gpu_task()});
        ids.push(submit(http, base, &spec)?["id"].as_u64().ok_or("no id")?);
    }
    let t1 = unix_now();
    wait_idle(
        http,
        base,
        Duration::from_millis(100),
        Duration::from_secs(3600),
    )?;
    let t2 = unix_now();
    let after = cpu(pid)?;
    let (rss, hwm) = memory_mib(pid)?;
    let (ok, bad, last_end) = outcome(http, base, &ids)?;
    let mut f = json!({
        "n": n, "submit_s": t1 - t0, "wall_s": t2 - t0, "jobs_per_s": n as f64 / (t2 - t0),
        "first_submit_to_last_end_s": last_end - t0, "succeeded": ok, "not_succeeded": bad,
        "controller_rss_mib": rss, "controller_peak_rss_mib": hwm,
    });
    merge(&mut f, cpu_report(&before, &after));
    f["controller_cpu_ms_per_job"] =
        json!(f["cpu_s_gantry"].as_f64().unwrap_or(0.0) * 1000.0 / n as f64);
    Ok(f)
}

fn env_num(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => Ok(v.parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<()> {
    let n = env_num("BENCH_N", 2000)?;
    let reps = env_num("BENCH_GANG_REPS", 30)?;
    let dir = tempfile::tempdir()?;
    let outdir = dir.path().join("out");
    std::fs::create_dir(&outdir)?;
    let (controller, base) = start_controller(dir.path())?;
    let agents: Vec<Proc> = (0..AGENTS)
        .map(|i| start_agent(dir.path(), &base, i))
        .collect::<Result<_>>()?;
    let http = agent();
    wait_nodes_up(&http, &base, AGENTS)?;
    let pid = controller.0.id();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("bench-cluster");
    std::fs::create_dir_all(&target)?;
    let path = target.join(format!("gantry-{}.jsonl", unix_now() as u64));
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    let common = json!({
        "agents": AGENTS, "gpus_per_agent": 4,
        "host_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cgroups": std::env::var("BENCH_CGROUPS").unwrap_or_else(|_| "off".into()),
    });
    eprintln!(
        "controller {base}, {AGENTS} agents; results -> {}",
        path.display()
    );
    let mut emit = |metric: &str, fields: Value| -> Result<()> {
        let mut j = common.clone();
        j["metric"] = json!(metric);
        merge(&mut j, fields);
        println!("RESULT {j}");
        writeln!(out, "{j}")?;
        Ok(())
    };
    if reps > 0 {
        emit("gang_latency", gang_latency(&http, &base, reps, &outdir)?)?;
    }
    if n > 0 {
        emit("complete", throughput(&http, &base, pid, n)?)?;
    }
    drop(agents);
    drop(controller);
    Ok(())
}
