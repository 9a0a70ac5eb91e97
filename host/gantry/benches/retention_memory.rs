//! Benchmark: is the daemon's memory flat once retention lets ended jobs go?
//!
//! `cargo bench -p gantry --bench retention_memory` starts the real `gantry` binary on
//! 127.0.0.1 as the history benchmark does (4 fake GPUs, cgroups off,
//! `[retention] min_job_age_s = 0`, every other setting at its default), then submits
//! `GANTRY_BENCH_N` (default 50,000) tiny `/bin/true` jobs through the API from
//! `GANTRY_BENCH_CLIENTS` (default 4) clients, in windows of `GANTRY_BENCH_WINDOW` (default
//! 10,000: the backlog the daemon works through), and then `GANTRY_BENCH_N` more. After each
//! window it waits until no job is pending or running and `gantry_jobs_in_memory` reads 0
//! (every job ended and evicted; polled, never assumed), and prints the daemon's RSS
//! (`VmRSS`). At the end it prints the RSS after N and after 2N jobs, the difference in MiB
//! and per job, and whether the two are within 5 MiB (issue 44's bar).
//!
//! `GANTRY_BENCH_RECORD_SNAPSHOTS` sets `record_snapshots` (the what-if recorder; unset:
//! its default), to compare with the recorder off; `GANTRY_BENCH_STORE_CACHE_MIB` sets
//! `retention.store_cache_mib` (the page caches of sled and SQLite). `GANTRY_BENCH_BIN` runs another
//! `gantry` binary (e.g. an older build). Nothing here asserts a time or a size: it prints.

mod common;

use common::{Result, Serve, agent, env_usize, gantry_bin, rss_mib, wait_healthy};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Starts the daemon in `dir`; its base URL.
fn start(dir: &std::path::Path) -> Result<(common::Daemon, String)> {
    let record = std::env::var("GANTRY_BENCH_RECORD_SNAPSHOTS")
        .map(|n| format!("record_snapshots = {n}\n"))
        .unwrap_or_default();
    let cache = std::env::var("GANTRY_BENCH_STORE_CACHE_MIB")
        .map(|n| format!("store_cache_mib = {n}\n"))
        .unwrap_or_default();
    let config = format!(
        "{record}[auth]\nanonymous_role = \"admin\"\n[execution]\ncgroups = \"off\"\n[retention]\nmin_job_age_s = 0\n{cache}"
    );
    let serve = Serve {
        binary: &gantry_bin(),
        listen: "127.0.0.1:0",
        args: &["--gpus", "4", "--no-nvml"],
        config: &config,
        keep_stderr: false,
    };
    let (daemon, base) = serve.start(dir)?;
    wait_healthy(&base, Duration::from_secs(120))?;
    Ok((daemon, base))
}

/// Submits jobs `first..first + n` from `clients` threads.
fn submit(base: &str, clients: usize, n: usize, first: usize) -> Result<()> {
    let per = n / clients;
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let url = format!("{base}/v1/jobs");
            std::thread::spawn(move || -> Result<()> {
                let a = agent(120);
                for k in 0..per {
                    let i = first + c * per + k;
                    let body = json!({
                        "name": format!("m-{i}"), "argv": ["/bin/true"],
                        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}],
                    });
                    let mut resp = a.post(&url).send_json(body)?;
                    if resp.status().as_u16() != 201 {
                        let text = resp.body_mut().read_to_string()?;
                        return Err(format!("submit {i}: {} {text}", resp.status()).into());
                    }
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "client panicked")??;
    }
    Ok(())
}

/// The value of the metric line that starts with `name` (summed over its label sets).
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until no job is pending or running and none is in memory (at most 15 minutes).
fn ended_and_evicted(base: &str) -> Result<()> {
    let a = agent(120);
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let mut busy = false;
        for state in ["pending", "running"] {
            let v: Value = a
                .get(format!("{base}/v1/jobs?state={state}&limit=1"))
                .call()?
                .body_mut()
                .read_json()?;
            busy |= v.as_array().is_some_and(|l| !l.is_empty());
        }
        if !busy {
            let text = a
                .get(format!("{base}/metrics"))
                .call()?
                .body_mut()
                .read_to_string()?;
            if metric(&text, "gantry_jobs_in_memory") == 0.0 {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err("jobs still in memory after 15 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn main() -> Result<()> {
    let n = env_usize("GANTRY_BENCH_N", 50_000);
    let clients = env_usize("GANTRY_BENCH_CLIENTS", 4).max(1);
    let window = env_usize("GANTRY_BENCH_WINDOW", 10_000).max(clients);
    let dir = tempfile::tempdir()?;
    let (daemon, base) = start(dir.path())?;
    let pid = daemon.pid();
    println!(
        "retention_memory: 2 x {n} /bin/true jobs from {clients} clients in windows of {window} (min_job_age_s = 0); RSS at start {:.1} MiB",
        rss_mib(pid)
    );
    let t0 = Instant::now();
    let mut done = 0;
    let mut at = Vec::new();
    for half in [n, 2 * n] {
        while done < half {
            let k = window.min(half - done) / clients * clients;
            submit(&base, clients, k.max(clients), done)?;
            done += k.max(clients);
            ended_and_evicted(&base)?;
            println!(
                "after {done:>8} jobs ended and evicted: RSS {:.1} MiB ({:.0} s)",
                rss_mib(pid),
                t0.elapsed().as_secs_f64()
            );
        }
        at.push((done, rss_mib(pid)));
    }
    let ((n1, r1), (n2, r2)) = (at[0], at[1]);
    let diff = r2 - r1;
    println!(
        "RSS after {n1} jobs {r1:.1} MiB, after {n2} jobs {r2:.1} MiB: {diff:+.1} MiB, {:+.3} KiB per job; within 5 MiB: {}",
        diff * 1024.0 / (n2 - n1) as f64,
        if diff.abs() <= 5.0 { "yes" } else { "no" }
    );
    Ok(())
}
