//! Plumbing of the `exec_throughput` load generator: starting `gantry serve`, HTTP calls,
//! waiting for an idle daemon, statistics and CPU accounting. The measurements themselves
//! are in `main.rs`.

use serde_json::{Value, json};
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// The daemon; killed however the benchmark ends.
pub struct Daemon {
    pub child: Child,
    pub base: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_cgroups(&cgroup_parent());
    }
}

/// Removes the (empty) task cgroups left under `parent` in every hierarchy, then `parent`.
fn remove_cgroups(parent: &str) {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for h in hierarchies.flatten() {
        let dir = h.path().join(parent);
        for task in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if task.path().is_dir() {
                let _ = std::fs::remove_dir(task.path());
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}

/// Node sized like the SLURM peer (8 x 32 CPUs, 8 x 4 GiB); `[execution]` at its defaults
/// but for a cgroup parent of our own (one daemon per parent; others may run tests).
/// `BENCH_CGROUPS` / `BENCH_RUN_AS_USER` override the two defaults, to see what they cost.
pub fn config() -> String {
    let mut c = format!(
        "[auth]\nanonymous_role = \"admin\"\n[node]\ncpu_milli = 256000\nmemory_mib = 32768\n[execution]\ncgroup_parent = \"{}\"\n",
        cgroup_parent()
    );
    if let Ok(mode) = std::env::var("BENCH_CGROUPS") {
        c.push_str(&format!("cgroups = \"{mode}\"\n"));
    }
    if let Ok(on) = std::env::var("BENCH_RUN_AS_USER") {
        c.push_str(&format!("run_as_user = {on}\n"));
    }
    c
}

pub fn cgroup_parent() -> String {
    format!("gantry-bench-{}", std::process::id())
}

pub fn binary() -> PathBuf {
    std::env::var_os("GANTRY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gantry")))
}

pub fn start(dir: &Path) -> Result<Daemon> {
    start_with(dir, "")
}

/// [`start`] with more configuration after [`config`]'s (tables it does not have).
pub fn start_with(dir: &Path, extra: &str) -> Result<Daemon> {
    let cfg = dir.join("gantry.toml");
    std::fs::write(&cfg, config() + extra)?;
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--gpus",
            "64",
            "--no-nvml",
        ])
        .arg("--config")
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("daemon.err"))?)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut daemon = Daemon {
        child,
        base: String::new(),
    };
    let mut lines = BufReader::new(stdout).lines();
    daemon.base = loop {
        let line = lines.next().ok_or("the daemon exited before listening")??;
        if let Some(addr) = line.strip_prefix("gantry listening on ") {
            break addr.to_string();
        }
    };
    // Keep draining stdout so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok(daemon)
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(120)))
            .build(),
    )
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// POSTs a job; returns the response body of a `201`.
pub fn submit(agent: &ureq::Agent, base: &str, spec: &Value) -> Result<Value> {
    let mut resp = agent.post(format!("{base}/v1/jobs")).send_json(spec)?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()?;
    if status != 201 {
        return Err(format!("submit answered {status}: {body}").into());
    }
    Ok(serde_json::from_str(&body)?)
}

/// The body of a `200`, up to 1 GiB (listings of thousands of jobs pass ureq's 10 MB default).
pub fn read_body(mut resp: http::Response<ureq::Body>) -> Result<String> {
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(1 << 30)
        .read_to_string()?;
    if status != 200 {
        return Err(format!("answered {status}: {body}").into());
    }
    Ok(body)
}

pub fn get(agent: &ureq::Agent, url: &str) -> Result<Value> {
    Ok(serde_json::from_str(&read_body(agent.get(url).call()?)?)?)
}

/// Pending plus running jobs, from the `gantry_jobs` gauge of `/metrics` (cheap, unlike
/// listing thousands of records).
pub fn active(agent: &ureq::Agent, base: &str) -> Result<u64> {
    let text = read_body(agent.get(format!("{base}/metrics")).call()?)?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("gantry_jobs{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Polls until no job is pending or running (like the peer's `squeue` loop); bounded.
pub fn wait_idle(agent: &ureq::Agent, base: &str, poll: Duration, limit: Duration) -> Result<()> {
    let t = Instant::now();
    loop {
        let active = active(agent, base)?;
        if active == 0 {
            return Ok(());
        }
        if t.elapsed() > limit {
            return Err(format!("{active} jobs still active after {limit:?}").into());
        }
        std::thread::sleep(poll);
    }
}

/// min, median, p90, max, mean with the peer's nearest-rank rules.
pub fn stats(prefix: &str, mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let at = |rank: usize| {
        v.get(rank.clamp(1, n.max(1)) - 1)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let mean = v.iter().sum::<f64>() / n.max(1) as f64;
    json!({
        format!("{prefix}min_s"): at(1),
        format!("{prefix}median_s"): at(n.div_ceil(2)),
        format!("{prefix}p90_s"): at((n as f64 * 0.9).ceil() as usize),
        format!("{prefix}max_s"): at(n),
        format!("{prefix}mean_s"): mean,
    })
}

/// CPU: host busy/total jiffies, and the daemon's own and reaped children's jiffies.
pub struct Cpu {
    busy: f64,
    total: f64,
    daemon: f64,
    children: f64,
}

pub fn cpu(pid: u32) -> Result<Cpu> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let f: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let g = |i: usize| f.get(i).copied().unwrap_or(0.0);
    let own = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = own.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let p: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let q = |i: usize| p.get(i).copied().unwrap_or(0.0);
    Ok(Cpu {
        busy: g(0) + g(1) + g(2) + g(5) + g(6) + g(7),
        total: (0..8).map(g).sum(),
        daemon: q(11) + q(12),
        children: q(13) + q(14),
    })
}

pub fn cpu_report(a: &Cpu, b: &Cpu) -> Value {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    json!({
        "host_cpu_busy_pct": 100.0 * (b.busy - a.busy) / (b.total - a.total).max(1.0),
        "cpu_s_gantry": (b.daemon - a.daemon) / hz,
        "cpu_s_gantry_reaped_children": (b.children - a.children) / hz,
    })
}

/// Counts of the final states of `ids` (first .. first + n), and the last end time.
pub fn outcome(agent: &ureq::Agent, base: &str, ids: &[u64]) -> Result<(usize, usize, f64)> {
    let all = get(agent, &format!("{base}/v1/jobs?limit=100000"))?;
    let (mut ok, mut bad, mut last_end) = (0, 0, 0.0f64);
    for j in all.as_array().into_iter().flatten() {
        if !j["id"].as_u64().is_some_and(|id| ids.contains(&id)) {
            continue;
        }
        match j["state"].as_str() {
            Some("succeeded") => ok += 1,
            _ => bad += 1,
        }
        last_end = last_end.max(j["end_ms"].as_f64().unwrap_or(0.0) / 1000.0);
    }
    Ok((ok, bad, last_end))
}

/// One task with one GPU, one CPU and 256 MiB (64 fit on the node at once).
pub fn one_gpu_task() -> Value {
    json!([{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 256}])
}

/// Copies the fields of `more` into `f`.
pub fn merge(f: &mut Value, more: Value) {
    for (k, v) in more.as_object().into_iter().flatten() {
        f[k] = v.clone();
    }
}
