//! Benchmark: what tracing and OTLP export cost the scheduling cycle.
//!
//! `cargo bench -p gantry --bench tracing_overhead` runs the daemon's own scheduler
//! in-process (`Scheduler::open` + `Scheduler::cycle`, the function the scheduling loop
//! calls, with the default wasm pipeline) on one node of 4 fake GPUs, held by a 4-GPU
//! blocker job, with `PENDING` (default 10,000) pending jobs of 1–4 GPUs that cannot start.
//! It times cycles under four subscribers, each scoped with `with_default`:
//!
//! * `off`: no subscriber at all (in the first round, before any subscriber exists);
//! * `logs`: what `telemetry::init` installs with no endpoint (the fmt log layer);
//! * `otlp`: logs + the OTLP layer exporting to a live receiver on 127.0.0.1;
//! * `otlp-down`: logs + the OTLP layer pointed at a closed port on 127.0.0.1.
//!
//! Each of `ROUNDS` (default 3) rounds runs every mode in turn on a fresh scheduler: the
//! first cycle (it starts the blocker and decides every pending job: a decision event and
//! an `admitted` job step, so a new job trace, each) and `CYCLES` (default 20)
//! steady-state cycles after it (nothing changes: a `cycle` span and its `plugin_call`
//! spans). Printed: the median first cycle, the median and p90 steady cycle, overheads
//! against `off`, and the spans exported and dropped per mode.
//!
//! Logs are filtered to `warn` unless `RUST_LOG` is set (the OTLP layer has its own
//! filter, so spans and events are still exported). The live receiver runs in this
//! process: on a small machine its threads, the SDK's export thread and the job-trace
//! thread share the cores with the cycle. The daemon has one local node, so the
//! issue's "× 1,000 nodes" is not reproduced here.

use gantry_api::model::{JobRecord, JobSpec};
use gantry_config::telemetry::TelemetryConfig;
use gantry_config::{Config, PluginLimits};
use gantry_controller::Scheduler;
use gantry_node::inventory::NodeConfig;
use gantry_store::Store;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn spec(v: serde_json::Value) -> JobSpec {
    let mut s: JobSpec = serde_json::from_value(v).expect("job spec");
    s.validate().expect("valid spec");
    s
}

/// A data dir holding the blocker (id 1, submitted first) and `pending` jobs.
fn populate(dir: &Path, pending: usize) {
    let store = Store::open(dir).expect("store");
    let now = gantry_controller::now_ms();
    let blocker = spec(json!({
        "name": "blocker", "argv": ["sleep", "60"],
        "tasks": [{"gpus": 4, "cpu_milli": 10, "memory_mib": 16}],
    }));
    let id = store.next_id("job").expect("id");
    store
        .put_job(&JobRecord::new(id, blocker, now.saturating_sub(1)))
        .expect("put");
    for i in 0..pending {
        let s = spec(json!({
            "name": format!("p{i}"), "argv": ["true"], "user": format!("u{}", i % 50),
            "tasks": [{"gpus": 1 + (i % 4), "cpu_milli": 10, "memory_mib": 16}],
            "time_limit_s": 60 + (i % 600),
        }));
        let id = store.next_id("job").expect("id");
        store.put_job(&JobRecord::new(id, s, now)).expect("put");
    }
    store.flush().expect("flush");
}

/// One mode's samples over all rounds.
#[derive(Default)]
struct Timing {
    firsts: Vec<Duration>,
    steady: Vec<Duration>,
    /// Spans exported and dropped during the mode (process-wide counters' deltas).
    exported: u64,
    dropped: u64,
}

fn median(v: &[Duration]) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    ms(v[v.len() / 2])
}

