//! `--nodes N` as SLURM means it (issue 27, item 10), with a controller and two real agents
//! on 127.0.0.1: the tasks of `sbatch --nodes=2 --ntasks=4` run two on each node, `--mem` is
//! per node, `--nodes=1` keeps a gang on one node, a job that cannot get its nodes waits with
//! a reason, and a placement plugin that does not spread cannot pack such a job onto fewer
//! nodes (it waits, naming the plugin).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::Agent;
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;

const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";

fn controller() -> Daemon {
    Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    )
}

/// Tasks per node of a running job.
fn per_node(job: &Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for t in job["tasks"].as_array().unwrap() {
        *out.entry(t["node"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    out
}

fn submit_script(d: &Daemon, script: &str) -> u64 {
    let path = d.out_dir().join("job.sh");
    std::fs::write(&path, script).unwrap();
    let out = Command::new(gantry_bin())
        .args(["--server", d.url(), "submit"])
        .arg(&path)
        .env_remove("GANTRY_TOKEN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {stdout:?}"))
}

fn wait_reason(d: &Daemon, id: u64, want: &str) -> Value {
    d.wait_for(&format!("job {id} to wait because {want}"), WAIT, || {
        let job = d.job(id);
        let message = job["reason"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (job["state"] == "pending" && message.contains(want)).then_some(job)
    })
}

#[test]
fn tasks_spread_over_exactly_the_nodes_asked_for() {
    let d = controller();
    let url = d.url().to_string();
    let _a = Agent::start(&d, &url, "node-a", 4, TOKEN);
    let _b = Agent::start(&d, &url, "node-b", 4, TOKEN);

    // First fit alone would pack these four one-GPU tasks on node-a.
    let id = submit_script(
        &d,
        "#!/bin/sh\n#SBATCH --nodes=2 --ntasks=4 --gres=gpu:2 --mem=2G\nsleep 30\n",
    );
    let job = d.wait_state(id, "running");
    assert_eq!(job["spec"]["nodes"], 2, "{job}");
    assert_eq!(
        per_node(&job),
        BTreeMap::from([("node-a".into(), 2), ("node-b".into(), 2)]),
        "{job}"
    );
    for t in job["tasks"].as_array().unwrap() {
        assert_eq!(t["memory_mib"], 1024, "--mem is per node: {job}");
        assert_eq!(t["gpus"].as_array().unwrap().len(), 1, "{job}");
    }

    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");
    d.wait_state(id, "cancelled");

    // Two GPUs left on each node: four are free, but a gang of three kept on one node
    // waits, and says why; one that no node could ever hold is refused at submit.
    let blocker = d.submit(&json!({
        "name": "blocker", "argv": ["sleep", "30"], "nodes": 2,
        "tasks": [{"count": 2, "gpus": 2, "cpu_milli": 100, "memory_mib": 64}],
    }));
    let running = d.wait_state(blocker, "running");
    assert_eq!(
        per_node(&running),
        BTreeMap::from([("node-a".into(), 1), ("node-b".into(), 1)]),
        "{running}"
    );
    let one_node = d.submit(&json!({
        "name": "one-node", "argv": ["true"], "nodes": 1,
        "tasks": [{"count": 3, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
    }));
    wait_reason(&d, one_node, "--nodes 1");
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"argv": ["true"], "nodes": 1,
                "tasks": [{"count": 3, "gpus": 2, "cpu_milli": 100, "memory_mib": 64}]}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("unsatisfiable")),
        "{body}"
    );
    for job in [one_node, blocker] {
        let (status, body) = d.post(&format!("/v1/jobs/{job}/cancel"), &json!({}));
        assert_eq!(status, 200, "{body}");
        d.wait_state(job, "cancelled");
    }

    // A placement plugin that does not read `nodes` cannot pack the job: it waits, naming
    // the plugin.
    let (status, body) = d.put(
        "/v1/policy",
        &json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "best-fit"}}),
    );
    assert_eq!(status, 200, "{body}");
    let spread = d.submit(&json!({
        "name": "spread", "argv": ["true"], "nodes": 2,
        "tasks": [{"count": 2, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
    }));
    let waiting = wait_reason(
        &d,
        spread,
        "placement plugin best-fit put its tasks on 1 node(s)",
    );
    assert_eq!(waiting["state"], "pending");
    let (status, body) = d.post(&format!("/v1/jobs/{spread}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");

    // Asking for more nodes than tasks, or setting Gantry's label by hand, is refused.
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"argv": ["true"], "nodes": 3, "tasks": [{"count": 2}]}),
    );
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("nodes")),
        "{body}"
    );
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"argv": ["true"], "labels": {"gantry.io/nodes": "2"}}),
    );
    assert_eq!(
        (status, body["error"]["field"].as_str()),
        (400, Some("labels.gantry.io/nodes")),
        "{body}"
    );
}
