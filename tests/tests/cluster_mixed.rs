//! Multi-node beyond batch gangs on agents: `gantry run` streaming from a task on an agent,
//! a gang spanning the controller's own node and an agent (a Python rendezvous between
//! them), and a service on an agent, health-checked over HTTP by that agent, whose
//! node is drained (draining while it runs, a new job waits naming the drain, drained once
//! it is cancelled, up again on resume).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::{Agent, RENDEZVOUS, node};
use gantry_e2e::{Daemon, WAIT, gantry_bin, tasks};
use serde_json::{Value, json};
use std::process::Command;

const TOKEN: &str = "e2e-cluster-token-mixed-0123456789";

fn controller(local_node: bool, gpus: u32) -> Daemon {
    Daemon::start_with_config(
        gpus,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = {local_node}\nheartbeat_interval_ms = 200\nnode_down_after_ms = 1500\n"
        ),
    )
}

fn gantry(d: &Daemon) -> Command {
    let mut cmd = Command::new(gantry_bin());
    cmd.arg("--server").arg(d.url()).env_remove("GANTRY_TOKEN");
    cmd
}

/// Waits until job `id` is in a state `ok` accepts; panics if it ends otherwise.
fn wait_job(d: &Daemon, id: u64, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    d.wait_for(what, WAIT, || {
        let job = d.job(id);
        if ok(&job) {
            return Some(job);
        }
        let state = job["state"].as_str().unwrap_or_default();
        assert!(
            matches!(state, "pending" | "running"),
            "{what}: job ended: {job}\n{}",
            d.log_tail()
        );
        None
    })
}

#[test]
fn gantry_run_streams_from_a_task_on_an_agent() {
    let d = controller(false, 0);
    let a = Agent::start(&d, d.url(), "node-a", 2, TOKEN);
    let out = gantry(&d)
        .args(["run", "--gpus", "1", "--", "sh", "-c"])
        .arg("echo hello from $GANTRY_NODE; echo to-stderr >&2; exit 3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("hello from node-a"), "stdout: {stdout}");
    assert!(stdout.contains("to-stderr"), "stdout: {stdout}");
    let (_, jobs) = d.get("/v1/jobs");
    let job = &jobs.as_array().unwrap()[0];
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");
    let (status, log) = d.get_text(&format!("/v1/jobs/{}/logs", job["id"]));
    assert_eq!(status, 200);
    assert!(log.contains("hello from node-a"), "{log}");
    let out = gantry(&d).args(["nodes", "-l"]).output().unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("node-a (up"), "{listing}");
    assert!(
        listing.contains(&format!("agent {} (address 127.0.0.1)", a.url())),
        "{listing}"
    );
}

#[test]
fn a_gang_spans_the_controller_node_and_an_agent() {
    let d = controller(true, 4);
    let _a = Agent::start(&d, d.url(), "node-a", 4, TOKEN);
    let (_, nodes) = d.get("/v1/nodes");
    let local = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["agent"] == "local")
        .expect("the controller's own node is listed")["name"]
        .as_str()
        .unwrap()
        .to_string();
    let id = d.submit(&json!({
        "name": "mixed-gang",
        "argv": ["python3", "-c", RENDEZVOUS],
        "tasks": tasks(2, 4),
    }));
    let job = d.wait_state(id, "succeeded");
    let mut placed: Vec<String> = job["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["node"].as_str().unwrap().to_string())
        .collect();
    placed.sort();
    let mut expected = vec![local, "node-a".to_string()];
    expected.sort();
    assert_eq!(placed, expected, "one task on each node: {job}");
    let log = |task: u32| d.get_text(&format!("/v1/jobs/{id}/logs?task={task}")).1;
    let (rank0, rank1) = (log(0), log(1));
    assert!(rank0.contains("heard: rank 1 of 2 on"), "{rank0}");
    assert!(rank1.contains("heard: welcome from"), "{rank1}");
}

const HTTP_SERVICE: &str = r#"
import http.server, os
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
"#;

