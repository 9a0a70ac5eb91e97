//! OpenTelemetry export end to end: a real `gantry serve` configured with
//! `[telemetry] endpoint` sends OTLP/HTTP protobuf to a receiver in this test on
//! 127.0.0.1, which decodes every request with the `opentelemetry-proto` types.
//!
//! * A cycle that starts one job and holds another exports the `cycle` span, its
//!   `plugin_call` children (plugin name and sha256), the decisions as span events with
//!   their reasons, and the started job's lifecycle as one trace found by `job_id`.
//! * The same over OTLP/gRPC to a tonic receiver, configured headers included.
//! * With the collector down (a closed port) jobs still run promptly, the daemon stays
//!   healthy, and the spans it could not deliver are counted in its shutdown log.

use gantry_e2e::{TERMINAL, gantry_bin, id_of};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bound for everything this file waits on.
const WAIT: Duration = Duration::from_secs(45);

// ---------------------------------------------------------------- the OTLP receiver

/// One exported span as the receiver decoded it.
#[derive(Debug, Clone)]
struct Got {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attrs: BTreeMap<String, String>,
    /// (event name, attributes) per span event.
    events: Vec<(String, BTreeMap<String, String>)>,
    /// Span ids this span links to.
    links: Vec<String>,
    resource: BTreeMap<String, String>,
}

impl Got {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).map(String::as_str)
    }
}

fn text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

/// A minimal OTLP/HTTP receiver: `POST /v1/traces` with `application/x-protobuf`
/// bodies (HTTP/1.1, keep-alive, Content-Length or chunked), answered 200 with an empty
/// `ExportTraceServiceResponse`.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let port = listener.local_addr().expect("addr").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (spans.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (s, r) = (s.clone(), r.clone());
                std::thread::spawn(move || serve_connection(conn, &s, &r));
            }
        });
        Self {
            port,
            spans,
            requests,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn summary(&self) -> String {
        let spans = self.spans();
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &spans {
            *names.entry(&s.name).or_default() += 1;
        }
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        let events: BTreeSet<String> = spans
            .iter()
            .flat_map(|s| s.events.iter())
            .map(|(n, a)| format!("{n} {a:?}"))
            .take(30)
            .collect();
        format!(
            "receiver got {} requests ({:?}), spans by name {names:?}\nsome events: {events:#?}",
            requests.len(),
            requests.iter().take(3).collect::<Vec<_>>()
        )
    }
}

fn serve_connection(conn: TcpStream, spans: &Mutex<Vec<Got>>, requests: &Mutex<Vec<String>>) {
    let mut out = match conn.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut reader = BufReader::new(conn);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            read_chunked(&mut reader)
        } else {
            let n: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let mut b = vec![0; n];
            reader.read_exact(&mut b).ok().map(|()| b)
        };
        let Some(body) = body else { return };
        let content_type = headers.get("content-type").cloned().unwrap_or_default();
        requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!(
                "{} {content_type} {} bytes x-gantry-test={}",
                request_line.trim(),
                body.len(),
                headers.get("x-gantry-test").map_or("", String::as_str)
            ));
        let ok = request_line.starts_with("POST /v1/traces ")
            && content_type.starts_with("application/x-protobuf");
        let status = match ok.then(|| ExportTraceServiceRequest::decode(body.as_slice())) {
            Some(Ok(req)) => {
                collect(&req, spans);
                "200 OK"
            }
            Some(Err(_)) | None => "400 Bad Request",
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Adds the spans of one export request to `into`.
fn collect(req: &ExportTraceServiceRequest, into: &Mutex<Vec<Got>>) {
    let mut got = into.lock().unwrap_or_else(|e| e.into_inner());
    for rs in &req.resource_spans {
        let resource = rs
            .resource
            .as_ref()
            .map(|r| attrs(&r.attributes))
            .unwrap_or_default();
        for ss in &rs.scope_spans {
            for sp in &ss.spans {
                got.push(Got {
                    name: sp.name.clone(),
                    trace_id: hex::encode(&sp.trace_id),
                    span_id: hex::encode(&sp.span_id),
                    parent_span_id: hex::encode(&sp.parent_span_id),
                    attrs: attrs(&sp.attributes),
                    events: sp
                        .events
                        .iter()
                        .map(|e| (e.name.clone(), attrs(&e.attributes)))
                        .collect(),
                    links: sp.links.iter().map(|l| hex::encode(&l.span_id)).collect(),
                    resource: resource.clone(),
                });
            }
        }
    }
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; n + 2];
        reader.read_exact(&mut chunk).ok()?;
        if n == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..n]);
    }
}

// ---------------------------------------------------------------- the daemon

