//! Load generator: end-to-end execution latency and throughput, for the side-by-side
//! comparison with SLURM in `docs/benchmarks/execution-vs-slurm.md`.
//!
//! `cargo bench -p gantry --bench exec_throughput` starts the real `gantry serve` (the
//! release build of this workspace, or `$GANTRY_BIN`) on 127.0.0.1 with 64 fake GPUs
//! (`--gpus 64 --no-nvml`, the SLURM peer's 8 nodes x 8 GPUs), a temp data dir and the
//! default `[execution]` settings (cgroups "auto", run_as_user on: tasks run as `nobody`).
//! The node is sized like the peer (256 CPUs, 32 GiB) so 64 one-GPU tasks fit at once.
//! Measures, in order, with one sequential HTTP client (one keep-alive connection):
//!
//! * `latency`: `BENCH_LAT_REPS` (100) single jobs on the idle daemon, each
//!   `sh -c 'date +%s.%N > $OUTDIR/started-$GANTRY_JOB_ID'`: the task's own timestamp minus
//!   the wall clock just before the submit request; also the submit call alone (`submit_rpc`).
//! * `bare_spawn`: `BENCH_N` sequential spawn + wait of `/bin/true` by this process, the
//!   machine's own pace (and the task's own CPU) for the next measure to be compared with;
//! * `submit` + `complete`: `BENCH_N` (2000) `/bin/true` jobs with 1 GPU, submitted one after
//!   another as fast as acknowledgements come back, then waited for (active jobs polled
//!   every 0.1 s): submit rate, first submit -> all done, failures, CPU seconds, CPU per job
//!   (daemon + shims + tasks, and minus the task's own), the ratio to `bare_spawn`.
//! * `array`: the same N as one array submission.
//!
//! Prints `RESULT {json}` lines (metric names as in the SLURM peer's bench.sh) and appends
//! them to `target/bench-exec/gantry-<unix time>.jsonl`. It asserts nothing about speed.
//! Knobs: `BENCH_N`, `BENCH_LAT_REPS`, `BENCH_ONLY=latency,submit,array`, `BENCH_TMPDIR`
//! (where the temp data dir goes), `BENCH_CGROUPS`, `BENCH_RUN_AS_USER`, `GANTRY_BIN`.

mod support;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{
    Result, agent, binary, cgroup_parent, cpu, cpu_report, merge, one_gpu_task, outcome, start,
    stats, submit, unix_now, wait_idle,
};

struct Bench {
    agent: ureq::Agent,
    base: String,
    pid: u32,
    out: std::fs::File,
    common: Value,
    /// The bare spawn rate (/s) and CPU of one `/bin/true` (ms), when measured this run.
    bare: Option<(f64, f64)>,
}

impl Bench {
    fn emit(&mut self, metric: &str, fields: Value) -> Result<()> {
        let mut j = self.common.clone();
        j["metric"] = json!(metric);
        merge(&mut j, fields);
        println!("RESULT {j}");
        writeln!(self.out, "{j}")?;
        Ok(())
    }

    fn latency(&mut self, reps: usize, outdir: &Path) -> Result<()> {
        let (mut lats, mut rpcs) = (Vec::new(), Vec::new());
        for r in 0..reps {
            std::thread::sleep(Duration::from_millis(500));
            let spec = json!({
                "name": format!("lat-{r}"), "user": "nobody",
                "argv": ["/bin/sh", "-c", "date +%s.%N > \"$OUTDIR/started-$GANTRY_JOB_ID\""],
                "env": {"OUTDIR": outdir.to_string_lossy()},
                "tasks": one_gpu_task(),
            });
            let t0 = unix_now();
            let id = submit(&self.agent, &self.base, &spec)?["id"]
                .as_u64()
                .ok_or("no id")?;
            rpcs.push(unix_now() - t0);
            let file = outdir.join(format!("started-{id}"));
            let deadline = Instant::now() + Duration::from_secs(30);
            let stamp = loop {
                match std::fs::read_to_string(&file) {
                    Ok(s) if s.ends_with('\n') => break s.trim().parse::<f64>()?,
                    _ if Instant::now() > deadline => {
                        return Err(format!("job {id} never ran").into());
                    }
                    _ => std::thread::sleep(Duration::from_millis(2)),
                }
            };
            lats.push(stamp - t0);
            wait_idle(
                &self.agent,
                &self.base,
                Duration::from_millis(20),
                Duration::from_secs(30),
            )?;
        }
        let mut f = stats("submit_to_run_", lats);
        f["reps"] = json!(reps);
        self.emit("latency", f)?;
        let mut f = stats("", rpcs);
        f["reps"] = json!(reps);
        self.emit("submit_rpc", f)
    }

