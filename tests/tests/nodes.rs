//! Nodes end to end: drain and resume through the CLI (a running job keeps running, the
//! node is `draining` and then `drained`, a new job waits with a reason naming the
//! drain and starts on resume), the drain surviving a SIGKILL of the daemon, the roles
//! and request checks of the two routes, and a GPU marked unhealthy in the config
//! getting no task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, create_token, gantry_bin, gpu_set};
use serde_json::{Value, json};
use std::process::Command;

const NODE: &str = "gpu-node-1";

fn node_config(extra: &str) -> String {
    format!("[node]\nname = \"{NODE}\"\n{extra}")
}

/// Runs the CLI against `d`; asserts success and returns stdout.
fn cli(d: &Daemon, args: &[&str]) -> String {
    let out = Command::new(gantry_bin())
        .env_remove("GANTRY_TOKEN")
        .env("HOME", d.out_dir())
        .args(["--server", d.url()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "gantry {args:?}: {out:?}");
    stdout
}

fn node(d: &Daemon) -> Value {
    let (status, nodes) = d.get("/v1/nodes");
    assert_eq!(status, 200, "{nodes}");
    nodes[0].clone()
}

/// Waits until job `id` has a pending reason from a cycle after `after`; returns it.
fn reason_after(d: &Daemon, id: u64, after: u64) -> Value {
    d.wait_for(&format!("a fresh pending reason of job {id}"), WAIT, || {
        let job = d.job(id);
        assert_eq!(job["state"], "pending", "{job}");
        let cycle = job["reason"]["cycle"].as_u64().unwrap_or(0);
        (cycle > after).then(|| job["reason"].clone())
    })
}

#[test]
fn drain_lets_running_jobs_finish_holds_new_ones_and_survives_a_restart() {
    let mut d = Daemon::start_with_config(2, &node_config(""));
    let running = d.submit(&d.blocking_job("running", 1, 1));
    d.task_env(running, 0);

    let out = cli(&d, &["drain", NODE, "--reason", "replacing a fan"]);
    assert!(
        out.contains("draining") && out.contains("replacing a fan"),
        "{out}"
    );
    let n = node(&d);
    assert_eq!(n["state"], "draining", "{n}");
    assert_eq!(n["drain"]["reason"], "replacing a fan");
    assert_eq!(n["drain"]["by"], "unauthenticated");
    assert!(n["drain"]["since_ms"].as_u64().unwrap() > 0, "{n}");

    // A GPU is free, but the node takes nothing new.
    let waiting = d.submit(&d.blocking_job("waiting", 1, 1));
    let reason = reason_after(&d, waiting, 0);
    let message = reason["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("node {NODE} is drained")) && message.contains("replacing a fan"),
        "{reason}"
    );
    assert_eq!(d.job(running)["state"], "running");

    d.release(running);
    d.wait_state(running, "succeeded");
    d.wait_for("the node to be drained", WAIT, || {
        (node(&d)["state"] == "drained").then_some(())
    });
    let seen = reason["cycle"].as_u64().unwrap();
    reason_after(&d, waiting, seen + 2);
    let listing = cli(&d, &["nodes", "-l"]);
    assert!(
        listing.contains("drained") && listing.contains("drained by unauthenticated"),
        "{listing}"
    );

    d.restart_after_sigkill();
    let n = node(&d);
    assert_eq!(
        (&n["state"], &n["drain"]["reason"]),
        (&json!("drained"), &json!("replacing a fan")),
        "{n}"
    );
    // The new daemon's own cycles hold the job for the drain.
    d.wait_for("a decision of the restarted daemon", WAIT, || {
        let (_, log) = d.get(&format!("/v1/jobs/{waiting}/decisions"));
        let last = log.as_array()?.last()?.clone();
        assert_eq!(last["decision"], "pending", "{log}");
        assert!(last["message"].as_str()?.contains("is drained"), "{log}");
        Some(())
    });

    let out = cli(&d, &["resume", NODE]);
    assert!(out.contains("(up,"), "{out}");
    d.task_env(waiting, 0);
    d.wait_state(waiting, "running");
    let n = node(&d);
    assert_eq!(
        (&n["state"], &n["drain"]),
        (&json!("up"), &Value::Null),
        "{n}"
    );
    d.release(waiting);
    d.wait_state(waiting, "succeeded");
}

#[test]
fn only_operators_drain_and_bad_requests_name_the_field() {
    let make = |user: &str, role: &str| {
        create_token(&[
            "--user",
            user,
            "--accounts",
            "lab",
            "--role",
            role,
            "--name",
            user,
        ])
    };
    let (alice, olga, ada) = (
        make("alice", "user"),
        make("olga", "operator"),
        make("ada", "admin"),
    );
    let config = node_config(&format!(
        "\n{}\n{}\n{}",
        alice.snippet(),
        olga.snippet(),
        ada.snippet()
    ));
    let d = Daemon::start_with_config(1, &config);
    let drain = format!("/v1/nodes/{NODE}/drain");
    let resume = format!("/v1/nodes/{NODE}/resume");
    let body = json!({"reason": "firmware update"});

    for path in [&drain, &resume] {
        let (status, v) = d.post_as(&alice.token, path, &body);
        assert_eq!(
            (status, &v["error"]["code"]),
            (403, &json!("forbidden")),
            "{v}"
        );
        assert!(
            v["error"]["message"].as_str().unwrap().contains("operator"),
            "{v}"
        );
    }
    assert_eq!(d.get_as(&alice.token, "/v1/nodes").1[0]["state"], "up");

    let (status, v) = d.post_as(&olga.token, &drain, &body);
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["state"], &v["drain"]["by"]),
        (&json!("drained"), &json!("olga"))
    );

    let bad: [(Value, &str); 4] = [
        (json!({}), "reason"),
        (json!({"reason": "   "}), "reason"),
        (json!({"reason": "x".repeat(257)}), "reason"),
        (json!({"reason": "ok", "until": 5}), "until"),
    ];
    for (body, field) in bad {
        let (status, v) = d.post_as(&olga.token, &drain, &body);
        assert_eq!(
            (status, &v["error"]["field"]),
            (400, &json!(field)),
            "{body}: {v}"
        );
    }
    let (status, v) = d.post_as(
        &olga.token,
        "/v1/nodes/no-such-node/drain",
        &json!({"reason": "x"}),
    );
    assert_eq!(status, 404, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no-such-node") && message.contains(NODE),
        "{v}"
    );

    let (status, v) = d.post_as(&ada.token, &resume, &json!({}));
    assert_eq!((status, &v["state"]), (200, &json!("up")), "{v}");
    let job = d.submit_as(&alice.token, &d.shell_job("after-resume", 1, 1, "exit 0"));
    d.wait_for("the job after resume to succeed", WAIT, || {
        let (_, j) = d.get_as(&alice.token, &format!("/v1/jobs/{job}"));
        (j["state"] == "succeeded").then_some(())
    });
}

