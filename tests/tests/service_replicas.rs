//! Replicated services (issue 30, replicas): `POST /v1/services` keeps N copies of a
//! service job, each its own allocation, replaces one that ends, scales by hand (newest and
//! pending first on the way down), waits with a reason when the cluster is full, stops, and
//! is still there after a daemon SIGKILL. `gantry service` shows it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::process::Command;

/// Answers its own port to any GET on $PORT.
const HTTP: &str = r#"
import http.server, os
PORT = os.environ["PORT"].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", str(len(PORT))); self.end_headers()
        self.wfile.write(PORT)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"#;

fn web(replicas: u32) -> Value {
    json!({"name": "web", "kind": "service", "argv": ["python3", "-c", HTTP],
           "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
           "service": {"replicas": replicas,
                       "health": {"http_path": "/", "interval_s": 1, "failures": 3, "initial_delay_s": 1}}})
}

/// The service's replicas once `ok` accepts them.
fn replicas_when(d: &Daemon, id: u64, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    d.wait_for(what, WAIT * 2, || {
        let (_, view) = d.get(&format!("/v1/services/{id}"));
        let replicas = view["replica_jobs"].as_array().cloned().unwrap_or_default();
        ok(&replicas).then_some(replicas)
    })
}

fn healthy(replicas: &[Value], n: usize) -> bool {
    replicas.len() == n
        && replicas
            .iter()
            .all(|r| r["state"] == "running" && r["health"] == "healthy")
}

/// The body of `GET http://127.0.0.1:{port}/` (a 2xx answer).
fn get(port: u64) -> String {
    ureq::get(&format!("http://127.0.0.1:{port}/"))
        .call()
        .unwrap_or_else(|e| panic!("GET on port {port}: {e}"))
        .body_mut()
        .read_to_string()
        .unwrap()
}