    /// `n` sequential spawn + wait of `/bin/true` from this process (std's `Command`, which
    /// uses `posix_spawn`): the machine's own pace for the trivial job, and the CPU of the
    /// task itself (from this process's reaped children), to subtract from Gantry's.
    fn bare_spawn(&mut self, n: usize) -> Result<()> {
        let before = reaped_children_cpu_s();
        let t0 = Instant::now();
        for _ in 0..n {
            let status = Command::new("/bin/true").status()?;
            if !status.success() {
                return Err("/bin/true failed".into());
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let per_s = n as f64 / wall;
        let cpu_ms = (reaped_children_cpu_s() - before) * 1000.0 / n as f64;
        self.bare = Some((per_s, cpu_ms));
        self.emit(
            "bare_spawn",
            json!({"n": n, "wall_s": wall, "per_s": per_s, "cpu_ms_per_task": cpu_ms}),
        )
    }

    fn throughput(&mut self, n: usize) -> Result<()> {
        let before = cpu(self.pid)?;
        let (mut ids, mut failed) = (Vec::with_capacity(n), 0);
        let t0 = unix_now();
        for i in 0..n {
            let spec = json!({
                "name": format!("thr-{i}"), "user": "nobody", "argv": ["/bin/true"],
                "tasks": one_gpu_task(),
            });
            match submit(&self.agent, &self.base, &spec) {
                Ok(r) => ids.push(r["id"].as_u64().ok_or("no id")?),
                Err(e) => {
                    failed += 1;
                    eprintln!("submit {i}: {e}");
                }
            }
        }
        let t1 = unix_now();
        self.emit("submit", json!({"n": n, "failed": failed, "wall_s": t1 - t0, "jobs_per_s": n as f64 / (t1 - t0)}))?;
        wait_idle(
            &self.agent,
            &self.base,
            Duration::from_millis(100),
            Duration::from_secs(3600),
        )?;
        let t2 = unix_now();
        let after = cpu(self.pid)?;
        let (ok, bad, last_end) = outcome(&self.agent, &self.base, &ids)?;
        let mut f = json!({
            "n": n, "wall_s": t2 - t0, "jobs_per_s": n as f64 / (t2 - t0),
            "drain_after_submit_s": t2 - t1, "succeeded": ok, "not_succeeded": bad,
            "first_submit_to_last_end_s": last_end - t0,
        });
        merge(&mut f, cpu_report(&before, &after));
        let cpu_s = f["cpu_s_gantry"].as_f64().unwrap_or(0.0)
            + f["cpu_s_gantry_reaped_children"].as_f64().unwrap_or(0.0);
        let per_job_ms = cpu_s * 1000.0 / n as f64;
        f["cpu_ms_per_job"] = json!(per_job_ms);
        if let Some((bare_per_s, task_ms)) = self.bare {
            f["ratio_to_bare_spawn"] = json!(n as f64 / (t2 - t0) / bare_per_s);
            f["cpu_ms_per_job_minus_task"] = json!(per_job_ms - task_ms);
        }
        self.emit("complete", f)
    }

    fn array(&mut self, n: usize) -> Result<()> {
        let spec = json!({
            "name": "arr", "user": "nobody", "argv": ["/bin/true"],
            "array": {"indices": (0..n).collect::<Vec<_>>()},
            "tasks": one_gpu_task(),
        });
        let before = cpu(self.pid)?;
        let t0 = unix_now();
        let resp = submit(&self.agent, &self.base, &spec)?;
        let t1 = unix_now();
        let ids: Vec<u64> = resp["array_job_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        wait_idle(
            &self.agent,
            &self.base,
            Duration::from_millis(100),
            Duration::from_secs(3600),
        )?;
        let t2 = unix_now();
        let after = cpu(self.pid)?;
        let (ok, bad, last_end) = outcome(&self.agent, &self.base, &ids)?;
        let mut f = json!({
            "n": n, "submit_s": t1 - t0, "wall_s": t2 - t0, "jobs_per_s": n as f64 / (t2 - t0),
            "succeeded": ok, "not_succeeded": bad, "first_submit_to_last_end_s": last_end - t0,
        });
        merge(&mut f, cpu_report(&before, &after));
        self.emit("array", f)
    }
}

/// User + system CPU seconds of this process's children that were waited for.
fn reaped_children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn env_num(name: &str, default: usize) -> Result<usize> {
    Ok(match std::env::var(name) {
        Ok(v) => v.parse()?,
        Err(_) => default,
    })
}

/// Runs one job that records its uid and cgroups; returns (uid, in a task cgroup of ours).
fn probe(b: &Bench, outdir: &Path) -> Result<(String, bool)> {
    let spec = json!({
        "name": "probe", "user": "nobody",
        "argv": ["/bin/sh", "-c", "{ id -u; cat /proc/self/cgroup; } > \"$OUTDIR/probe.tmp\" && mv \"$OUTDIR/probe.tmp\" \"$OUTDIR/probe\""],
        "env": {"OUTDIR": outdir.to_string_lossy()},
        "tasks": one_gpu_task(),
    });
    submit(&b.agent, &b.base, &spec)?;
    wait_idle(
        &b.agent,
        &b.base,
        Duration::from_millis(20),
        Duration::from_secs(30),
    )?;
    let text = std::fs::read_to_string(outdir.join("probe"))?;
    let uid = text.lines().next().unwrap_or_default().to_string();
    let ours = format!("/{}/job-", cgroup_parent());
    Ok((uid, text.lines().any(|l| l.contains(&ours))))
}

fn main() -> Result<()> {
    let n = env_num("BENCH_N", 2000)?;
    let reps = env_num("BENCH_LAT_REPS", 100)?;
    let only = std::env::var("BENCH_ONLY").unwrap_or_else(|_| "latency,submit,array".into());
    let want = |s: &str| only.split(',').any(|x| x.trim() == s);
    // `BENCH_TMPDIR` (default: the system temp dir) holds the data dir: e.g. /dev/shm to
    // see what the file system costs.
    let dir = match std::env::var_os("BENCH_TMPDIR") {
        Some(base) => tempfile::tempdir_in(base)?,
        None => tempfile::tempdir()?,
    };
    // Tasks run as `nobody`: it must reach the output directory.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let outdir = dir.path().join("out");
    std::fs::create_dir(&outdir)?;
    std::fs::set_permissions(&outdir, std::fs::Permissions::from_mode(0o777))?;
    let daemon = start(dir.path())?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("bench-exec");
    std::fs::create_dir_all(&target)?;
    let target = target.canonicalize()?;
    let path = target.join(format!("gantry-{}.jsonl", unix_now() as u64));
    let version = Command::new(binary()).arg("--version").output()?.stdout;
    let mut b = Bench {
        agent: agent(),
        base: daemon.base.clone(),
        pid: daemon.child.id(),
        out: std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?,
        common: json!({
            "peer": "gantry", "version": String::from_utf8_lossy(&version).trim(),
            "binary": binary().to_string_lossy(), "nodes": 1, "gpus_per_node": 64,
            "host_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "cgroups": std::env::var("BENCH_CGROUPS").unwrap_or_else(|_| "auto".into()),
            "run_as_user": std::env::var("BENCH_RUN_AS_USER").map_or(true, |v| v == "true"),
            "data_dir": dir.path().to_string_lossy(),
        }),
        bare: None,
    };
    eprintln!(
        "daemon {} on {}; results -> {}",
        binary().display(),
        b.base,
        path.display()
    );
    let (uid, in_cgroup) = probe(&b, &outdir)?;
    b.common["task_uid"] = json!(uid);
    b.common["task_in_cgroup"] = json!(in_cgroup);
    if want("latency") {
        b.latency(reps, &outdir)?;
    }
    if want("submit") {
        b.bare_spawn(n)?;
        b.throughput(n)?;
    }
    if want("array") {
        b.array(n)?;
    }
    let err = std::fs::read_to_string(dir.path().join("daemon.err")).unwrap_or_default();
    for line in err
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(10)
    {
        eprintln!("daemon: {line}");
    }
    drop(daemon);
    Ok(())
}
