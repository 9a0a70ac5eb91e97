//! Hot swap of the priority stage while jobs wait: uploading `shortest-first` and making it
//! live changes which queued job starts next; rolling back restores FIFO for the jobs still
//! queued; the history records both swaps.

use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};

/// A job that takes the whole 4-GPU node and has a time limit of `limit_s`.
fn whole_node(d: &Daemon, name: &str, limit_s: u64) -> u64 {
    let mut spec = d.blocking_job(name, 1, 4);
    spec["time_limit_s"] = json!(limit_s);
    d.submit(&spec)
}

/// Waits until one of `candidates` (name, id) runs, asserts it is `want` and that the
/// others still wait.
fn expect_next(d: &Daemon, candidates: &[(&str, u64)], want: &str) {
    let started = d.wait_for("one of the queued jobs to start", WAIT, || {
        let running: Vec<&str> = candidates
            .iter()
            .filter(|(_, id)| d.job(*id)["state"] == "running")
            .map(|(name, _)| *name)
            .collect();
        assert!(running.len() <= 1, "two whole-node jobs run: {running:?}");
        running.first().copied()
    });
    assert_eq!(
        started, want,
        "wrong job started first among {candidates:?}"
    );
    for (other, id) in candidates.iter().filter(|(n, _)| *n != want) {
        assert_eq!(d.job(*id)["state"], "pending", "job {other} left the queue");
    }
}

fn priority_plugin(policy: &Value) -> &str {
    policy["active"]["spec"]["priority"][0]["plugin"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn shortest_first_reorders_the_queue_and_rollback_restores_fifo() {
    let d = Daemon::start(4);
    let blocker = whole_node(&d, "blocker", 0);
    d.wait_state(blocker, "running");
    let a = whole_node(&d, "a", 3000);
    let b = whole_node(&d, "b", 60);
    let c = whole_node(&d, "c", 600);

    let (status, info) = d.post_bytes("/v1/plugins", gantry_components::SHORTEST_FIRST);
    assert_eq!(status, 201, "{info}");
    assert_eq!(info["name"], "shortest-first", "{info}");
    assert!(
        info["sha256"].as_str().is_some_and(|s| s.len() == 64),
        "{info}"
    );
    let pipeline = json!({
        "priority": [{"plugin": "shortest-first", "config": {}}],
        "placement": {"plugin": "first-fit"},
        "preemption": {"plugin": "priority-preempt"},
    });
    let (status, swap) = d.put("/v1/policy", &pipeline);
    assert_eq!(status, 200, "{swap}");
    assert!(swap["active"]["version"].as_u64().is_some(), "{swap}");
    assert!(
        swap["swap_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{swap}"
    );
    assert_eq!(priority_plugin(&swap), "shortest-first", "{swap}");

    // Shortest time limit first: B (60 s), then C (600 s); A (3000 s) waits.
    d.release(blocker);
    expect_next(&d, &[("a", a), ("b", b), ("c", c)], "b");
    d.release(b);
    expect_next(&d, &[("a", a), ("c", c)], "c");

    // Queue behind C: A (3000 s, oldest), E (5000 s), D (10 s, newest).
    let e = whole_node(&d, "e", 5000);
    let dd = whole_node(&d, "d", 10);
    let (status, back) = d.post("/v1/policy/rollback", &json!({}));
    assert_eq!(status, 200, "{back}");
    assert_eq!(back["active"]["action"], "rollback", "{back}");
    assert_eq!(back["active"]["restores"], 1, "{back}");
    assert_eq!(priority_plugin(&back), "fifo", "{back}");
    let (_, shown) = d.get("/v1/policy");
    assert_eq!(shown["active"]["version"], back["active"]["version"]);

    // FIFO again: A, E, D (shortest-first would have run D first).
    d.release(c);
    expect_next(&d, &[("a", a), ("d", dd), ("e", e)], "a");
    d.release(a);
    expect_next(&d, &[("d", dd), ("e", e)], "e");
    d.release(e);
    expect_next(&d, &[("d", dd)], "d");
    d.release(dd);
    for id in [blocker, a, b, c, dd, e] {
        d.wait_state(id, "succeeded");
    }

    let (status, history) = d.get("/v1/policy/history");
    assert_eq!(status, 200, "{history}");
    let versions = history.as_array().expect("history is a list");
    let actions: Vec<&str> = versions
        .iter()
        .map(|v| v["action"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(actions, ["default", "set", "rollback"], "{history}");
    let numbers: Vec<u64> = versions
        .iter()
        .map(|v| v["version"].as_u64().expect("version"))
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    assert_eq!(versions[2]["restores"], versions[0]["version"], "{history}");
}
