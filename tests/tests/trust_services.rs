//! Issue 43, services (findings 8, 9, 10): the ports and names of replicated services belong
//! to their owners. Each test plays the hostile local account `nobody` against a service of
//! another user on a real daemon, and needs root (to act as `nobody`): it fails, never
//! skips, elsewhere.
//!
//! - 8: `nobody` binds the port a replica was given before the replica does; the endpoint
//!   sends the owner's clients (and their `Authorization` headers) nowhere near it, the
//!   replica is shown not ready with a reason naming uid 65534, and once restarted it
//!   listens on a new port and serves.
//!   The same on an agent's node, where the agent reads its own sockets.
//! - 9: `nobody` takes a service's endpoint port while the controller is down; the
//!   restarted controller keeps the port (never moves it), says why, and takes it back once
//!   it is free.
//! - 10: `nobody` makes a service with the name of another user's on the gateway; the name's
//!   route stays its first owner's, and each user's own `/~USER/NAME/` path reaches theirs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::Agent;
use gantry_e2e::as_user::{NOBODY, cli_as_nobody, nobodys_dir, nobodys_file};
use gantry_e2e::root::{open_dir, require_root};
use gantry_e2e::services::{fake_service, service_events, service_view};
use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A listener of `nobody`'s on `127.0.0.1:PORT` (argv 1) that records every connection and
/// what it received into the file argv 2, and answers `squatter`.
const SQUATTER: &str = r#"
import socket, sys
port, log = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    with open(log, "ab") as f:
        f.write(b"CONNECTION\n")
    c.settimeout(2)
    try:
        data = c.recv(65536)
    except Exception:
        data = b""
    with open(log, "ab") as f:
        f.write(data)
    try:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nsquatter")
    except Exception:
        pass
    c.close()
"#;