/// `gantry serve` with a telemetry endpoint in its config file. Stopped with SIGTERM so
/// that it flushes its spans and logs its telemetry counts.
struct Gantry {
    child: Child,
    base: String,
    agent: ureq::Agent,
    dir: tempfile::TempDir,
}

impl Gantry {
    /// Starts a daemon whose config has the `[telemetry]` section `telemetry`.
    fn start(gpus: u32, telemetry: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gantry-otel-")
            .tempdir()
            .expect("temp dir");
        let config = format!(
            "cycle_interval_ms = 200\nkill_grace_s = 2\n\n[plugins]\ndeadline_ms = 1000\n\n\
             [execution]\ncgroups = \"off\"\nrun_as_user = false\n\n[telemetry]\n{telemetry}\n"
        );
        fs::write(dir.path().join("gantry.toml"), config).expect("config");
        let out = dir.path().join("daemon.out");
        let mut child = Command::new(gantry_bin())
            .arg("serve")
            .arg("--config")
            .arg(dir.path().join("gantry.toml"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--no-nvml",
                "--gpus",
                &gpus.to_string(),
            ])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            // Only the config decides where spans go.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_SDK_DISABLED")
            .stdin(Stdio::null())
            .stdout(File::create(&out).expect("stdout file"))
            .stderr(File::create(dir.path().join("daemon.err")).expect("stderr file"))
            .spawn()
            .expect("start gantry");
        let deadline = Instant::now() + Duration::from_secs(60);
        let base = loop {
            let text = fs::read_to_string(&out).unwrap_or_default();
            if let Some(addr) = text
                .lines()
                .find_map(|l| l.strip_prefix("gantry listening on "))
            {
                break addr.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("gantry exited ({status}) before listening:\n{text}");
            }
            assert!(Instant::now() < deadline, "gantry did not listen:\n{text}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .proxy(None)
                .timeout_global(Some(Duration::from_secs(30)))
                .build(),
        );
        Self {
            child,
            base,
            agent,
            dir,
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.out")
    }

    fn log(&self) -> String {
        let mut all = fs::read_to_string(self.log_path()).unwrap_or_default();
        all += &fs::read_to_string(self.dir.path().join("daemon.err")).unwrap_or_default();
        all
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn get(&self, path: &str) -> (u16, Value) {
        let mut resp = self
            .agent
            .get(format!("{}{path}", self.base))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log_tail()));
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn submit(&self, spec: &Value) -> u64 {
        let mut resp = self
            .agent
            .post(format!("{}/v1/jobs", self.base))
            .send_json(spec)
            .unwrap_or_else(|e| panic!("submit: {e}\n{}", self.log_tail()));
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().expect("body");
        assert_eq!(status, 201, "submit {spec}: {text}");
        id_of(&serde_json::from_str(&text).expect("job JSON"))
    }

    fn state(&self, id: u64) -> String {
        let (status, job) = self.get(&format!("/v1/jobs/{id}"));
        assert_eq!(status, 200, "job {id}: {job}");
        job["state"].as_str().unwrap_or_default().to_string()
    }

    fn wait_terminal(&self, id: u64, deadline: Instant) -> String {
        loop {
            let s = self.state(id);
            if TERMINAL.contains(&s.as_str()) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "job {id} still {s}\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then waits (bounded) for the daemon to exit; returns its log.
    fn stop(&mut self) -> String {
        // SAFETY: signalling our own child by pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("gantry did not stop on SIGTERM\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.log()
    }
}

impl Drop for Gantry {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn job(name: &str, gpus: u32, argv: &[&str]) -> Value {
    json!({
        "name": name,
        "argv": argv,
        "tasks": [{"count": 1, "gpus": gpus, "gpu_milli": 0, "cpu_milli": 100, "memory_mib": 64}],
    })
}

/// Polls `check` on the received spans until it passes or [`WAIT`] runs out.
fn wait_spans(rx: &Receiver, d: &Gantry, what: &str, check: impl Fn(&[Got]) -> Result<(), String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let spans = rx.spans();
        match check(&spans) {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => panic!(
                "{what}: {why}\n{}\n--- daemon log ---\n{}",
                rx.summary(),
                d.log_tail()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

// ---------------------------------------------------------------- the tests

#[test]
fn a_cycle_that_starts_one_job_and_holds_another_is_traced_over_otlp() {
    let rx = Receiver::start();
    let mut d = Gantry::start(
        4,
        &format!(
            "endpoint = \"{}\"\nprotocol = \"http/protobuf\"\nheaders = {{ x-gantry-test = \"yes\" }}",
            rx.endpoint()
        ),
    );
    // `a` holds one GPU for a second, so `b` (all four) is held in the cycles meanwhile.
    let a = d.submit(&job("a", 1, &["sleep", "1"]));
    let b = d.submit(&job("b", 4, &["sleep", "0.2"]));
    let deadline = Instant::now() + WAIT;
    assert_eq!(d.wait_terminal(a, deadline), "succeeded");
    assert_eq!(d.wait_terminal(b, deadline), "succeeded");
    let (a_id, b_id) = (a.to_string(), b.to_string());

    wait_spans(&rx, &d, "the cycle span", |spans| {
        let cycle = spans
            .iter()
            .find(|s| s.name == "cycle")
            .ok_or("no span named cycle")?;
        if cycle.resource.get("service.name").map(String::as_str) != Some("gantry") {
            return Err(format!("resource is {:?}", cycle.resource));
        }
        if !cycle.resource.contains_key("service.version") {
            return Err(format!("no service.version in {:?}", cycle.resource));
        }
        if cycle.attr("cycle_id").is_none() || cycle.attr("snapshot_pending").is_none() {
            return Err(format!("cycle attributes {:?}", cycle.attrs));
        }
        Ok(())
    });

    wait_spans(&rx, &d, "plugin_call spans under cycles", |spans| {
        let cycles: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.name == "cycle")
            .map(|s| s.span_id.as_str())
            .collect();
        let calls: Vec<&Got> = spans.iter().filter(|s| s.name == "plugin_call").collect();
        if calls.is_empty() {
            return Err("no plugin_call span".into());
        }
        let under_cycle: Vec<&&Got> = calls
            .iter()
            .filter(|c| cycles.contains(c.parent_span_id.as_str()))
            .collect();
        let names: BTreeSet<&str> = under_cycle
            .iter()
            .filter_map(|c| c.attr("plugin_name"))
            .collect();
        if !names.contains("fifo") && !names.contains("first-fit") {
            return Err(format!("plugin names under cycles: {names:?}"));
        }
        if let Some(bad) = under_cycle
            .iter()
            .find(|c| !c.attr("plugin_sha256").is_some_and(is_sha256) || c.attr("stage").is_none())
        {
            return Err(format!(
                "plugin_call without stage or sha256: {:?}",
                bad.attrs
            ));
        }
        Ok(())
    });

    wait_spans(&rx, &d, "decision events for both jobs", |spans| {
        let events: Vec<&BTreeMap<String, String>> = spans
            .iter()
            .flat_map(|s| s.events.iter().map(|(_, a)| a))
            .filter(|a| a.contains_key("decision"))
            .collect();
        let of = |id: &str, decision: &str| {
            events.iter().find(|a| {
                a.get("job_id").map(String::as_str) == Some(id)
                    && a.get("decision").map(String::as_str) == Some(decision)
            })
        };
        of(&a_id, "start").ok_or(format!("no start decision event for job {a_id}"))?;
        let held =
            of(&b_id, "pending").ok_or(format!("no pending decision event for job {b_id}"))?;
        if held.get("reason_code").map(String::as_str) != Some("insufficient-gpus") {
            return Err(format!("job {b_id} pending with {held:?}"));
        }
        Ok(())
    });

    wait_spans(&rx, &d, "the lifecycle trace of the started job", |spans| {
        let mine: Vec<&Got> = spans
            .iter()
            .filter(|s| s.attr("job_id") == Some(a_id.as_str()) && s.attr("step").is_some())
            .collect();
        let steps: BTreeSet<&str> = mine.iter().filter_map(|s| s.attr("step")).collect();
        for step in ["submitted", "started", "finished"] {
            if !steps.contains(step) {
                return Err(format!("job {a_id} steps so far {steps:?}, missing {step}"));
            }
        }
        let traces: BTreeSet<&str> = mine.iter().map(|s| s.trace_id.as_str()).collect();
        if traces.len() != 1 {
            return Err(format!("job {a_id} steps in {} traces", traces.len()));
        }
        let root = spans
            .iter()
            .find(|s| s.name == format!("job {a_id}"))
            .ok_or(format!("no root span `job {a_id}`"))?;
        if !traces.contains(root.trace_id.as_str()) {
            return Err("the root is in another trace".into());
        }
        let started = mine
            .iter()
            .find(|s| s.attr("step") == Some("started"))
            .ok_or("no started step")?;
        let cycles: BTreeSet<&str> = spans
            .iter()
            .filter(|s| s.name == "cycle")
            .map(|s| s.span_id.as_str())
            .collect();
        if !started.links.iter().any(|l| cycles.contains(l.as_str())) {
            return Err(format!(
                "the started step does not link to a cycle span (links {:?})",
                started.links
            ));
        }
        Ok(())
    });

    let log = d.stop();
    assert!(log.contains("telemetry shut down"), "{log}");
    let requests = rx
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    assert!(
        requests.iter().all(|r| r.ends_with("x-gantry-test=yes")),
        "the configured header is missing: {requests:?}"
    );
    eprintln!("{}", rx.summary());
}

#[test]
fn with_the_collector_down_jobs_run_and_dropped_spans_are_counted() {
    // A port that nothing listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let mut d = Gantry::start(4, &format!("endpoint = \"http://127.0.0.1:{port}\""));
    let t = Instant::now();
    let ids: Vec<u64> = (0..20)
        .map(|i| d.submit(&job(&format!("short-{i}"), 1, &["true"])))
        .collect();
    let deadline = Instant::now() + WAIT;
    for id in &ids {
        assert_eq!(d.wait_terminal(*id, deadline), "succeeded", "job {id}");
    }
    let took = t.elapsed();
    let (status, nodes) = d.get("/v1/nodes");
    assert_eq!(status, 200, "{nodes}");
    let log = d.stop();
    let line = log
        .lines()
        .find(|l| l.contains("telemetry shut down"))
        .unwrap_or_else(|| panic!("no telemetry shutdown line in the log:\n{log}"));
    let count = |key: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
    };
    assert!(
        count("dropped_spans") > 0,
        "nothing counted as dropped: {line}"
    );
    assert_eq!(count("exported_spans"), 0, "{line}");
    eprintln!("20 jobs with the collector down took {took:?}; {line}");
}

#[test]
fn a_collector_that_never_answers_neither_slows_jobs_nor_blocks_shutdown() {
    // Accepts connections and never reads or answers them.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let mut d = Gantry::start(4, &format!("endpoint = \"http://127.0.0.1:{port}\""));
    let ids: Vec<u64> = (0..10)
        .map(|i| d.submit(&job(&format!("short-{i}"), 1, &["true"])))
        .collect();
    let deadline = Instant::now() + WAIT;
    for id in &ids {
        assert_eq!(d.wait_terminal(*id, deadline), "succeeded", "job {id}");
    }
    // Let the export thread get stuck in a request to the silent collector.
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let log = d.stop();
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "shutdown took {took:?} with a silent collector"
    );
    let line = log
        .lines()
        .find(|l| l.contains("telemetry shut down"))
        .unwrap_or_else(|| panic!("no telemetry shutdown line in the log:\n{log}"));
    assert!(
        !line.contains(" dropped_spans=0 "),
        "nothing counted as dropped: {line}"
    );
    eprintln!("silent collector: stopped in {took:?}; {line}");
}

// ---------------------------------------------------------------- gRPC

/// An OTLP/gRPC trace service (the generated tonic server of `opentelemetry-proto`).
struct GrpcCollector {
    spans: Arc<Mutex<Vec<Got>>>,
    /// The `x-gantry-test` metadata of each request.
    headers: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl TraceService for GrpcCollector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let header = request
            .metadata()
            .get("x-gantry-test")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        self.headers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(header);
        collect(request.get_ref(), &self.spans);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[test]
fn grpc_export_reaches_an_otlp_grpc_receiver() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let spans = Arc::new(Mutex::new(Vec::new()));
    let headers = Arc::new(Mutex::new(Vec::new()));
    let incoming = {
        let _rt = rt.enter();
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind the gRPC receiver")
    };
    let port = incoming.local_addr().expect("addr").port();
    let service = TraceServiceServer::new(GrpcCollector {
        spans: spans.clone(),
        headers: headers.clone(),
    });
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    let mut d = Gantry::start(
        4,
        &format!(
            "endpoint = \"http://127.0.0.1:{port}\"\nprotocol = \"grpc\"\nheaders = {{ x-gantry-test = \"yes\" }}"
        ),
    );
    let id = d.submit(&job("g", 1, &["true"]));
    assert_eq!(d.wait_terminal(id, Instant::now() + WAIT), "succeeded");
    let deadline = Instant::now() + WAIT;
    let root = format!("job {id}");
    loop {
        let got = spans.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let names: BTreeSet<&str> = got.iter().map(|s| s.name.as_str()).collect();
        if names.contains("cycle") && names.contains(root.as_str()) {
            let cycle = got.iter().find(|s| s.name == "cycle").expect("cycle");
            assert_eq!(
                cycle.resource.get("service.name").map(String::as_str),
                Some("gantry")
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "over gRPC, got spans {names:?}\n{}",
            d.log_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = d.stop();
    let seen = headers.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        !seen.is_empty() && seen.iter().all(|h| h == "yes"),
        "x-gantry-test metadata per request: {seen:?}"
    );
    assert!(log.contains("telemetry shut down"), "{log}");
}
