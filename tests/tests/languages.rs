//! Plugins written in Python and JavaScript, built from source with the real
//! toolchains (`scripts/build-plugin-examples`), running in a live daemon:
//! the Python admission example hot-swapped in with jobs running, the JS
//! deadline-aware priority reordering a queue, the Rust placement example keeping GPU
//! 0 for interactive work, and guest exceptions reported with the guest's message
//! while the cycle falls back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, guest};
use serde_json::{Value, json};

fn upload(d: &Daemon, bytes: &[u8], name: &str) {
    let (status, body) = d.post_bytes("/v1/plugins", bytes);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], name, "{body}");
}

fn set_policy(d: &Daemon, spec: Value) -> Value {
    let (status, body) = d.put("/v1/policy", &spec);
    assert_eq!(status, 200, "{body}");
    body
}

fn job(d: &Daemon, user: &str, gpus: u32, extra: Value) -> Value {
    let mut spec = d.blocking_job(&format!("{user}-job"), 1, gpus);
    spec["user"] = json!(user);
    if let Value::Object(m) = extra {
        for (k, v) in m {
            spec[k] = v;
        }
    }
    spec
}

#[test]
fn python_admission_limits_interns_and_rejects_long_interactive_jobs() {
    let d = Daemon::start(4);
    // Jobs are running when the policy is swapped in.
    let alice = d.submit(&job(&d, "alice", 1, json!({})));
    d.wait_state(alice, "running");
    upload(&d, &guest("python-interns"), "python-interns");
    set_policy(
        &d,
        json!({
            "admission": [{"plugin": "python-interns", "config": {"interns": ["bob"]}, "deadline_ms": 2000}],
            "priority": [{"plugin": "fifo"}],
            "placement": {"plugin": "first-fit", "config": {"strict": false}},
        }),
    );
    let dev = json!({"queue": "dev"});
    let b1 = d.submit(&job(&d, "bob", 1, dev.clone()));
    let b2 = d.submit(&job(&d, "bob", 1, dev.clone()));
    d.wait_state(b1, "running");
    d.wait_state(b2, "running");
    let b3 = d.submit(&job(&d, "bob", 1, dev.clone()));
    let reason = d.wait_for("the intern's third GPU job to be held", WAIT, || {
        let j = d.job(b3);
        (j["reason"]["code"] == "held-by-policy").then(|| j["reason"].clone())
    });
    assert_eq!(reason["stage"], "admission", "{reason}");
    assert_eq!(reason["plugin"], "python-interns", "{reason}");
    assert!(
        reason["message"].as_str().unwrap().contains("bob"),
        "{reason}"
    );
    assert_eq!(d.job(b3)["state"], "pending");
    // A non-intern is not limited.
    let a2 = d.submit(&job(&d, "alice", 1, json!({})));
    d.wait_state(a2, "running");

    // A 6 h interactive job is rejected at submit, with the plugin's message.
    let long = job(
        &d,
        "alice",
        1,
        json!({"kind": "interactive", "time_limit_s": 6 * 3600}),
    );
    let (status, body) = d.post("/v1/jobs", &long);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "rejected-by-policy", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("python-interns") && msg.contains("interactive"),
        "{body}"
    );
    // An intern outside queue dev is rejected too.
    let (status, body) = d.post("/v1/jobs", &job(&d, "bob", 1, json!({"queue": "default"})));
    assert_eq!(status, 422, "{body}");

    // When one of bob's jobs ends, the held one is admitted and runs.
    d.release(b1);
    d.wait_state(b3, "running");
    for id in [alice, b2, b3, a2] {
        d.release(id);
    }
}

#[test]
fn js_deadline_priority_reorders_the_queue() {
    let d = Daemon::start(4);
    upload(&d, &guest("js-deadline"), "js-deadline");
    set_policy(
        &d,
        json!({"priority": [{"plugin": "js-deadline"}], "placement": {"plugin": "first-fit"}}),
    );
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let with_deadline = |name: &str, deadline: Option<u64>| {
        let mut spec = d.blocking_job(name, 1, 4);
        if let Some(t) = deadline {
            spec["labels"] = json!({"deadline": t.to_string()});
        }
        spec
    };
    let late = d.submit(&with_deadline("past-deadline", Some(now_ms - 3_600_000)));
    let plain = d.submit(&with_deadline("no-deadline", None));
    let urgent = d.submit(&with_deadline("due-in-30-min", Some(now_ms + 1_800_000)));
    // The past-deadline job says why it sank.
    let note = d.wait_for("the past-deadline job's note", WAIT, || {
        d.job(late)["reason"]["priority_note"]
            .as_str()
            .map(str::to_string)
    });
    assert!(note.contains("deadline"), "{note}");
    // Start order: the urgent job first, then the one without a deadline, then the late one.
    let mut order = Vec::new();
    d.release(blocker);
    for _ in 0..3 {
        let next = d.wait_for("the next job to start", WAIT, || {
            [urgent, plain, late]
                .into_iter()
                .find(|id| !order.contains(id) && d.job(*id)["state"] == "running")
        });
        order.push(next);
        d.release(next);
    }
    assert_eq!(order, vec![urgent, plain, late]);
}

