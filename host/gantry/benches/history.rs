//! Benchmark: months of operation — memory, submit latency, restart time and old-job reads
//! as history grows.
//!
//! `cargo bench -p gantry --bench history` starts the real `gantry` binary on 127.0.0.1
//! (4 fake GPUs, cgroups off, `[retention] min_job_age_s = 0`, every other retention
//! setting at its default) and then:
//!
//! 1. **Seeds** `GANTRY_BENCH_SEED` (default 0) ended jobs straight into the store before
//!    the first start: a succeeded record with one task, two events and an accounting
//!    record each, as a job that ran leaves them. This stands in for months of history
//!    that would take hours to run through the API on this machine.
//! 2. **Submits** `GANTRY_BENCH_JOBS` (default 100,000) tiny `/bin/true` jobs (0 GPUs)
//!    through the API from `GANTRY_BENCH_CLIENTS` (default 4) clients, in
//!    `GANTRY_BENCH_WINDOWS` (default 10) windows (a window's jobs are the backlog the
//!    daemon works through: 10,000 at once keeps submissions waiting over a minute); after
//!    each window it waits for the jobs to end and prints the window's submit p50/p99/max, the
//!    daemon's RSS (`VmRSS`), the jobs in memory (`gantry_jobs` gauges are of memory) and
//!    the store's size.
//! 3. Reads the oldest job (`GET /v1/jobs/{id}`, and `gantry job ID` as a process) and
//!    the newest page of a user's list, and prints their latencies.
//! 4. **Restarts** the daemon (SIGTERM, then a fresh start on the same data directory) and
//!    prints the time from spawn to the first answered `/v1/health`, and the RSS after.
//! 5. With seeded history: restarts with `job_history_days = 150`, runs the collector
//!    (`POST /v1/admin/gc`, about half the seeded jobs are older), prints what it deleted and
//!    the files' size, compacts the stopped store (`gantry_store::compact`) and restarts.
//!
//! Also prints the store's bytes per job. Nothing here asserts a time: it prints numbers.
//! `GANTRY_BENCH_BIN` runs another `gantry` binary (e.g. an older build, to compare both in
//! one session).

mod common;

use common::{Result, Serve, agent, env_usize, gantry_bin, rss_mib, wait_healthy};
use gantry_api::model::{GpuShareView, JobRecord, JobSpec, JobState, TaskRecord};
use gantry_node::executor::TaskExit;
use gantry_store::{AccountingRecord, Store, dir_bytes};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The benchmark's config: cgroups off, ended jobs leave memory at once, history kept
/// `history_days`.
fn config(history_days: u64) -> String {
    format!(
        "[auth]\nanonymous_role = \"admin\"\n[execution]\ncgroups = \"off\"\n[retention]\nmin_job_age_s = 0\njob_history_days = {history_days}\n"
    )
}

fn start(dir: &Path, history_days: u64) -> Result<(common::Daemon, String, Duration)> {
    let t0 = Instant::now();
    let serve = Serve {
        binary: &gantry_bin(),
        listen: "127.0.0.1:0",
        args: &["--gpus", "4", "--no-nvml"],
        config: &config(history_days),
        keep_stderr: false,
    };
    let (daemon, base) = serve.start(dir)?;
    wait_healthy(&base, Duration::from_secs(120))?;
    Ok((daemon, base, t0.elapsed()))
}

/// Bytes of the store's two databases under `data`: sled (`db`) and the history (`history`).
fn store_bytes(data: &Path) -> u64 {
    dir_bytes(&data.join("db")) + dir_bytes(&data.join("history"))
}

