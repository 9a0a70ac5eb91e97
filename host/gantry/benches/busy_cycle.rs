//! Benchmark: does the API answer while a large cycle runs? (issue 28)
//!
//! `cargo bench -p gantry --bench busy_cycle` starts the real `gantry` binary as a
//! controller on 127.0.0.1 with no local node, registers `BENCH_NODES` (default 1,000)
//! nodes of 8 GPUs through the agent protocol (one heartbeat each, as `gantry agent` sends
//! it), every GPU reported unhealthy, so the cluster is full and nothing starts, and
//! submits `BENCH_PENDING` (default 10,000) one-GPU jobs as arrays. Every cycle then
//! places each pending job against every node and finds no room: the largest cycle such a
//! cluster has, over and over (`cycle_interval_ms = 1000`; a cycle longer than that runs
//! back to back).
//!
//! While those cycles run, one client asks in turn, for `BENCH_PROBE_S` (default 20)
//! seconds: `GET /v1/jobs/{id}` (a pending job), `GET /v1/health`, `GET /v1/jobs?limit=50`
//! (the dashboard's list) and `POST /v1/jobs` (a one-GPU submit that joins the backlog, acknowledged durably), and prints
//! each one's median, p99 and max, with the cycles' count and mean duration over the same
//! window (from `gantry_cycle_duration_seconds` in `/metrics`; p50 and p99 as the upper
//! bound of the histogram bucket that holds them).
//!
//! `BENCH_PIPELINE` (a `PUT /v1/policy` body) replaces the default pipeline first.
//!
//! Prints `RESULT {json}`; asserts nothing about speed. `GANTRY_BENCH_BIN` runs another
//! `gantry` binary (an older build, to compare both in one session).

mod common;

use common::{Daemon, Result, Serve, env_usize, gantry_bin};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-busy-cycle-token-0123456789";
const GPUS_PER_NODE: u32 = 8;
const ARRAY_MAX: usize = 10_000;

/// The benchmark's HTTP client.
fn http() -> ureq::Agent {
    common::agent(120)
}

fn start(dir: &std::path::Path) -> Result<(Daemon, String)> {
    // It holds the cluster token: `Serve` writes it 0600 (the daemon refuses one others may read).
    let config = format!(
        "[auth]\nanonymous_role = \"admin\"\n\
         [execution]\ncgroups = \"off\"\nrun_as_user = false\n\
         [limits]\nmax_pending_per_user = 1000000\n\
         [cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\n\
         heartbeat_interval_ms = 60000\nnode_down_after_ms = 3600000\n"
    );
    let serve = Serve {
        binary: &gantry_bin(),
        listen: "127.0.0.1:0",
        args: &["--no-nvml"],
        config: &config,
        keep_stderr: true,
    };
    serve.start(dir)
}

/// One heartbeat per node registers it; every GPU is reported unhealthy so nothing starts.
fn register_nodes(agent: &ureq::Agent, base: &str, nodes: usize) -> Result<()> {
    for i in 0..nodes {
        let gpus: Vec<Value> = (0..GPUS_PER_NODE)
            .map(
                |g| json!({"index": g, "model": "bench-gpu", "memory_mib": 81920, "healthy": true}),
            )
            .collect();
        let faults: serde_json::Map<String, Value> = (0..GPUS_PER_NODE)
            .map(|g| (g.to_string(), json!("benchmark: reported unhealthy")))
            .collect();
        let hb = json!({
            "protocol": 1,
            "node": {"name": format!("bench-{i:04}"), "cpu_milli": 64000, "memory_mib": 512000,
                     "gpus": gpus, "labels": {}, "gpu_source": "config"},
            "agent_url": "http://127.0.0.1:9",
            "addr": "127.0.0.1",
            "gpu_faults": faults,
            "running": [],
            "ended": [],
        });
        let resp = agent
            .post(format!("{base}/cluster/v1/heartbeat"))
            .header("Authorization", format!("Bearer {TOKEN}"))
            .send_json(&hb)?;
        if resp.status() != 200 {
            return Err(format!("heartbeat of node {i}: HTTP {}", resp.status()).into());
        }
    }
    Ok(())
}

fn body_text(mut resp: http::Response<ureq::Body>) -> Result<(u16, String)> {
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .with_config()
        .limit(256 << 20)
        .read_to_string()?;
    Ok((status, text))
}

fn metric(agent: &ureq::Agent, base: &str, name: &str) -> Result<f64> {
    let (_, text) = body_text(agent.get(format!("{base}/metrics")).call()?)?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum())
}

/// The cycle histogram's cumulative counts by upper bound (seconds).
fn cycle_buckets(agent: &ureq::Agent, base: &str) -> Result<Vec<(f64, f64)>> {
    let (_, text) = body_text(agent.get(format!("{base}/metrics")).call()?)?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("gantry_cycle_duration_seconds_bucket{"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, l.rsplit_once(' ')?.1.parse().ok()?))
        })
        .collect())
}