fn jobs_of(replicas: &[Value]) -> Vec<u64> {
    replicas
        .iter()
        .map(|r| r["job"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_service_keeps_its_replicas_scales_and_stops() {
    let mut d = Daemon::start(4);
    let (status, created) = d.post("/v1/services", &web(3));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    assert_eq!(created["replicas"], 3, "{created}");

    // Three independent jobs, healthy, each on its own GPU and port, named after the service.
    let three = replicas_when(&d, id, "three healthy replicas", |r| healthy(r, 3));
    let mut gpus = Vec::new();
    for r in &three {
        let job = d.job(r["job"].as_u64().unwrap());
        assert_eq!(
            job["spec"]["labels"]["gantry.service"],
            id.to_string(),
            "{job}"
        );
        assert!(
            job["spec"]["name"].as_str().unwrap().starts_with("web-r"),
            "{job}"
        );
        gpus.push(job["tasks"][0]["gpus"][0].clone());
        let port = r["port"].as_u64().unwrap();
        assert_eq!(get(port), port.to_string());
    }
    gpus.sort_by_key(|g| g.as_u64());
    gpus.dedup();
    assert_eq!(gpus.len(), 3, "one GPU each: {three:?}");

    // One endpoint for all three: requests spread over every replica.
    let endpoint = d.get(&format!("/v1/services/{id}")).1["endpoint_port"]
        .as_u64()
        .unwrap();
    let mut seen: Vec<String> = (0..30).map(|_| get(endpoint)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "answered by {seen:?}");

    // A replica that ends (here cancelled by hand) is replaced by a new job.
    let before = jobs_of(&three);
    let (status, body) = d.post(&format!("/v1/jobs/{}/cancel", before[1]), &json!({}));
    assert_eq!(status, 200, "{body}");
    let replaced = replicas_when(&d, id, "the replica replaced", |r| {
        healthy(r, 3) && !jobs_of(r).contains(&before[1])
    });
    let after = jobs_of(&replaced);
    assert!(
        after.contains(&before[0]) && after.contains(&before[2]),
        "{after:?}"
    );

    // Down to 1: the newest go; up to 5 on 4 GPUs: one waits with the reason.
    let (status, body) = d.post(&format!("/v1/services/{id}/scale"), &json!({"replicas": 1}));
    assert_eq!(status, 200, "{body}");
    let one = replicas_when(&d, id, "one replica", |r| healthy(r, 1));
    assert_eq!(jobs_of(&one), vec![before[0]], "the oldest stays");
    let (status, body) = d.post(&format!("/v1/services/{id}/scale"), &json!({"replicas": 5}));
    assert_eq!(status, 200, "{body}");
    let five = replicas_when(&d, id, "four running and one waiting", |r| {
        r.len() == 5 && r.iter().filter(|x| x["state"] == "running").count() == 4
    });
    let waiting = five.iter().find(|r| r["state"] == "pending").unwrap();
    assert!(
        waiting["reason"].as_str().is_some_and(|m| !m.is_empty()),
        "{waiting}"
    );

    // The CLI's table.
    let out = Command::new(gantry_bin())
        .args(["--server", d.url(), "service", "show", &id.to_string()])
        .env_remove("GANTRY_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("5 replica(s) wanted"), "{text}");
    assert_eq!(text.matches("running").count(), 4, "{text}");

    // Kept across a daemon SIGKILL; then stopped: every replica cancelled, none made again.
    d.restart_after_sigkill();
    let (status, view) = d.get(&format!("/v1/services/{id}"));
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["replicas"], 5, "{view}");
    assert_eq!(
        view["endpoint_port"], endpoint,
        "the endpoint keeps its port: {view}"
    );
    d.wait_for("the endpoint to answer again", WAIT, || {
        ureq::get(&format!("http://127.0.0.1:{endpoint}/"))
            .call()
            .ok()
            .map(|_| ())
    });
    let (status, body) = d.delete(&format!("/v1/services/{id}"));
    assert_eq!(status, 200, "{body}");
    let gone = jobs_of(&five);
    d.wait_for("every replica cancelled", WAIT, || {
        gone.iter()
            .all(|j| d.job(*j)["state"] == "cancelled")
            .then_some(())
    });
    let (status, body) = d.post(&format!("/v1/services/{id}/scale"), &json!({"replicas": 2}));
    assert_eq!(status, 409, "{body}");
}

#[test]
fn bad_service_requests_name_their_field() {
    let d = Daemon::start(1);
    let (status, body) = d.post("/v1/jobs", &web(2));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "service.replicas", "{body}");
    let mut spoof = web(0);
    spoof["labels"] = json!({"gantry.service": "1"});
    let (status, body) = d.post("/v1/jobs", &spoof);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "labels.gantry.service", "{body}");
    let mut fixed_port = web(2);
    fixed_port["service"]["port"] = json!(18_080);
    let (status, body) = d.post("/v1/services", &fixed_port);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "service.port", "{body}");
    let mut batch = web(1);
    batch["kind"] = json!("batch");
    let (status, body) = d.post("/v1/services", &batch);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "kind", "{body}");
    let (status, body) = d.post("/v1/services/1/scale", &json!({"replicas": 1}));
    assert_eq!(status, 404, "{body}");
    let (status, created) = d.post("/v1/services", &web(1));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let (status, body) = d.post(
        &format!("/v1/services/{id}/scale"),
        &json!({"replicas": 65}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "replicas", "{body}");
    let (status, body) = d.post(&format!("/v1/services/{id}/scale"), &json!({"replica": 1}));
    assert_eq!(status, 400, "{body}");
}

/// `/events`: `data: 1`, then `data: 2` once `$MARKER` exists (server-sent events).
const STREAM: &str = r#"
import http.server, os, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if self.path != "/events":
            return
        self.wfile.write(b"data: 1\n\n"); self.wfile.flush()
        while not os.path.exists(os.environ["MARKER"]):
            time.sleep(0.05)
        self.wfile.write(b"data: 2\n\n"); self.wfile.flush()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"#;

#[test]
fn the_endpoint_passes_a_stream_through_as_it_comes() {
    use std::io::{BufRead, BufReader, Write};
    let d = Daemon::start(1);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("second");
    let mut spec = web(1);
    spec["argv"] = json!(["python3", "-c", STREAM]);
    spec["env"] = json!({"MARKER": marker.to_str().unwrap()});
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    replicas_when(&d, id, "a healthy replica", |r| healthy(r, 1));
    let endpoint = d.get(&format!("/v1/services/{id}")).1["endpoint_port"]
        .as_u64()
        .unwrap();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", endpoint as u16)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    // The first event arrives while the replica still holds back the second one.
    loop {
        line.clear();
        reader
            .read_line(&mut line)
            .expect("the first event, before the second is sent");
        if line.contains("data: 1") {
            break;
        }
    }
    std::fs::write(&marker, "").unwrap();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("the second event");
        if line.contains("data: 2") {
            break;
        }
    }
}