/// Writes `n` ended jobs (with their events and accounting) into the store under `data`.
fn seed(data: &Path, n: usize) -> Result<()> {
    let store = Store::open(data)?;
    let spec: JobSpec = serde_json::from_value(json!({
        "name": "history", "argv": ["/bin/true"], "user": "seed", "account": "lab",
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
    }))?;
    let t0 = Instant::now();
    let day_ms = 24 * 3600 * 1000;
    let now = gantry_controller::now_ms();
    for i in 0..n {
        let id = store.next_id("job")?;
        // Spread over the last 300 days, oldest first.
        let at = now - 300 * day_ms + (i as u64 * 300 * day_ms) / n as u64;
        let mut j = JobRecord::new(id, spec.clone(), at);
        j.state = JobState::Succeeded;
        j.start_ms = Some(at + 1_000);
        j.end_ms = Some(at + 61_000);
        j.exit_code = Some(0);
        let gpus = vec![GpuShareView {
            index: 0,
            milli: 1000,
        }];
        j.tasks = vec![TaskRecord {
            node: "seed-node".into(),
            gpus: gpus.clone(),
            cpu_milli: 1000,
            memory_mib: 1024,
            pid: None,
            exit: Some(TaskExit::Exited(0)),
            started_ms: Some(at + 1_000),
            ended_ms: None,
            usage: None,
            gpu_usage: None,
        }];
        // As eviction leaves it: the record in the history archive.
        store.archive_job(&j)?;
        store.event(at, Some(id), "submitted", "by seed".into())?;
        store.event(at + 61_000, Some(id), "finished", "succeeded".into())?;
        let r = AccountingRecord {
            job_id: id,
            task_index: 0,
            run: 0,
            job_name: "history".into(),
            user: "seed".into(),
            account: "lab".into(),
            queue: "default".into(),
            node: "seed-node".into(),
            gpus,
            cpu_milli: 1000,
            memory_mib: 1024,
            start_ms: at + 1_000,
            end_ms: at + 61_000,
            gpu_milli_seconds: 60_000_000,
            cpu_seconds: 1.0,
            memory_peak_mib: 1,
            exit: TaskExit::Exited(0),
            oom_killed: false,
            uncharged: None,
            gpu_used_milli_seconds: None,
        };
        store.put_accounting(&r)?;
        if i % 100_000 == 99_999 {
            store.flush()?;
            println!(
                "seeded {} jobs ({:.0} s)",
                i + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    store.flush()?;
    println!(
        "seeded {n} ended jobs in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Submits `n` jobs from `clients` threads; the sorted latencies in ms.
fn submit_window(base: &str, clients: usize, n: usize, first: usize) -> Result<Vec<f64>> {
    let url = format!("{base}/v1/jobs");
    let per = n / clients;
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || -> Result<Vec<f64>> {
                let a = agent(60);
                let mut out = Vec::with_capacity(per);
                for k in 0..per {
                    let i = first + c * per + k;
                    let body = json!({
                        "name": format!("h-{i}"), "argv": ["/bin/true"],
                        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}],
                    });
                    let t = Instant::now();
                    let mut resp = a.post(&url).send_json(body)?;
                    let status = resp.status().as_u16();
                    let text = resp.body_mut().read_to_string()?;
                    out.push(t.elapsed().as_secs_f64() * 1000.0);
                    if status != 201 {
                        return Err(format!("submit {i}: {status} {text}").into());
                    }
                }
                Ok(out)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for h in handles {
        all.extend(h.join().map_err(|_| "client panicked")??);
    }
    all.sort_by(f64::total_cmp);
    Ok(all)
}

/// Waits until no job is pending or running (at most 10 minutes).
fn drain(base: &str) -> Result<()> {
    let a = agent(60);
    let deadline = Instant::now() + Duration::from_secs(600);
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
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("jobs still unfinished after 10 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Median of `n` timings of `f`, ms.
fn median_ms(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    v.sort_by(f64::total_cmp);
    Ok(pct(&v, 50.0))
}

fn main() -> Result<()> {
    let seeded = env_usize("GANTRY_BENCH_SEED", 0);
    let jobs = env_usize("GANTRY_BENCH_JOBS", 100_000);
    let clients = env_usize("GANTRY_BENCH_CLIENTS", 4).max(1);
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    if seeded > 0 {
        seed(&data, seeded)?;
    }
    let (daemon, base, first_start) = start(dir.path(), 365)?;
    let pid = daemon.pid();
    println!(
        "history: {seeded} seeded ended jobs, first start {:.0} ms, RSS {:.1} MiB; submitting {jobs} /bin/true jobs from {clients} clients (min_job_age_s = 0)",
        first_start.as_secs_f64() * 1000.0,
        rss_mib(pid)
    );
    let window = (jobs / env_usize("GANTRY_BENCH_WINDOWS", 10).max(1)).max(clients);
    let mut done = 0;
    while done < jobs {
        let lat = submit_window(&base, clients, window.min(jobs - done), done)?;
        done += lat.len();
        drain(&base)?;
        println!(
            "after {:>8} submitted ({:>8} in history): submit p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; RSS {:.1} MiB; store {:.1} MiB",
            done,
            done + seeded,
            pct(&lat, 50.0),
            pct(&lat, 99.0),
            pct(&lat, 100.0),
            rss_mib(pid),
            store_bytes(&data) as f64 / (1 << 20) as f64
        );
    }
    let a = agent(60);
    let oldest = 1;
    let api = median_ms(21, || {
        a.get(format!("{base}/v1/jobs/{oldest}"))
            .call()?
            .body_mut()
            .read_to_string()?;
        Ok(())
    })?;
    let cli = median_ms(11, || {
        let out = Command::new(gantry_bin())
            .args(["--server", &base, "job", &oldest.to_string()])
            .output()?;
        if !out.status.success() {
            return Err(format!("gantry job: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(())
    })?;
    let page = median_ms(21, || {
        a.get(format!("{base}/v1/jobs?user=seed&limit=100"))
            .call()?
            .body_mut()
            .read_to_string()?;
        Ok(())
    })?;
    println!(
        "oldest job {oldest}: GET /v1/jobs/{oldest} median {api:.2} ms; `gantry job {oldest}` (a process) median {cli:.1} ms; a page of 100 of user seed's jobs median {page:.2} ms"
    );
    let total = (done + seeded) as f64;
    let bytes = store_bytes(&data) as f64;
    println!(
        "store: {:.1} MiB for {total:.0} jobs = {:.0} bytes per job",
        bytes / (1 << 20) as f64,
        bytes / total
    );
    let before = rss_mib(pid);
    terminate(pid);
    drop(daemon);
    let (daemon, _base, restart) = start(dir.path(), 365)?;
    println!(
        "restart with {total:.0} jobs in history: {:.0} ms to the first /v1/health answer; RSS {before:.1} MiB before, {:.1} MiB after",
        restart.as_secs_f64() * 1000.0,
        rss_mib(daemon.pid())
    );
    if seeded > 0 {
        // Keep 150 days: the collector deletes the half of the seeded jobs older than that.
        terminate(daemon.pid());
        drop(daemon);
        let (daemon, base, _) = start(dir.path(), 150)?;
        let t = Instant::now();
        // A collection of half a million jobs takes minutes: no 60 s client timeout here.
        let patient = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .proxy(None)
                .timeout_global(Some(Duration::from_secs(3600)))
                .build(),
        );
        let report: Value = patient
            .post(format!("{base}/v1/admin/gc"))
            .send_json(json!({}))?
            .body_mut()
            .read_json()?;
        println!(
            "gc keeping 150 days: {:.1} s; {report}; files {:.1} MiB",
            t.elapsed().as_secs_f64(),
            store_bytes(&data) as f64 / (1 << 20) as f64
        );
        terminate(daemon.pid());
        drop(daemon);
        let compacted = gantry_store::compact(&data)?;
        println!(
            "compaction (daemon stopped): {:.1} MiB -> {:.1} MiB in {:.1} s ({} keys)",
            compacted.bytes_before as f64 / (1 << 20) as f64,
            compacted.bytes_after as f64 / (1 << 20) as f64,
            compacted.ms as f64 / 1000.0,
            compacted.keys
        );
        let (daemon, _, restart) = start(dir.path(), 150)?;
        println!(
            "restart after gc and compaction: {:.0} ms; RSS {:.1} MiB",
            restart.as_secs_f64() * 1000.0,
            rss_mib(daemon.pid())
        );
    }
    Ok(())
}

/// Asks the daemon to stop (SIGTERM) and waits for it, at most 30 s, via `kill(1)`.
fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Path::new(&format!("/proc/{pid}/stat")).exists() && Instant::now() < deadline {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
