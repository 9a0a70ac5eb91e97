//! Benchmark: what a service's endpoint costs a request, and how soon a load step gets a
//! second replica (issue 30).
//!
//! `cargo bench -p gantry --bench service_endpoint` starts the real `gantry serve` (the
//! release build of this workspace, or `$GANTRY_BIN`; cgroups `auto`, tasks as `nobody`
//! when run as root) and, in one run:
//!
//! * `endpoint`: a service of this binary's own replica (below) with 1, then 2 replicas
//!   (`POST /v1/services/{id}/scale`). For each, `BENCH_CLIENTS` (8) keep-alive HTTP/1.1
//!   clients send `GET /` one after another for `BENCH_SECONDS` (5) to the replicas'
//!   own ports (`direct`; with 2 replicas each client alternates between them), then as
//!   long to the service's endpoint (`endpoint_port`); after one second of warm-up each.
//!   Requests per second, p50 and p99 latency, the ratio endpoint/direct of the rates and
//!   the latency the endpoint adds; the CPU of the daemon per 1000 requests.
//! * `step`: a service autoscaled on the replicas' `queue` gauge (min 1, max 2, target
//!   `BENCH_STEP_TARGET` (2), period 1 s), each request held `BENCH_STEP_DELAY_MS` (20) ms
//!   by the replica; from an idle replica, `BENCH_STEP_CLIENTS` (8; more than the target,
//!   or the queue never passes it) clients through the endpoint:
//!   the time from the load's start to the autoscaler's decision (its event), to
//!   `GET /v1/services/{id}` showing 2 healthy replicas, and to the first answer from the
//!   second replica through the endpoint (each answer names the replica's port).
//!
//! The replica is this binary started with `--replica` (the services' `argv`): tokio +
//! hyper on `127.0.0.1:$PORT`, HTTP/1.1 keep-alive, `/` answers `port N`, `/health` 200,
//! `/metrics` the Prometheus gauge `queue` (requests in flight), `REPLICA_DELAY_MS` holds
//! each `/` request. It is far faster than a Python server, so the proxy's cost shows.
//! Each replica asks for `BENCH_REPLICA_CPU_MILLI` (2000: the CFS quota of a tenth of a
//! CPU would make the replica the bottleneck). The clients run on `BENCH_CLIENT_THREADS`
//! (2) tokio workers in this process; on a small host, clients, daemon and replicas share
//! the same cores, which the numbers include.
//!
//! Prints `RESULT {json}`; asserts nothing about speed.

#[allow(dead_code)]
#[path = "../exec_throughput/support.rs"]
mod support;

mod clients;
mod replica;

use clients::{Plan, join, measure, pct_ms, spawn_clients};

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Result, agent, cpu, cpu_report, get, merge, start, unix_now};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// The API.

fn answer(resp: std::result::Result<http::Response<ureq::Body>, ureq::Error>) -> Result<Value> {
    let mut resp = resp?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string()?;
    if !(200..300).contains(&status) {
        return Err(format!("answered {status}: {text}").into());
    }
    Ok(serde_json::from_str(&text)?)
}

