//! A standby controller passes the API to the leader (`host/server/src/leadership/forward.rs`):
//! a client given only the standby's address submits, reads, follows a job as it runs and
//! gets the leader's own errors, each answer naming the leader in `X-Gantry-Leader`. The
//! agents' route and `/metrics` are not passed on (503 `not-leader` with the leader's URL),
//! nor is a request another standby already forwarded. `gantry nodes` says who leads,
//! asked at either controller.
//!
//! Two controllers on one etcd member, history in PostgreSQL and two agents, all on
//! 127.0.0.1 (`gantry_e2e::controllers`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::controllers::{cluster, http, job, starts, wait_job};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};

fn leader_header(answer: &ureq::http::Response<ureq::Body>) -> Option<String> {
    answer
        .headers()
        .get("x-gantry-leader")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn not_leader(answer: &mut ureq::http::Response<ureq::Body>, leader: &str) {
    assert_eq!(answer.status().as_u16(), 503);
    let body: Value = answer.body_mut().read_json().unwrap();
    assert_eq!(body["error"]["code"], json!("not-leader"), "{body}");
    assert_eq!(body["error"]["leader"], json!(leader), "{body}");
}

fn nodes_at(url: &str) -> String {
    let out = std::process::Command::new(gantry_e2e::gantry_bin())
        .args(["--server", url, "nodes"])
        .env_remove("GANTRY_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_standby_passes_requests_to_the_leader_and_says_who_leads() {
    let c = cluster(1);
    let out = c.out.path();
    let (leader, standby) = (c.a.url(), c.b.url());

    // A write through the standby: the leader takes it and runs the job once.
    let mut answer = http()
        .post(format!("{standby}/v1/jobs"))
        .send_json(job(out, "via-standby", false))
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    assert_eq!(leader_header(&answer).as_deref(), Some(leader));
    let id = answer.body_mut().read_json::<Value>().unwrap()["id"]
        .as_u64()
        .unwrap();
    wait_job(standby, id, "succeeded through the standby", |j| {
        j["state"] == json!("succeeded")
    });
    assert_eq!(starts(out, id).len(), 1);
    let mut listed = http()
        .get(format!("{standby}/v1/jobs?state=succeeded"))
        .call()
        .unwrap();
    assert_eq!(listed.status().as_u16(), 200);
    let listed: Value = listed.body_mut().read_json().unwrap();
    assert!(listed.to_string().contains("via-standby"), "{listed}");

    // The leader's own errors come back as they are.
    let mut bad = http()
        .post(format!("{standby}/v1/jobs"))
        .send_json(json!({"argv": 5}))
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let body: Value = bad.body_mut().read_json().unwrap();
    assert!(
        body["error"]["field"]
            .as_str()
            .is_some_and(|f| f.contains("argv")),
        "{body}"
    );

    // Following a job through the standby: frames arrive while it runs, then its end.
    let held = http()
        .post(format!("{standby}/v1/jobs"))
        .send_json(job(out, "followed", true))
        .unwrap()
        .body_mut()
        .read_json::<Value>()
        .unwrap()["id"]
        .as_u64()
        .unwrap();
    let mut attached = http()
        .get(format!("{standby}/v1/jobs/{held}/attach"))
        .config()
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .call()
        .unwrap();
    assert_eq!(attached.status().as_u16(), 200);
    let mut frames = BufReader::new(attached.body_mut().as_reader()).lines();
    let first: Value = serde_json::from_str(&frames.next().unwrap().unwrap()).unwrap();
    assert!(first.is_object(), "{first}");
    wait_job(leader, held, "running", |j| j["state"] == json!("running"));
    std::fs::write(out.join(format!("release-{held}")), "").unwrap();
    let last = frames
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .last()
        .unwrap();
    assert_eq!(last["state"], json!("succeeded"), "{last}");

    // Not passed on: the agents' route, metrics, and a request already forwarded.
    let mut heartbeat = http()
        .post(format!("{standby}/cluster/v1/heartbeat"))
        .send_json(json!({}))
        .unwrap();
    not_leader(&mut heartbeat, leader);
    not_leader(
        &mut http().get(format!("{standby}/metrics")).call().unwrap(),
        leader,
    );
    not_leader(
        &mut http()
            .get(format!("{standby}/v1/jobs"))
            .header("x-gantry-forwarded-by", "ctl-c")
            .call()
            .unwrap(),
        leader,
    );

    // `gantry nodes` at either address lists the agents' nodes and says who leads.
    let at_standby = nodes_at(standby);
    assert!(at_standby.contains("node-a"), "{at_standby}");
    assert!(
        at_standby.contains(&format!("controller: ctl-a at {leader} leads since"))
            && at_standby.contains("ctl-b answering here stands by"),
        "{at_standby}"
    );
    let at_leader = nodes_at(leader);
    assert!(
        at_leader.contains("controller: ctl-a leads since") && at_leader.contains("(term "),
        "{at_leader}"
    );
    assert_eq!(c.agents.len(), 2);
}
