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
#[path = "exec_throughput/support.rs"]
mod support;

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

// ---------------------------------------------------------------------------------------
// The replica (`--replica`).

/// Counts a `/` request in flight while it lives (also when its connection drops).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn respond(
    path: String,
    in_flight: Arc<AtomicUsize>,
    delay: Duration,
    answer: Bytes,
) -> Response<Full<Bytes>> {
    match path.as_str() {
        "/health" => Response::new(Full::new(Bytes::from_static(b"ok\n"))),
        "/metrics" => Response::new(Full::new(Bytes::from(format!(
            "# TYPE queue gauge\nqueue {}\n",
            in_flight.load(Ordering::Relaxed)
        )))),
        _ => {
            let _counted = InFlight::new(&in_flight);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Response::new(Full::new(answer))
        }
    }
}

/// Serves until killed (a service's replica: Gantry gives `$PORT`).
fn replica() -> Result<()> {
    let port: u16 = std::env::var("PORT")?.parse()?;
    let delay = Duration::from_millis(env_or("REPLICA_DELAY_MS", 0));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))?;
    runtime.block_on(async move {
        let in_flight = Arc::new(AtomicUsize::new(0));
        let answer = Bytes::from(format!("port {port}\n"));
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (in_flight, answer) = (in_flight.clone(), answer.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let answer = respond(
                        req.uri().path().to_string(),
                        in_flight.clone(),
                        delay,
                        answer.clone(),
                    );
                    async move { Ok::<_, std::convert::Infallible>(answer.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

// ---------------------------------------------------------------------------------------
// The clients.

type Sender = SendRequest<Empty<Bytes>>;

/// What the clients of one run saw.
#[derive(Default)]
struct Tally {
    ok: u64,
    errors: u64,
    first_error: Option<String>,
    lat_us: Vec<u32>,
    by_port: BTreeMap<u16, u64>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.ok += other.ok;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.lat_us.extend(other.lat_us);
        for (port, n) in other.by_port {
            *self.by_port.entry(port).or_default() += n;
        }
    }

    fn error(&mut self, e: String) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }
}

async fn connect(addr: SocketAddr) -> Result<Sender> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// `GET /` on `sender`; the port the answer names.
async fn one(sender: &mut Sender, addr: SocketAddr) -> Result<u16> {
    sender.ready().await?;
    let req = Request::get("/")
        .header(hyper::header::HOST, addr.to_string())
        .body(Empty::new())?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(format!("{status}: {text}").into());
    }
    text.trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected answer {text:?}").into())
}

/// What the clients do when: requests until `until` or `stop`, and where to note the
/// first answer of each replica.
#[derive(Clone)]
struct Plan {
    until: Instant,
    stop: Arc<AtomicBool>,
    seen: Option<Arc<Mutex<BTreeMap<u16, Instant>>>>,
}

/// One client: keep-alive connections to every address of `addrs`, one request at a time,
/// the next on the next address (starting at `first`); a failed connection is opened again.
async fn client(addrs: Vec<SocketAddr>, first: usize, plan: Plan) -> Tally {
    let mut t = Tally::default();
    let mut conns: Vec<Option<Sender>> = addrs.iter().map(|_| None).collect();
    let mut i = first;
    while Instant::now() < plan.until && !plan.stop.load(Ordering::Relaxed) {
        let k = i % addrs.len();
        i += 1;
        if conns[k].is_none() {
            match connect(addrs[k]).await {
                Ok(s) => conns[k] = Some(s),
                Err(e) => t.error(format!("connect {}: {e}", addrs[k])),
            }
        }
        let Some(sender) = conns[k].as_mut() else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let t0 = Instant::now();
        match one(sender, addrs[k]).await {
            Ok(port) => {
                t.ok += 1;
                t.lat_us
                    .push(u32::try_from(t0.elapsed().as_micros()).unwrap_or(u32::MAX));
                *t.by_port.entry(port).or_default() += 1;
                if let Some(seen) = &plan.seen {
                    seen.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(port)
                        .or_insert_with(Instant::now);
                }
            }
            Err(e) => {
                t.error(e.to_string());
                conns[k] = None;
            }
        }
    }
    t
}

/// Starts `clients` clients on `runtime`.
fn spawn_clients(
    runtime: &tokio::runtime::Runtime,
    addrs: &[SocketAddr],
    clients: usize,
    plan: &Plan,
) -> Vec<tokio::task::JoinHandle<Tally>> {
    (0..clients)
        .map(|j| runtime.spawn(client(addrs.to_vec(), j, plan.clone())))
        .collect()
}

fn join(runtime: &tokio::runtime::Runtime, handles: Vec<tokio::task::JoinHandle<Tally>>) -> Tally {
    runtime.block_on(async move {
        let mut all = Tally::default();
        for h in handles {
            match h.await {
                Ok(t) => all.add(t),
                Err(e) => all.error(format!("client task: {e}")),
            }
        }
        all
    })
}

/// Nearest-rank percentile of sorted `v`, in ms.
fn pct_ms(v: &[u32], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len());
    f64::from(v[rank - 1]) / 1000.0
}

/// `clients` clients against `addrs` for a second (not counted), then for `secs`: rate,
/// latency, errors, answers per replica port, the daemon's CPU.
fn measure(
    runtime: &tokio::runtime::Runtime,
    addrs: &[SocketAddr],
    clients: usize,
    secs: f64,
    daemon: u32,
) -> Result<Value> {
    let warm = Plan {
        until: Instant::now() + Duration::from_secs(1),
        stop: Arc::default(),
        seen: None,
    };
    join(runtime, spawn_clients(runtime, addrs, clients, &warm));
    let before = cpu(daemon)?;
    let t0 = Instant::now();
    let plan = Plan {
        until: t0 + Duration::from_secs_f64(secs),
        stop: Arc::default(),
        seen: None,
    };
    let mut t = join(runtime, spawn_clients(runtime, addrs, clients, &plan));
    let elapsed = t0.elapsed().as_secs_f64();
    let c = cpu_report(&before, &cpu(daemon)?);
    t.lat_us.sort_unstable();
    let daemon_s = c["cpu_s_gantry"].as_f64().unwrap_or(0.0);
    Ok(json!({
        "requests": t.ok,
        "errors": t.errors,
        "first_error": t.first_error,
        "seconds": elapsed,
        "rps": t.ok as f64 / elapsed,
        "p50_ms": pct_ms(&t.lat_us, 0.5),
        "p99_ms": pct_ms(&t.lat_us, 0.99),
        "by_port": t.by_port,
        "host_cpu_busy_pct": c["host_cpu_busy_pct"],
        "daemon_cpu_ms_per_1k_requests": daemon_s * 1e6 / (t.ok.max(1) as f64),
    }))
}

// ---------------------------------------------------------------------------------------
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
        return replica();
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