#[test]
fn a_gpu_marked_unhealthy_in_the_config_gets_no_task() {
    let d = Daemon::start_with_config(2, &node_config("unhealthy_gpus = [0]\n"));
    let n = node(&d);
    let gpu0 = &n["gpus"][0];
    assert_eq!(gpu0["healthy"], false, "{n}");
    assert_eq!(gpu0["health"]["reason"], "marked unhealthy in config");
    assert_eq!(n["gpus"][1]["healthy"], true, "{n}");
    assert_eq!(n["gpu_source"], "config");

    let first = d.submit(&d.blocking_job("first", 1, 1));
    let second = d.submit(&d.blocking_job("second", 1, 1));
    let env = d.task_env(first, 0);
    assert_eq!(gpu_set(&env["CUDA_VISIBLE_DEVICES"]), [1], "{env:?}");
    let reason = reason_after(&d, second, 0);
    assert_eq!(reason["code"], "insufficient-gpus", "{reason}");

    d.release(first);
    let env = d.task_env(second, 0);
    assert_eq!(gpu_set(&env["CUDA_VISIBLE_DEVICES"]), [1], "{env:?}");
    d.release(second);
    d.wait_state(second, "succeeded");
    let listing = cli(&d, &["nodes", "-l"]);
    assert!(
        listing.contains("UNHEALTHY") && listing.contains("marked unhealthy in config"),
        "{listing}"
    );
}
