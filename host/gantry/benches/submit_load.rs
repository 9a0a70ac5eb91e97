//! Benchmark: submit throughput and latency with durable acknowledgements.
//!
//! `cargo bench -p gantry --bench submit_load` starts the real `gantry` binary on
//! 127.0.0.1 (4 fake GPUs, default config, data directory in a temp dir), warms it up,
//! then has 1 client and then 8 concurrent clients (threads, one HTTP agent each, so one
//! keep-alive connection each) submit tiny `/bin/true` jobs with no GPU. Every `201` is a
//! durable acknowledgement: the daemon answers only after the job is flushed to its store.
//! Prints submits/s and p50/p90/p99/max latency per run.
//!
//! The whole load runs twice, on two fresh daemons: plain HTTP, then HTTPS (`[tls]` with a
//! self-signed certificate made at start, ECDSA P-256, rustls with `ring`, clients trusting
//! exactly that certificate). Each HTTPS client shakes hands once and then reuses its
//! connection; a last run of 1 client opening a new connection per submit (as each `gantry`
//! CLI command does) shows the handshake's cost. The TLS/plain ratios end the output.
//!
//! `GANTRY_BENCH_JOBS` (default 4000) sets the jobs of the 8-client run; the 1-client runs
//! submit a quarter of that. `GANTRY_BENCH_BIN` runs another `gantry` binary (e.g. an older
//! build, to compare both in one session).

mod common;

use common::{Daemon, Result, Serve, gantry_bin};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

/// Unmounts the scratch tmpfs (`host/node/src/executor/scratch.rs`) of the jobs a killed
/// daemon left running under `dir` (as root, tasks run as `nobody` and get one each), so the
/// temporary directory can go.
fn unmount_scratch_under(dir: &std::path::Path) {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = format!("{}/", dir.display());
    for line in mounts.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let point = mount.split_whitespace().nth(4).unwrap_or_default();
        if fs.split_whitespace().nth(1) != Some("gantry-work") || !point.starts_with(&prefix) {
            continue;
        }
        let _ = Command::new("umount").args(["-l", point]).status();
    }
}

/// A self-signed certificate for 127.0.0.1 written into `dir`; returns the `[tls]` table
/// and the certificate for the clients to trust.
fn self_signed(dir: &std::path::Path) -> Result<(String, ureq::tls::Certificate<'static>)> {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem())?;
    std::fs::write(&key, made.signing_key.serialize_pem())?;
    // A key others may read is refused.
    std::fs::set_permissions(
        &key,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600),
    )?;
    let table = format!(
        "[tls]\ncert = {:?}\nkey = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    );
    let trusted = ureq::tls::Certificate::from_der(made.cert.der()).to_owned();
    Ok((table, trusted))
}

fn start(dir: &std::path::Path, config: &str) -> Result<(Daemon, String)> {
    // A parent cgroup of its own: another daemon on this host may hold the default one.
    let parent = format!("gantry-bench-submit-{}", std::process::id());
    let config = format!("{config}\n[execution]\ncgroup_parent = \"{parent}\"\n");
    let serve = Serve {
        binary: &gantry_bin(),
        listen: "127.0.0.1:0",
        args: &["--gpus", "4", "--no-nvml"],
        config: &config,
        keep_stderr: false,
    };
    serve.start(dir)
}

/// An HTTP client; with `trusted`, HTTPS trusting only that certificate.
fn agent(trusted: Option<&ureq::tls::Certificate<'static>>) -> ureq::Agent {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(cert) = trusted {
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(std::slice::from_ref(
            cert,
        )));
    }
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(60)))
            .tls_config(tls.build())
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

/// Where and how the clients connect.
struct Target {
    base: String,
    trusted: Option<ureq::tls::Certificate<'static>>,
}

struct Run {
    label: &'static str,
    clients: usize,
    jobs: usize,
    wall: Duration,
    latencies: Vec<Duration>,
}

/// `clients` threads submit `jobs` jobs in all (numbered from `first`), each on one kept-alive
/// connection, or on a new connection per submit when `fresh_connections`.
fn run(
    target: &Target,
    clients: usize,
    jobs: usize,
    first: usize,
    fresh_connections: bool,
) -> Result<Run> {
    let url = format!("{}/v1/jobs", target.base);
    let per = jobs / clients;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let url = url.clone();
            let trusted = target.trusted.clone();
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let shared = agent(trusted.as_ref());
                (0..per)
                    .map(|k| {
                        let fresh;
                        let a = if fresh_connections {
                            fresh = agent(trusted.as_ref());
                            &fresh
                        } else {
                            &shared
                        };
                        submit(a, &url, first + c * per + k)
                    })
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
        label: "",
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
        "{:<5} {} client{}: {} submits in {:.2} s = {:.0} submits/s; latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.label,
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

fn throughput(r: &Run) -> f64 {
    r.jobs as f64 / r.wall.as_secs_f64()
}

/// The load on one fresh daemon: warm-up, 1 client, 8 clients, then 1 client with a new
/// connection per submit (a quarter of the 1-client jobs).
fn load(
    label: &'static str,
    config: &str,
    trusted: Option<ureq::tls::Certificate<'static>>,
    jobs: usize,
) -> Result<[Run; 3]> {
    let dir = tempfile::tempdir()?;
    let (daemon, base) = start(dir.path(), config)?;
    println!("{label}: daemon on {base}");
    let target = Target { base, trusted };
    // Warm-up: connections, store files, the first cycles.
    run(&target, 8, 200, 0, false)?;
    let mut runs = [
        run(&target, 1, (jobs / 4).max(1), 1_000_000, false)?,
        run(&target, 8, jobs.max(8), 2_000_000, false)?,
        run(&target, 1, (jobs / 16).max(1), 3_000_000, true)?,
    ];
    for r in &mut runs {
        r.label = label;
    }
    report(&runs[0]);
    report(&runs[1]);
    print!("(new connection per submit) ");
    report(&runs[2]);
    drop(daemon);
    unmount_scratch_under(dir.path());
    Ok(runs)
}

fn main() -> Result<()> {
    let jobs: usize = match std::env::var("GANTRY_BENCH_JOBS") {
        Ok(v) => v.parse()?,
        Err(_) => 4000,
    };
    println!(
        "submit load: tiny /bin/true jobs (0 GPUs), durable acknowledgements (201 after the store flush); plain HTTP, then HTTPS"
    );
    let certs = tempfile::tempdir()?;
    let (tls_table, trusted) = self_signed(certs.path())?;
    let plain = load("http", "", None, jobs)?;
    let tls = load("https", &tls_table, Some(trusted), jobs)?;
    let names = [
        "1 client",
        "8 clients",
        "1 client, new connection per submit",
    ];
    for ((name, p), t) in names.iter().zip(&plain).zip(&tls) {
        println!(
            "TLS/plain, {name}: throughput x{:.3}, p50 x{:.3}, p99 x{:.3} (p50 {:+.2} ms, p99 {:+.2} ms)",
            throughput(t) / throughput(p),
            pct(&t.latencies, 50.0) / pct(&p.latencies, 50.0),
            pct(&t.latencies, 99.0) / pct(&p.latencies, 99.0),
            pct(&t.latencies, 50.0) - pct(&p.latencies, 50.0),
            pct(&t.latencies, 99.0) - pct(&p.latencies, 99.0),
        );
    }
    Ok(())
}
