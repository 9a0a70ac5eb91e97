//! Benchmark: submit throughput and latency with durable acknowledgements.
//!
//! `cargo bench -p gantry --bench submit_load` starts the real `gantry` binary on
//! 127.0.0.1 (4 fake GPUs, default config, data directory in a temp dir), warms it up,
//! then has 1 client and then 8 concurrent clients (threads, one HTTP agent each, so one
//! keep-alive connection each) submit tiny `/bin/true` jobs with no GPU. Every `201` is a
//! durable acknowledgement: the daemon answers only after the job is flushed to its store.
//! Prints submits/s and p50/p90/p99/max latency per run.
//!
//! `GANTRY_BENCH_JOBS` (default 4000) sets the jobs of the 8-client run; the 1-client run
//! submits a quarter of that.

use serde_json::{Value, json};
use std::error::Error;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Kills the daemon however the benchmark ends.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &std::path::Path) -> Result<(Daemon, String)> {
    let cfg = dir.join("gantry.toml");
    std::fs::write(&cfg, "")?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--gpus",
            "4",
            "--no-nvml",
            "--config",
        ])
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let daemon = Daemon(child);
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines.next().ok_or("the daemon exited before listening")??;
        if let Some(addr) = line.strip_prefix("gantry listening on ") {
            break addr.to_string();
        }
    };
    // Keep draining stdout so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok((daemon, base))
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(60)))
            .build(),
    )
}

fn job(i: usize) -> Value {
    json!({
        "name": format!("load-{i}"),
        "argv": ["/bin/true"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}],
    })
}

/// One acknowledged submit; returns its latency.
fn submit(agent: &ureq::Agent, url: &str, i: usize) -> Result<Duration> {
    let t = Instant::now();
    let mut resp = agent.post(url).send_json(job(i))?;
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_string()?;
    let elapsed = t.elapsed();
    if status != 201 {
        return Err(format!("submit {i} answered {status}: {body}").into());
    }
    Ok(elapsed)
}

struct Run {
    clients: usize,
    jobs: usize,
    wall: Duration,
    latencies: Vec<Duration>,
}

/// `clients` threads submit `jobs` jobs in all (numbered from `first`).
fn run(base: &str, clients: usize, jobs: usize, first: usize) -> Result<Run> {
    let url = format!("{base}/v1/jobs");
    let per = jobs / clients;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let agent = agent();
                (0..per)
                    .map(|k| submit(&agent, &url, first + c * per + k))
                    .collect()
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(per * clients);
    for h in handles {
        latencies.extend(h.join().map_err(|_| "a client thread panicked")??);
    }
    let wall = t0.elapsed();
    latencies.sort_unstable();
    Ok(Run {
        clients,
        jobs: per * clients,
        wall,
        latencies,
    })
}

/// Nearest-rank percentile of sorted latencies, in ms.
fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

fn report(r: &Run) {
    println!(
        "{} client{}: {} submits in {:.2} s = {:.0} submits/s; latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.clients,
        if r.clients == 1 { "" } else { "s" },
        r.jobs,
        r.wall.as_secs_f64(),
        r.jobs as f64 / r.wall.as_secs_f64(),
        pct(&r.latencies, 50.0),
        pct(&r.latencies, 90.0),
        pct(&r.latencies, 99.0),
        pct(&r.latencies, 100.0),
    );
}

fn main() -> Result<()> {
    let jobs: usize = match std::env::var("GANTRY_BENCH_JOBS") {
        Ok(v) => v.parse()?,
        Err(_) => 4000,
    };
    let dir = tempfile::tempdir()?;
    let (_daemon, base) = start(dir.path())?;
    println!(
        "submit load: tiny /bin/true jobs (0 GPUs), durable acknowledgements (201 after the store flush), daemon on {base}"
    );
    // Warm-up: connections, store files, the first cycles.
    run(&base, 8, 200, 0)?;
    let single = run(&base, 1, (jobs / 4).max(1), 1_000_000)?;
    report(&single);
    let eight = run(&base, 8, jobs.max(8), 2_000_000)?;
    report(&eight);
    Ok(())
}