/// The service's replicas running, healthy and not draining.
fn healthy(view: &Value) -> Vec<&Value> {
    view["replica_jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["state"] == "running" && r["health"] == "healthy" && r["draining"] == false)
        .collect()
}

/// Polls the service until `ok` accepts its view (every 50 ms, at most `limit`).
fn wait_view(
    http: &ureq::Agent,
    base: &str,
    id: u64,
    what: &str,
    limit: Duration,
    ok: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let t0 = Instant::now();
    loop {
        let view = get(http, &format!("{base}/v1/services/{id}"))?;
        if ok(&view) {
            return Ok(view);
        }
        if t0.elapsed() > limit {
            return Err(format!("service {id}: no {what} after {limit:?}: {view}").into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_healthy(http: &ureq::Agent, base: &str, id: u64, n: usize) -> Result<Value> {
    wait_view(
        http,
        base,
        id,
        &format!("{n} healthy replicas"),
        Duration::from_secs(60),
        |v| healthy(v).len() == n,
    )
}

fn local(port: &Value) -> Result<SocketAddr> {
    let port = port.as_u64().ok_or("no port")?;
    Ok(SocketAddr::from(([127, 0, 0, 1], u16::try_from(port)?)))
}

/// The services created; stopped (and waited for) before the daemon goes, so that no
/// replica outlives the benchmark.
struct Services {
    http: ureq::Agent,
    base: String,
    ids: Vec<u64>,
}

impl Services {
    fn create(&mut self, spec: &Value) -> Result<u64> {
        let created = answer(
            self.http
                .post(format!("{}/v1/services", self.base))
                .send_json(spec),
        )?;
        let id = created["id"].as_u64().ok_or("no id")?;
        self.ids.push(id);
        Ok(id)
    }

    fn stop(&mut self, id: u64) -> Result<()> {
        self.ids.retain(|&i| i != id);
        answer(
            self.http
                .delete(format!("{}/v1/services/{id}", self.base))
                .call(),
        )?;
        wait_view(
            &self.http,
            &self.base,
            id,
            "end of its replicas",
            Duration::from_secs(30),
            |v| v["replica_jobs"].as_array().is_none_or(Vec::is_empty),
        )?;
        Ok(())
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for id in self.ids.clone() {
            if let Err(e) = self.stop(id) {
                eprintln!("stopping service {id}: {e}");
            }
        }
    }
}

fn spec(exe: &Path, name: &str, env: Value, service: Value) -> Value {
    let mut svc = json!({
        "health": {"http_path": "/health", "interval_s": 1, "failures": 2, "initial_delay_s": 0}
    });
    merge(&mut svc, service);
    let cpu_milli: u32 = env_or("BENCH_REPLICA_CPU_MILLI", 2000);
    json!({"name": name, "kind": "service", "argv": [exe, "--replica"], "env": env,
           "tasks": [{"count": 1, "gpus": 0, "cpu_milli": cpu_milli, "memory_mib": 256}],
           "service": svc})
}

// ---------------------------------------------------------------------------------------
// The measures.

fn endpoint_vs_direct(
    services: &mut Services,
    runtime: &tokio::runtime::Runtime,
    exe: &Path,
    daemon: u32,
    clients: usize,
    secs: f64,
) -> Result<Vec<Value>> {
    let (http, base) = (services.http.clone(), services.base.clone());
    let id = services.create(&spec(exe, "bench-web", json!({}), json!({"replicas": 1})))?;
    let mut results = Vec::new();
    for n in [1, 2] {
        if n > 1 {
            answer(
                http.post(format!("{base}/v1/services/{id}/scale"))
                    .send_json(json!({"replicas": n})),
            )?;
        }
        let view = wait_healthy(&http, &base, id, n)?;
        let endpoint = local(&view["endpoint_port"])?;
        let direct: Vec<SocketAddr> = healthy(&view)
            .iter()
            .map(|r| local(&r["port"]))
            .collect::<Result<_>>()?;
        let d = measure(runtime, &direct, clients, secs, daemon)?;
        let e = measure(runtime, &[endpoint], clients, secs, daemon)?;
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
        let r = json!({
            "what": "endpoint", "replicas": n, "clients": clients,
            "direct": d, "endpoint": e,
            "rps_ratio_endpoint_over_direct": f(&e, "rps") / f(&d, "rps"),
            "added_p50_ms": f(&e, "p50_ms") - f(&d, "p50_ms"),
            "added_p99_ms": f(&e, "p99_ms") - f(&d, "p99_ms"),
        });
        println!(
            "{n} replica(s), {clients} clients: direct {:.0} rps p50 {:.3} ms p99 {:.3} ms | \
             endpoint {:.0} rps p50 {:.3} ms p99 {:.3} ms | ratio {:.3}, +{:.3} ms p50, +{:.3} ms p99 \
             | daemon CPU {:.1} ms per 1000 requests | errors {} / {}",
            f(&d, "rps"),
            f(&d, "p50_ms"),
            f(&d, "p99_ms"),
            f(&e, "rps"),
            f(&e, "p50_ms"),
            f(&e, "p99_ms"),
            f(&r, "rps_ratio_endpoint_over_direct"),
            f(&r, "added_p50_ms"),
            f(&r, "added_p99_ms"),
            f(&e, "daemon_cpu_ms_per_1k_requests"),
            d["errors"],
            e["errors"],
        );
        results.push(r);
    }
    services.stop(id)?;
    Ok(results)
}

fn load_step(
    services: &mut Services,
    runtime: &tokio::runtime::Runtime,
    exe: &Path,
    clients: usize,
) -> Result<Value> {
    let (http, base) = (services.http.clone(), services.base.clone());
    let delay_ms: u64 = env_or("BENCH_STEP_DELAY_MS", 20);
    let target: f64 = env_or("BENCH_STEP_TARGET", 2.0);
    let id = services.create(&spec(
        exe,
        "bench-step",
        json!({"REPLICA_DELAY_MS": delay_ms.to_string()}),
        json!({"autoscale": {"min_replicas": 1, "max_replicas": 2, "metric": "queue",
                             "target": target, "period_s": 1}}),
    ))?;
    // One healthy replica, read at least once by the autoscaler while idle.
    let view = wait_view(
        &http,
        &base,
        id,
        "idle reading",
        Duration::from_secs(60),
        |v| healthy(v).len() == 1 && v["scale_samples"].as_array().is_some_and(|s| !s.is_empty()),
    )?;
    let endpoint = local(&view["endpoint_port"])?;
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let plan = Plan {
        until: Instant::now() + Duration::from_secs(120),
        stop: Arc::default(),
        seen: Some(seen.clone()),
    };
    let t0_unix_ms = unix_now() * 1000.0;
    let t0 = Instant::now();
    let handles = spawn_clients(runtime, &[endpoint], clients, &plan);
    let limit = Duration::from_secs(60);
    let two_healthy = wait_view(&http, &base, id, "second healthy replica", limit, |v| {
        healthy(v).len() == 2
    })
    .map(|_| t0.elapsed().as_secs_f64() * 1000.0);
    let second_answer = loop {
        let firsts: Vec<Instant> = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .copied()
            .collect();
        if firsts.len() >= 2 {
            let last = firsts.iter().max().copied().unwrap_or(t0);
            break Some(last.duration_since(t0).as_secs_f64() * 1000.0);
        }
        if t0.elapsed() > limit || two_healthy.is_err() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    plan.stop.store(true, Ordering::Relaxed);
    let mut t = join(runtime, handles);
    let two_healthy = two_healthy?;
    let events = get(&http, &format!("{base}/v1/services/{id}/events"))?;
    let decision = events.as_array().into_iter().flatten().find(|e| {
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("autoscaled 1 → 2"))
    });
    let decision_ms = decision
        .and_then(|e| e["at_ms"].as_f64())
        .map(|at| at - t0_unix_ms);
    t.lat_us.sort_unstable();
    let r = json!({
        "what": "step", "clients": clients, "delay_ms": delay_ms, "target": target,
        "load_to_decision_ms": decision_ms,
        "decision": decision.map(|e| e["message"].clone()),
        "load_to_two_healthy_ms": two_healthy,
        "load_to_second_replica_answering_ms": second_answer,
        "requests": t.ok, "errors": t.errors, "first_error": t.first_error,
        "p50_ms": pct_ms(&t.lat_us, 0.5), "p99_ms": pct_ms(&t.lat_us, 0.99),
        "by_port": t.by_port,
    });
    println!(
        "load step ({clients} clients, {delay_ms} ms per request, target {target}): \
         decision after {:.0} ms, 2 healthy after {two_healthy:.0} ms, second replica answering \
         through the endpoint after {:.0} ms | errors {}",
        decision_ms.unwrap_or(f64::NAN),
        second_answer.unwrap_or(f64::NAN),
        t.errors,
    );
    services.stop(id)?;
    Ok(r)
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--replica") {
        return replica::replica();
    }
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    let clients: usize = env_or("BENCH_CLIENTS", 8).max(1);
    let secs: f64 = env_or("BENCH_SECONDS", 5.0);
    let exe = std::env::current_exe()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(env_or("BENCH_CLIENT_THREADS", 2).max(1))
        .enable_all()
        .build()?;
    let tmp = tempfile::tempdir()?;
    let d = start(tmp.path())?;
    let mut services = Services {
        http: agent(),
        base: d.base.clone(),
        ids: Vec::new(),
    };
    let mut results =
        endpoint_vs_direct(&mut services, &runtime, &exe, d.child.id(), clients, secs)?;
    let step_clients: usize = env_or("BENCH_STEP_CLIENTS", 8).max(1);
    results.push(load_step(&mut services, &runtime, &exe, step_clients)?);
    drop(services);
    drop(d);
    println!(
        "RESULT {}",
        json!({"clients": clients, "seconds": secs, "results": results})
    );
    Ok(())
}