/// The upper bound of the bucket holding quantile `q` of the cycles between two readings.
fn bucket_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> f64 {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|(b, n)| {
            let was = before.iter().find(|(x, _)| x == b).map_or(0.0, |(_, n)| *n);
            (*b, n - was)
        })
        .collect();
    let total = delta.iter().map(|(_, n)| *n).fold(0.0, f64::max);
    delta
        .iter()
        .find(|(_, n)| total > 0.0 && *n >= q * total)
        .map_or(f64::NAN, |(b, _)| *b)
}

fn submit_pending(agent: &ureq::Agent, base: &str, pending: usize) -> Result<u64> {
    let mut first = None;
    let mut left = pending;
    while left > 0 {
        let n = left.min(ARRAY_MAX);
        let spec = json!({"name": "backlog", "argv": ["/bin/true"],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
            "array": {"indices": (0..n as u32).collect::<Vec<_>>()}});
        let (status, text) = body_text(agent.post(format!("{base}/v1/jobs")).send_json(&spec)?)?;
        if status != 201 {
            return Err(format!("array submit: HTTP {status}: {text}").into());
        }
        let v: Value = serde_json::from_str(&text)?;
        let id = v["array_job_ids"][0]
            .as_u64()
            .or_else(|| v["job"]["id"].as_u64())
            .ok_or("no id")?;
        first.get_or_insert(id);
        left -= n;
    }
    first.ok_or_else(|| "nothing submitted".into())
}

fn summary(name: &str, mut ms: Vec<f64>) -> Value {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = ((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len().max(1));
        ms.get(rank - 1).copied().unwrap_or(f64::NAN)
    };
    json!({"probe": name, "n": ms.len(), "median_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0)})
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let nodes = env_usize("BENCH_NODES", 1000);
    let pending = env_usize("BENCH_PENDING", 10_000);
    let probe_s = env_usize("BENCH_PROBE_S", 20) as u64;
    let tmp = tempfile::tempdir()?;
    let (_daemon, base) = start(tmp.path())?;
    let agent = http();
    register_nodes(&agent, &base, nodes).map_err(|e| format!("registering nodes: {e}"))?;
    if let Ok(pipeline) = std::env::var("BENCH_PIPELINE") {
        let pipeline: Value = serde_json::from_str(&pipeline)?;
        let (status, text) = body_text(
            agent
                .put(format!("{base}/v1/policy"))
                .send_json(&pipeline)?,
        )?;
        if status != 200 {
            return Err(format!("BENCH_PIPELINE: HTTP {status}: {text}").into());
        }
    }
    let t = Instant::now();
    let job = submit_pending(&common::agent(900), &base, pending)
        .map_err(|e| format!("submitting the backlog: {e}"))?;
    let backlog_submit_s = t.elapsed().as_secs_f64();
    // Let the first cycles over the whole backlog run before measuring.
    let t0 = Instant::now();
    while metric(&agent, &base, "gantry_cycle_duration_seconds_count")? < 3.0 {
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("fewer than 3 cycles in 300 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let sum0 = metric(&agent, &base, "gantry_cycle_duration_seconds_sum")?;
    let count0 = metric(&agent, &base, "gantry_cycle_duration_seconds_count")?;
    let buckets0 = cycle_buckets(&agent, &base)?;
    let probes = ["job", "health", "list", "submit"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); probes.len()];
    let end = Instant::now() + Duration::from_secs(probe_s);
    // One GPU like the backlog, so it joins it: nothing is launched during the window.
    let tiny = json!({"name": "probe", "argv": ["/bin/true"],
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]});
    let mut i = 0usize;
    while Instant::now() < end {
        let k = i % probes.len();
        let t = Instant::now();
        let resp = match probes[k] {
            "job" => agent.get(format!("{base}/v1/jobs/{job}")).call(),
            "health" => agent.get(format!("{base}/v1/health")).call(),
            "list" => agent.get(format!("{base}/v1/jobs?limit=50")).call(),
            _ => agent.post(format!("{base}/v1/jobs")).send_json(&tiny),
        }
        .map_err(|e| format!("probe {}: {e}", probes[k]))?;
        let (status, text) = body_text(resp)?;
        times[k].push(t.elapsed().as_secs_f64() * 1000.0);
        if status >= 300 {
            return Err(format!("{}: HTTP {status}: {text}", probes[k]).into());
        }
        i += 1;
    }
    let cycles = metric(&agent, &base, "gantry_cycle_duration_seconds_count")? - count0;
    let cycle_s = metric(&agent, &base, "gantry_cycle_duration_seconds_sum")? - sum0;
    let buckets1 = cycle_buckets(&agent, &base)?;
    let result = json!({
        "nodes": nodes,
        "pending": pending,
        "probe_s": probe_s,
        "backlog_submit_s": backlog_submit_s,
        "cycles": cycles,
        "cycle_mean_ms": if cycles > 0.0 { cycle_s / cycles * 1000.0 } else { f64::NAN },
        "cycle_p50_le_ms": bucket_quantile(&buckets0, &buckets1, 0.5) * 1000.0,
        "cycle_p99_le_ms": bucket_quantile(&buckets0, &buckets1, 0.99) * 1000.0,
        "probes": probes.iter().zip(times).map(|(p, t)| summary(p, t)).collect::<Vec<_>>(),
    });
    println!("RESULT {result}");
    Ok(())
}
