//! Decisions you can see: `/metrics` parsed by Prometheus' own parser, the per-job
//! decision log, a shadow pipeline that reports where it would differ (and cannot
//! disturb the live schedule even when it traps), and what-if replay of recorded
//! snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, workspace};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

/// A 4-GPU job with a time limit, blocked until released.
fn limited(d: &Daemon, name: &str, limit_s: u64) -> Value {
    let mut j = d.blocking_job(name, 1, 4);
    j["time_limit_s"] = json!(limit_s);
    j
}

/// Parses `text` with prometheus_client's parser; returns "name{labels} value" lines.
fn prometheus_parse(text: &str) -> Vec<String> {
    let python = workspace().join("target/toolchains/py/bin/python");
    let script = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
                  for f in text_string_to_metric_families(sys.stdin.read()):\n    for s in f.samples:\n        \
                  print(s.name + str(sorted(s.labels.items())), s.value)\n";
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run scripts/plugin-toolchains (scripts/test does it)",
                python.display()
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Prometheus' parser rejected /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn value(samples: &[String], prefix: &str) -> f64 {
    samples
        .iter()
        .find(|s| s.starts_with(prefix))
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample starting with {prefix}:\n{}", samples.join("\n")))
}

#[test]
fn metrics_parse_and_decisions_are_listed() {
    let d = Daemon::start(4);
    let running = d.submit(&d.blocking_job("runs", 1, 2));
    d.wait_state(running, "running");
    let waiting = d.submit(&d.blocking_job("waits", 1, 4));
    d.wait_for("the 4-GPU job to wait for GPUs", WAIT, || {
        (d.job(waiting)["reason"]["code"] == "insufficient-gpus").then_some(())
    });
    // A cycle's duration is observed when it has applied its outcome, after the waiting
    // job's reason is already visible: scrape until the second cycle has been timed.
    let samples = d.wait_for("two cycles to have been timed", WAIT, || {
        let (status, text) = d.get_text("/metrics");
        assert_eq!(status, 200);
        let samples = prometheus_parse(&text);
        (value(&samples, "gantry_cycle_duration_seconds_count[]") >= 2.0).then_some(samples)
    });
    assert_eq!(
        value(
            &samples,
            "gantry_jobs[('queue', 'default'), ('state', 'pending')]"
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "gantry_jobs[('queue', 'default'), ('state', 'running')]"
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "gantry_gpus_allocated[('model', 'fake')"),
        2.0
    );
    assert_eq!(value(&samples, "gantry_gpus[('model', 'fake')"), 4.0);
    assert_eq!(value(&samples, "gantry_submits_total[]"), 2.0);
    assert!(value(&samples, "gantry_cycles_total[]") >= 2.0);
    assert!(value(&samples, "gantry_cycle_duration_seconds_count[]") >= 2.0);
    let fifo_calls = value(
        &samples,
        "gantry_plugin_call_duration_seconds_count[('plugin', 'fifo'), ('stage', 'priority')]",
    );
    assert!(fifo_calls >= 2.0, "{fifo_calls}");

    // The waiting job's decisions: pending for lack of GPUs, then started.
    d.release(running);
    d.wait_state(waiting, "running");
    let (status, log) = d.get(&format!("/v1/jobs/{waiting}/decisions"));
    assert_eq!(status, 200, "{log}");
    let log = log.as_array().unwrap();
    let pending = log
        .iter()
        .find(|e| e["decision"] == "pending")
        .expect("a pending decision");
    assert_eq!(pending["reason_code"], "insufficient-gpus", "{pending}");
    assert!(pending["cycle"].as_u64().unwrap() > 0);
    let start = log.last().unwrap();
    assert_eq!(start["decision"], "start", "{log:?}");
    assert!(start["cycle"].as_u64() > pending["cycle"].as_u64());
    d.release(waiting);
}