/// A replica that waits for the file `$GO`, then serves `replica:$PORT` on 127.0.0.1:$PORT
/// (and fails when it cannot bind it).
const REPLICA: &str = r#"
import http.server, os, time
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.05)
PORT = int(os.environ["PORT"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("replica:%d" % PORT).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", PORT), H).serve_forever()
"#;

/// The secret a client of the service sends with each request.
const SECRET: &str = "Bearer owners-secret-token";

/// `nobody`'s listener on a port; killed when dropped.
struct Squatter {
    child: Child,
    log: PathBuf,
}

impl Squatter {
    /// Binds `port` as `nobody` (asserting it could), logging into `dir`.
    fn bind(port: u16, dir: &Path) -> Self {
        let log = dir.join(format!("squatter-{port}.log"));
        let mut child = Command::new("python3")
            .args(["-c", SQUATTER, &port.to_string()])
            .arg(&log)
            .uid(NOBODY)
            .gid(NOBODY)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start python3 as nobody");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        // Either it prints that it listens, or it exits (EOF): no wait without a bound.
        BufReader::new(stdout).read_line(&mut line).expect("read");
        if line.trim() != "listening" {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "nobody could not bind port {port}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Self { child, log }
    }

    /// What it received so far (empty: no connection).
    fn received(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET http://127.0.0.1:{port}{path}` with the owner's `Authorization` header: status and
/// body (a refused connection is status 0).
fn get_with_secret(port: u16, path: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(15)))
        .http_status_as_error(false)
        .build()
        .into();
    match agent
        .get(&format!("http://127.0.0.1:{port}{path}"))
        .header("Authorization", SECRET)
        .call()
    {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(e) => (0, e.to_string()),
    }
}

/// The first replica of service `id` once `ok` accepts it.
fn replica_when(d: &Daemon, id: u64, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    d.wait_for(what, WAIT * 2, || {
        let view = service_view(d, id);
        let first = view["replica_jobs"].get(0).cloned()?;
        ok(&first).then_some(first)
    })
}

#[test]
fn a_port_another_user_took_before_the_replica_gets_none_of_its_clients_traffic() {
    require_root("the squatter runs as nobody");
    // A request with no replica ready waits this long for one, then is a 503.
    let d = Daemon::start_with_config(2, "[services]\nactivation_timeout_s = 2\n");
    let dir = open_dir();
    let go = dir.path().join("go");
    let (status, created) = d.post("/v1/services", &waiting_replica(&go));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    squat_the_replicas_port(&d, id, &go, dir.path());
}

/// The replica spec of the squat tests: [`REPLICA`] waiting for `go`, no health check
/// (such a replica counts as ready as soon as it runs).
fn waiting_replica(go: &Path) -> Value {
    json!({"name": "web", "kind": "service", "argv": ["python3", "-c", REPLICA],
        "env": {"GO": go.to_string_lossy()},
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
        "service": {"replicas": 1}})
}

/// Plays finding 8 against service `id` of `d` (a [`waiting_replica`]): nobody binds the
/// replica's port first; the endpoint never reaches nobody's listener, the replica shows
/// a reason naming uid 65534 and the service an event; released, the replica fails on
/// that port, restarts on another and serves through the endpoint.
fn squat_the_replicas_port(d: &Daemon, id: u64, go: &Path, dir: &Path) {
    let endpoint = d.wait_for("the endpoint's port", WAIT, || {
        service_view(d, id)["endpoint_port"].as_u64()
    }) as u16;
    let replica = replica_when(d, id, "a running replica with its port", |r| {
        r["state"] == "running" && r["port"].is_u64()
    });
    let port = replica["port"].as_u64().unwrap() as u16;

    // nobody binds the published port before the replica does.
    let squatter = Squatter::bind(port, dir);
    let (status, body) = get_with_secret(endpoint, "/private");
    assert!(
        !body.contains("squatter"),
        "the endpoint sent the owner's request to nobody's listener: {status} {body}"
    );
    assert_eq!(status, 503, "no replica of the service listens yet: {body}");
    assert_eq!(
        squatter.received(),
        "",
        "nobody's listener was connected to"
    );
    // The replica is shown not ready, naming who holds its port; the service says so.
    let held = replica_when(d, id, "the replica's reason naming the squatter", |r| {
        r["reason"].as_str().is_some_and(|m| m.contains("65534"))
    });
    assert_eq!(held["port"].as_u64(), Some(u64::from(port)), "{held}");
    let events = d.wait_for("an event naming the squatter", WAIT, || {
        let events = service_events(d, id);
        events
            .iter()
            .any(|e| e.contains(&format!("port {port}")) && e.contains("65534"))
            .then_some(events)
    });
    eprintln!("events: {events:?}");

    // The replica now tries its port, fails (address in use) and is restarted: on a new
    // port, which it serves; the endpoint reaches it there, and still never the squatter.
    std::fs::write(go, "").unwrap();
    let (moved, answer) = d.wait_for("the replica serving on a new port", WAIT * 2, || {
        let (status, body) = get_with_secret(endpoint, "/private");
        assert!(
            !body.contains("squatter"),
            "the endpoint sent the owner's request to nobody's listener: {status} {body}"
        );
        let view = service_view(d, id);
        let now = view["replica_jobs"][0]["port"].as_u64()?;
        (status == 200).then_some((now, body))
    });
    assert_ne!(moved, u64::from(port), "the replica kept the squatted port");
    assert_eq!(answer, format!("replica:{moved}"));
    let received = squatter.received();
    assert!(
        !received.contains("owners-secret-token") && received.is_empty(),
        "nobody's listener received: {received:?}"
    );
}

#[test]
fn on_an_agents_node_a_port_another_user_took_gets_none_of_the_clients_traffic() {
    require_root("the squatter runs as nobody");
    const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n\
             [services]\nactivation_timeout_s = 2\n"
        ),
    );
    let url = d.url().to_string();
    let _agent = Agent::start(&d, &url, "node-a", 1, TOKEN);
    let dir = open_dir();
    let go = dir.path().join("go");
    let (status, created) = d.post("/v1/services", &waiting_replica(&go));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    replica_when(&d, id, "the replica on node-a", |r| r["node"] == "node-a");
    squat_the_replicas_port(&d, id, &go, dir.path());
}

#[test]
fn an_endpoint_port_someone_took_across_a_restart_is_kept_and_said_never_moved() {
    require_root("the squatter runs as nobody");
    let mut d = Daemon::start(2);
    let dir = open_dir();
    let spec = fake_service("chat", json!({"VERSION": "mine"}), json!({"replicas": 1}));
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    replica_when(&d, id, "a healthy replica", |r| r["health"] == "healthy");
    let endpoint = service_view(&d, id)["endpoint_port"].as_u64().unwrap() as u16;
    let (status, body) = get_with_secret(endpoint, "/v1/completions");
    assert_eq!(status, 200, "{body}");

    // The controller goes down; nobody binds the endpoint's port before it is back.
    let mut squatter = None;
    d.restart_after_sigkill_with(|_| squatter = Some(Squatter::bind(endpoint, dir.path())));
    let squatter = squatter.unwrap();
    let view = d.wait_for("the endpoint's problem, naming the squatter", WAIT, || {
        let view = service_view(&d, id);
        view["endpoint_problem"]
            .as_str()
            .is_some_and(|p| p.contains("65534"))
            .then_some(view)
    });
    assert_eq!(
        view["endpoint_port"].as_u64(),
        Some(u64::from(endpoint)),
        "the endpoint moved: {view}"
    );
    let events = service_events(&d, id);
    assert!(
        events
            .iter()
            .any(|e| e.contains("endpoint closed") && e.contains("65534")),
        "{events:?}"
    );
    assert_eq!(
        squatter.received(),
        "",
        "Gantry sent nobody's listener traffic"
    );

    // Once the port is free the endpoint takes it back, on the same port.
    drop(squatter);
    let body = d.wait_for("the endpoint serving on its port again", WAIT, || {
        let (status, body) = get_with_secret(endpoint, "/v1/completions");
        (status == 200).then_some(body)
    });
    assert!(body.contains("\"mine\""), "{body}");
    let view = d.wait_for("no endpoint problem", WAIT, || {
        let view = service_view(&d, id);
        view["endpoint_problem"].is_null().then_some(view)
    });
    assert_eq!(view["endpoint_port"].as_u64(), Some(u64::from(endpoint)));
    let events = service_events(&d, id);
    assert!(
        events
            .iter()
            .any(|e| e.contains(&format!("listening on its port {endpoint} again"))),
        "{events:?}"
    );
}

#[test]
fn a_gateway_name_stays_its_first_owners_and_each_user_has_their_own_path() {
    require_root("the second owner is nobody, over the daemon's socket");
    let gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gport = gateway.local_addr().unwrap().port();
    drop(gateway);
    let d = Daemon::start_with_config(2, &format!("[services]\ngateway = \"127.0.0.1:{gport}\"\n"));
    // nobody reaches the daemon's socket (as in `as_user::daemon_for_users`).
    let root = d.out_dir().parent().unwrap().to_path_buf();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = root.join("data/gantry.sock");

    // alice's service "chat" first (made for her by an administrator).
    let mut alices = fake_service("chat", json!({"VERSION": "alice"}), json!({"replicas": 1}));
    alices["user"] = json!("alice");
    let (status, created) = d.post("/v1/services", &alices);
    assert_eq!(status, 201, "{created}");
    let alice = created["id"].as_u64().unwrap();
    assert_eq!(created["template"]["user"], "alice", "{created}");
    replica_when(&d, alice, "alice's replica healthy", |r| {
        r["health"] == "healthy"
    });
    let (status, body) = get_with_secret(gport, "/chat/v1/completions");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"alice\""), "{body}");

    // nobody makes a service of the same name, through the CLI on the socket.
    let home = nobodys_dir();
    let spec = fake_service("chat", json!({"VERSION": "nobody"}), json!({"replicas": 1}));
    let file = nobodys_file(home.path(), "chat.json", &spec.to_string());
    let out = cli_as_nobody(
        &socket,
        home.path(),
        &[("PATH", "/usr/bin:/bin")],
        &["service", "create", &file.to_string_lossy()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, services) = d.get("/v1/services");
    let theirs = services
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["template"]["user"] == "nobody")
        .unwrap_or_else(|| panic!("no service of nobody's: {services}"))["id"]
        .as_u64()
        .unwrap();
    replica_when(&d, theirs, "nobody's replica healthy", |r| {
        r["health"] == "healthy"
    });

    // The name's route stays alice's: never nobody's, never ambiguous.
    for _ in 0..20 {
        let (status, body) = get_with_secret(gport, "/chat/v1/completions");
        assert_eq!(status, 200, "nobody's service took alice's route: {body}");
        assert!(body.contains("\"alice\""), "{body}");
    }
    // Each user's own path reaches their own.
    let (status, body) = get_with_secret(gport, "/~alice/chat/v1/completions");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"alice\""), "{body}");
    let (status, body) = get_with_secret(gport, "/~nobody/chat/v1/completions");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"nobody\""), "{body}");
    let (status, body) = get_with_secret(gport, "/~mallory/chat/v1/completions");
    assert_eq!(status, 404, "{body}");
}
