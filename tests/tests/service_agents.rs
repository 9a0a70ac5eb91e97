//! A replicated service across nodes (issue 30): with a controller and two real agents on
//! 127.0.0.1, each replica lands on its own agent's node (one GPU each), the agents run the
//! health checks, and the endpoint on the controller reaches both at their node's address;
//! a rolling update replaces both without a failed request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::Agent;
use gantry_e2e::services::{ClientLoop, fake_service};
use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";

fn healthy_on_nodes(d: &Daemon, id: u64, revision: u64) -> Value {
    d.wait_for("two healthy replicas, one per node", WAIT * 3, || {
        let (_, v) = d.get(&format!("/v1/services/{id}"));
        let r = v["replica_jobs"].as_array()?.clone();
        let nodes: BTreeSet<String> = r
            .iter()
            .filter(|r| r["health"] == "healthy" && r["revision"] == revision)
            .filter_map(|r| r["node"].as_str().map(String::from))
            .collect();
        (r.len() == 2 && nodes.len() == 2).then_some(v)
    })
}

#[test]
fn replicas_on_agents_nodes_are_reached_through_the_controllers_endpoint() {
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let url = d.url().to_string();
    let _a = Agent::start(&d, &url, "node-a", 1, TOKEN);
    let _b = Agent::start(&d, &url, "node-b", 1, TOKEN);
    let spec = fake_service(
        "spread",
        json!({"VERSION": "a1"}),
        json!({"replicas": 2, "rollout": {"max_surge": 0, "max_unavailable": 1, "progress_deadline_s": 60}}),
    );
    let (status, created) = d.post("/v1/services", &spec);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let v = healthy_on_nodes(&d, id, 1);
    let port = v["endpoint_port"].as_u64().unwrap();

    // Both replicas answer through the one endpoint.
    let pids: BTreeSet<String> = (0..20)
        .map(|_| {
            ureq::get(&format!("http://127.0.0.1:{port}/pid"))
                .call()
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap()
        })
        .collect();
    assert_eq!(pids.len(), 2, "answered by {pids:?}");

    // No room for a surge (one GPU per node): one replica at a time goes, then comes back
    // as the new revision; the other keeps serving.
    let clients = ClientLoop::start(
        &format!("http://127.0.0.1:{port}/v1/completions"),
        1,
        Duration::from_secs(120),
    );
    let (status, body) = d.post(
        &format!("/v1/services/{id}/update"),
        &json!({"env": {"VERSION": "a2"}}),
    );
    assert_eq!(status, 200, "{body}");
    healthy_on_nodes(&d, id, 2);
    let tally = clients.stop();
    assert!(
        tally.failed.is_empty(),
        "failed requests: {:?}",
        tally.failed
    );
    assert!(tally.ok.contains_key("a2"), "{tally:?}");
}