#[test]
fn shadow_pipeline_reports_differences_and_cannot_disturb_the_live_one() {
    let d = Daemon::start(4);
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::SHORTEST_FIRST);
    assert_eq!(status, 201);
    let (status, view) = d.put(
        "/v1/policy/shadow",
        &json!({"priority": [{"plugin": "shortest-first"}], "placement": {"plugin": "first-fit"}}),
    );
    assert_eq!(status, 200, "{view}");
    // Live fifo starts `long` first; the shadow (shortest first) would start `short`.
    let long = d.submit(&limited(&d, "long", 3000));
    let short = d.submit(&limited(&d, "short", 60));
    let diff = d.wait_for("the shadow to report a difference", WAIT, || {
        let (_, v) = d.get("/v1/policy/shadow/diff");
        (v["differences"].as_u64().unwrap_or(0) > 0).then_some(v)
    });
    let recent = diff["recent"].as_array().unwrap();
    let about = |job: u64| {
        recent
            .iter()
            .rev()
            .find(|x| x["job"] == job)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(about(long)["live"], "pending: insufficient-gpus", "{diff}");
    assert_eq!(
        about(long)["other"],
        "pending: blocked-by-higher-priority",
        "{diff}"
    );
    assert_eq!(
        about(short)["live"],
        "pending: blocked-by-higher-priority",
        "{diff}"
    );
    // The live pipeline decides: `long` starts first.
    d.release(blocker);
    d.wait_state(long, "running");
    assert_eq!(d.job(short)["state"], "pending");

    // A shadow whose placement traps: faults counted on the shadow, live untouched.
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::HOSTILE_TRAP);
    assert_eq!(status, 201);
    let (status, _) = d.put(
        "/v1/policy/shadow",
        &json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "hostile-trap"}}),
    );
    assert_eq!(status, 200);
    d.wait_for("the trapping shadow's faults", WAIT, || {
        let (_, v) = d.get("/v1/policy/shadow");
        (v["faults"].as_u64().unwrap_or(0) > 0).then_some(())
    });
    d.release(long);
    d.wait_state(short, "running");
    let (_, faults) = d.get("/v1/faults");
    assert_eq!(
        faults,
        json!([]),
        "shadow faults must not reach the live cycle"
    );
    let (status, last) = d.delete("/v1/policy/shadow");
    assert_eq!(status, 200, "{last}");
    let (status, _) = d.get("/v1/policy/shadow");
    assert_eq!(status, 404);
    d.release(short);
}

#[test]
fn replay_of_recorded_snapshots() {
    let d = Daemon::start(4);
    let blocker = d.submit(&d.blocking_job("blocker", 1, 4));
    d.wait_state(blocker, "running");
    let long = d.submit(&limited(&d, "long", 3000));
    let short = d.submit(&limited(&d, "short", 60));
    d.wait_for("both to wait", WAIT, || {
        (d.job(short)["reason"]["code"] == "blocked-by-higher-priority").then_some(())
    });
    let live = json!({"priority": [{"plugin": "fifo"}], "placement": {"plugin": "first-fit"}, "preemption": {"plugin": "priority-preempt"}});
    let (status, same) = d.post("/v1/replay", &json!({"pipeline": live, "since_s": 3600}));
    assert_eq!(status, 200, "{same}");
    assert!(same["cycles"].as_u64().unwrap() > 0, "{same}");
    assert_eq!(
        same["differences"], 0,
        "the live pipeline replays identically: {same}"
    );
    let (status, _) = d.post_bytes("/v1/plugins", gantry_components::SHORTEST_FIRST);
    assert_eq!(status, 201);
    let candidate =
        json!({"priority": [{"plugin": "shortest-first"}], "placement": {"plugin": "first-fit"}});
    let (status, other) = d.post(
        "/v1/replay",
        &json!({"pipeline": candidate, "since_s": 3600}),
    );
    assert_eq!(status, 200, "{other}");
    assert!(other["differences"].as_u64().unwrap() > 0, "{other}");
    let jobs: Vec<u64> = other["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["job"].as_u64().unwrap())
        .collect();
    assert!(jobs.contains(&long) && jobs.contains(&short), "{other}");
    for id in [blocker, long, short] {
        d.release(id);
    }
}