#[test]
fn rust_placement_example_keeps_gpu0_for_interactive_jobs() {
    let d = Daemon::start(4);
    upload(&d, gantry_components::EXAMPLE_GPU0_RESERVE, "gpu0-reserve");
    set_policy(
        &d,
        json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "gpu0-reserve", "config": {"strict": false}}}),
    );
    // Fill the node: a notebook on GPU 0, a batch job on GPUs 1-3.
    let mut first_notebook = d.blocking_job("notebook-0", 1, 1);
    first_notebook["kind"] = json!("interactive");
    let n0 = d.submit(&first_notebook);
    d.wait_state(n0, "running");
    let blocker = d.submit(&d.blocking_job("holds-1-2-3", 1, 3));
    d.wait_state(blocker, "running");
    assert_eq!(d.task_env(n0, 0)["CUDA_VISIBLE_DEVICES"], "0");
    // A batch job (first in line) and a notebook wait; GPU 0 frees up.
    let b = d.submit(&d.blocking_job("batch-1-gpu", 1, 1));
    let mut notebook = d.blocking_job("notebook", 1, 1);
    notebook["kind"] = json!("interactive");
    let i = d.submit(&notebook);
    d.release(n0);
    d.wait_state(i, "running");
    assert_eq!(
        d.task_env(i, 0)["CUDA_VISIBLE_DEVICES"],
        "0",
        "the notebook gets the reserved GPU"
    );
    let held = d.job(b);
    assert_eq!(
        held["state"], "pending",
        "the batch job must not take GPU 0: {held}"
    );
    for id in [blocker, b, i] {
        d.release(id);
    }
}

/// A guest that throws: the fault carries the guest's own message and the cycle falls
/// back, so jobs still run.
fn guest_exception_falls_back(name: &str, config: Value, expected: &str) {
    let d = Daemon::start(4);
    upload(&d, &guest(name), name);
    set_policy(
        &d,
        json!({"priority": [{"plugin": name, "config": config}], "placement": {"plugin": "first-fit"}}),
    );
    let j = d.submit(&d.blocking_job("survivor", 1, 1));
    d.wait_state(j, "running");
    let fault = d.wait_for("the guest's fault", WAIT, || {
        let (_, faults) = d.get("/v1/faults");
        faults
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["plugin"]["name"] == name)
            .cloned()
    });
    let message = fault["fault"]["message"].as_str().unwrap();
    assert!(
        message.contains(expected),
        "fault should carry the guest's message `{expected}`: {fault}"
    );
    assert_eq!(fault["fell_back"], true, "{fault}");
    d.release(j);
}

#[test]
fn python_exception_is_reported_with_its_message() {
    guest_exception_falls_back("python-raise", json!({}), "python-raise: refusing to score");
    guest_exception_falls_back(
        "python-raise",
        json!({"mode": "err"}),
        "python-raise: returning an error",
    );
}

#[test]
fn javascript_throw_is_reported_with_its_message() {
    guest_exception_falls_back("js-throw", json!({}), "js-throw: refusing to score");
    guest_exception_falls_back(
        "js-throw",
        json!({"mode": "string"}),
        "js-throw: refusing to score",
    );
}

/// Runs `first` and `second` (both 4-GPU jobs, submitted in that order) behind a
/// blocker and returns the order in which they started.
fn start_order(d: &Daemon, first: Value, second: Value) -> Vec<u64> {
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let a = d.submit(&first);
    let b = d.submit(&second);
    d.release(blocker);
    let mut order = Vec::new();
    for _ in 0..2 {
        let next = d.wait_for("the next job to start", WAIT, || {
            [a, b]
                .into_iter()
                .find(|id| !order.contains(id) && d.job(*id)["state"] == "running")
        });
        order.push(next);
        d.release(next);
    }
    order
        .iter()
        .map(|id| if *id == a { 1 } else { 2 })
        .collect()
}

#[test]
fn templates_run_in_a_live_daemon() {
    // Python template: smallest GPU request first.
    let d = Daemon::start(4);
    upload(&d, &guest("python-template"), "python-template");
    set_policy(
        &d,
        json!({"priority": [{"plugin": "python-template"}], "placement": {"plugin": "first-fit"}}),
    );
    let big = d.blocking_job("four-gpus", 1, 4);
    let small = d.blocking_job("one-gpu", 1, 1);
    assert_eq!(
        start_order(&d, big, small),
        vec![2, 1],
        "the smaller request runs first"
    );
    let (_, faults) = d.get("/v1/faults");
    assert_eq!(faults, json!([]), "no faults expected");

    // JavaScript template: jobs labelled priority=high first.
    let d = Daemon::start(4);
    upload(&d, &guest("js-template"), "js-template");
    set_policy(
        &d,
        json!({"priority": [{"plugin": "js-template"}], "placement": {"plugin": "first-fit"}}),
    );
    let normal = d.blocking_job("normal", 1, 4);
    let mut high = d.blocking_job("urgent", 1, 4);
    high["labels"] = json!({"priority": "high"});
    assert_eq!(
        start_order(&d, normal, high),
        vec![2, 1],
        "the high-priority job runs first"
    );
    let (_, faults) = d.get("/v1/faults");
    assert_eq!(faults, json!([]), "no faults expected");
}