#[test]
fn a_service_on_a_drained_agent_is_checked_there_and_the_drain_holds_new_jobs() {
    let d = controller(false, 0);
    let _a = Agent::start(&d, d.url(), "node-a", 1, TOKEN);
    let id = d.submit(&json!({
        "name": "web",
        "kind": "service",
        "argv": ["python3", "-c", HTTP_SERVICE],
        "tasks": tasks(1, 1),
        "service": {"health": {"http_path": "/", "interval_s": 1, "failures": 3, "initial_delay_s": 1}},
    }));
    let job = wait_job(&d, id, "a healthy service on node-a", |j| {
        j["health"]["state"] == "healthy"
    });
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");

    let (status, view) = d.post(
        "/v1/nodes/node-a/drain",
        &json!({"reason": "swapping a PSU"}),
    );
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "draining", "{view}");
    let waiting = d.submit(&json!({
        "name": "blocked", "argv": ["true"], "tasks": tasks(1, 1),
    }));
    let job = wait_job(&d, waiting, "a reason naming the drain", |j| {
        j["reason"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("node-a is drained") && m.contains("swapping a PSU"))
    });
    assert_eq!(job["state"], "pending", "{job}");

    let (status, _) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200);
    d.wait_state(id, "cancelled");
    d.wait_for("node-a drained", WAIT, || {
        node(&d, "node-a").filter(|n| n["state"] == "drained")
    });
    let (status, view) = d.post("/v1/nodes/node-a/resume", &json!({}));
    assert_eq!(status, 200, "{view}");
    d.wait_state(waiting, "succeeded");
}

#[test]
fn controller_and_agent_speak_https_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let made = rcgen::generate_simple_self_signed(names).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    // A key others may read is refused, as ssh refuses one.
    let private = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600);
    std::fs::set_permissions(&key, private).unwrap();
    // One self-signed certificate for 127.0.0.1: the controller serves it and trusts it for
    // its agents (`cluster.ca_cert`); the agent serves it and trusts it for the controller.
    let d = Daemon::start_tls(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\nnode_down_after_ms = 1500\nca_cert = {:?}\n",
            cert.display().to_string()
        ),
        &cert,
        &key,
    );
    assert!(d.url().starts_with("https://"), "{}", d.url());
    let a = Agent::start_tls(&d, d.url(), "node-a", 2, TOKEN, &cert, &key);
    assert!(a.url().starts_with("https://"), "{}", a.url());
    let listed = node(&d, "node-a").expect("node-a listed");
    assert_eq!(listed["agent"], a.url(), "{listed}");
    let id = d.submit(&json!({
        "name": "over-tls",
        "argv": ["sh", "-c", "echo ran on $GANTRY_NODE"],
        "tasks": tasks(1, 1),
    }));
    d.wait_state(id, "succeeded");
    let (_, log) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert!(log.contains("ran on node-a"), "{log}");
}

#[test]
fn a_check_command_of_a_service_on_an_agent_runs_there() {
    let d = controller(false, 0);
    let _a = Agent::start(&d, d.url(), "node-a", 1, TOKEN);
    let out = d.out_dir();
    let id = d.submit(&json!({
        "name": "flag",
        "kind": "service",
        "argv": ["sh", "-c", "touch alive; exec sleep 600"],
        "workdir": out,
        "tasks": tasks(1, 1),
        "service": {"health": {"command": ["sh", "-c", "test -f alive && echo $GANTRY_JOB_ID > checked-on-$GANTRY_JOB_ID"], "interval_s": 1, "failures": 3}},
    }));
    let job = wait_job(&d, id, "a healthy service on node-a", |j| {
        j["health"]["state"] == "healthy"
    });
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");
    assert!(
        out.join(format!("checked-on-{id}")).exists(),
        "the check ran"
    );
    std::fs::remove_file(out.join("alive")).unwrap();
    let job = wait_job(&d, id, "a restart by the check", |j| j["restarts"] == 1);
    assert!(
        job["health"]["last_error"].as_str().is_some_and(
            |e| e.contains("on the service's node") && e.contains("exited with code 1")
        ),
        "{job}"
    );
    wait_job(&d, id, "healthy again", |j| {
        j["health"]["state"] == "healthy"
    });
    let (status, _) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200);
    d.wait_state(id, "cancelled");
}

#[test]
fn a_down_node_is_removed_and_its_name_can_join_again() {
    let d = controller(false, 0);
    let mut a = Agent::start(&d, d.url(), "node-a", 1, TOKEN);
    let (status, body) = d.delete("/v1/nodes/node-a");
    assert_eq!(status, 409, "an up node is not removed: {body}");
    assert_eq!(body["error"]["field"], "name", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("is up"), "{body}");

    a.sigkill();
    d.wait_for("node-a down", WAIT, || {
        node(&d, "node-a").filter(|n| n["state"] == "down")
    });
    let out = gantry(&d).args(["remove-node", "node-a"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(node(&d, "node-a").is_none(), "a removed node is not listed");
    let (status, _) = d.delete("/v1/nodes/node-a");
    assert_eq!(status, 404);

    // The same name reporting again joins as a new node, and runs jobs.
    a.restart(&d);
    let id = d.submit(&json!({"name": "after", "argv": ["true"], "tasks": tasks(1, 1)}));
    let job = d.wait_state(id, "succeeded");
    assert_eq!(job["tasks"][0]["node"], "node-a", "{job}");
}