fn p90(v: &[Duration]) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    ms(v[(v.len() * 9 / 10).min(v.len() - 1)])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A fresh scheduler on a fresh data dir: times the first cycle, then `cycles` more.
fn run(rt: &tokio::runtime::Runtime, pending: usize, cycles: usize, into: &mut Timing) {
    let dir = tempfile::tempdir().expect("tempdir");
    populate(&dir.path().join("data"), pending);
    let config = Config {
        data_dir: dir.path().join("data"),
        node: NodeConfig {
            use_nvml: false,
            gpus: 4,
            cpu_milli: Some(64_000),
            memory_mib: Some(256_000),
            ..NodeConfig::default()
        },
        // Generous: a plugin fault would time the fallback instead.
        plugins: PluginLimits {
            deadline_ms: 10_000,
            ..PluginLimits::default()
        },
        // Snapshot recording is not what is measured.
        record_snapshots: 0,
        ..Config::default()
    };
    let _rt = rt.enter();
    let (sched, _events) =
        Scheduler::open(config, env!("CARGO_BIN_EXE_gantry").into()).expect("open scheduler");
    let t = Instant::now();
    sched.cycle();
    into.firsts.push(t.elapsed());
    for _ in 0..cycles {
        let t = Instant::now();
        sched.cycle();
        into.steady.push(t.elapsed());
    }
    let _ = sched.cancel(1);
    std::thread::sleep(Duration::from_millis(200));
}

/// An OTLP/HTTP sink on 127.0.0.1: reads each request and answers 200.
fn receiver(bytes: Arc<AtomicU64>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let bytes = bytes.clone();
            std::thread::spawn(move || {
                let Ok(mut out) = conn.try_clone() else {
                    return;
                };
                let mut r = BufReader::new(conn);
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    bytes.fetch_add(len as u64, Ordering::Relaxed);
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if out.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn main() {
    if std::env::var_os("RUST_LOG").is_none() {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("RUST_LOG", "warn") };
    }
    let pending = env_usize("PENDING", 10_000);
    let cycles = env_usize("CYCLES", 20).max(1);
    let rounds = env_usize("ROUNDS", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let received = Arc::new(AtomicU64::new(0));
    let live = receiver(received.clone());
    let down = closed_port();
    let endpoint = |port: u16| TelemetryConfig {
        endpoint: format!("http://127.0.0.1:{port}"),
        protocol: "http/protobuf".into(),
        headers: Default::default(),
    };
    println!(
        "tracing overhead: {pending} pending jobs x 1 node (4 GPUs, held by a blocker), {rounds} rounds x (first cycle + {cycles} steady cycles) per mode, default pipeline"
    );
    let modes = [
        ("off", None),
        ("logs", Some(TelemetryConfig::default())),
        ("otlp", Some(endpoint(live))),
        ("otlp-down", Some(endpoint(down))),
    ];
    let mut rows: Vec<Timing> = modes.iter().map(|_| Timing::default()).collect();
    // The scheduler's job steps become spans under the exporting modes, as in the daemon.
    gantry_server::job_trace_sink::install();
    // Rounds interleave the modes so that drift spreads over all of them; `off` comes
    // first, before any subscriber exists.
    for _ in 0..rounds {
        for ((_, config), row) in modes.iter().zip(rows.iter_mut()) {
            let Some(config) = config else {
                run(&rt, pending, cycles, row);
                continue;
            };
            let (e, d) = (
                gantry_telemetry::exported_spans(),
                gantry_telemetry::dropped_spans(),
            );
            let (dispatch, guard) = gantry_telemetry::subscriber(config).expect("subscriber");
            tracing::dispatcher::with_default(&dispatch, || run(&rt, pending, cycles, row));
            // Flushes (at most 3 s) so that the counts are complete.
            drop(guard);
            row.exported += gantry_telemetry::exported_spans() - e;
            row.dropped += gantry_telemetry::dropped_spans() - d;
        }
    }
    let base = median(&rows[0].steady);
    let base_first = median(&rows[0].firsts);
    println!(
        "{:<10} {:>15} {:>9} {:>14} {:>14} {:>10} {:>9} {:>9}",
        "mode",
        "first cycle ms",
        "first ovh",
        "steady med ms",
        "steady p90 ms",
        "steady ovh",
        "exported",
        "dropped"
    );
    for ((name, _), t) in modes.iter().zip(&rows) {
        println!(
            "{:<10} {:>15.2} {:>8.1}% {:>14.2} {:>14.2} {:>9.1}% {:>9} {:>9}",
            name,
            median(&t.firsts),
            (median(&t.firsts) / base_first - 1.0) * 100.0,
            median(&t.steady),
            p90(&t.steady),
            (median(&t.steady) / base - 1.0) * 100.0,
            t.exported,
            t.dropped,
        );
    }
    println!(
        "the live receiver got {} bytes of OTLP protobuf; {} export calls failed",
        received.load(Ordering::Relaxed),
        gantry_telemetry::export_failures()
    );
}
