//! Bounded state with history kept: an ended job leaves the scheduler's memory after
//! `retention.min_job_age_s` and is still found (by id, in lists page by page, by its
//! events, decisions and log, as a dependency, after a restart); the collector deletes
//! history older than `retention.*` with its logs and leaves the rest.

use gantry_api::model::{JobRecord, JobSpec, JobState};
use gantry_e2e::raw_http::{addr, get};
use gantry_e2e::{Daemon, WAIT, gantry_bin, id_of};
use gantry_store::Store;
use serde_json::{Value, json};

/// `gantry_jobs_in_memory` from `/metrics`.
fn in_memory(d: &Daemon) -> u64 {
    let (_, text) = d.get_text("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix("gantry_jobs_in_memory "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

fn wait_memory_empty(d: &Daemon) {
    d.wait_for("ended jobs to leave memory", WAIT, || {
        (in_memory(d) == 0).then_some(())
    });
}

/// The ids of a list page and its `X-Next-After`.
fn page(d: &Daemon, query: &str) -> (Vec<u64>, Option<u64>) {
    let a = get(&addr(d), &format!("/v1/jobs?{query}"), &[]);
    assert_eq!(a.status, 200, "{query}: {}", a.text());
    let list: Value = serde_json::from_slice(&a.body).expect("JSON list");
    let ids = list.as_array().expect("array").iter().map(id_of).collect();
    (ids, a.header("x-next-after").and_then(|v| v.parse().ok()))
}

#[test]
fn an_ended_job_leaves_memory_and_is_still_found_listed_paged_and_depended_on() {
    let mut d = Daemon::start_with_config(1, "[retention]\nmin_job_age_s = 0\n");
    let ok: Vec<u64> = (0..3)
        .map(|i| d.submit(&d.shell_job(&format!("ok-{i}"), 1, 0, "echo hello-$0; exit 0")))
        .collect();
    let bad = d.submit(&d.shell_job("bad", 1, 0, "exit 3"));
    for &id in &ok {
        d.wait_state(id, "succeeded");
    }
    d.wait_state(bad, "failed");
    wait_memory_empty(&d);

    // By id, with its log, events and decisions, from history.
    let job = d.job(ok[0]);
    assert_eq!(
        (&job["state"], &job["exit_code"]),
        (&json!("succeeded"), &json!(0))
    );
    let (status, log) = d.get_text(&format!("/v1/jobs/{}/logs?task=0", ok[0]));
    assert!(status == 200 && log.contains("hello"), "{status} {log}");
    let (status, events) = d.get(&format!("/v1/jobs/{}/events", ok[0]));
    let kinds: Vec<&str> = events
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(status == 200 && kinds.contains(&"submitted"), "{events}");
    let (status, _) = d.get(&format!("/v1/jobs/{}/decisions", ok[0]));
    assert_eq!(status, 200);
    // A cancel of a job that ended long ago is a conflict, not "no such job".
    let (status, body) = d.post(&format!("/v1/jobs/{bad}/cancel"), &json!({}));
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("already-ended")),
        "{body}"
    );

    // Lists, page by page through the cursor, newest first, and filtered from indexes.
    let (first, next) = page(&d, "limit=2");
    assert_eq!(first, vec![bad, ok[2]]);
    let (second, last) = page(&d, &format!("limit=2&after={}", next.expect("a cursor")));
    assert_eq!((second, last), (vec![ok[1], ok[0]], None));
    assert_eq!(page(&d, "state=failed").0, vec![bad]);
    assert_eq!(
        page(&d, &format!("state=succeeded&after={}", ok[2])).0,
        vec![ok[1], ok[0]]
    );
    let (status, body) = d.get("/v1/jobs?since=yesterday");
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("since")),
        "{body}"
    );

    // Dependencies on jobs that left memory: met, and never met.
    let mut after_ok = d.shell_job("after-ok", 1, 0, "exit 0");
    after_ok["dependencies"] = json!([{"kind": "afterok", "job": ok[0]}]);
    let after_ok = d.submit(&after_ok);
    let mut after_bad = d.shell_job("after-bad", 1, 0, "exit 0");
    after_bad["dependencies"] = json!([{"kind": "afterok", "job": bad}]);
    let after_bad = d.submit(&after_bad);
    d.wait_state(after_ok, "succeeded");
    let never = d.wait_state(after_bad, "cancelled");
    let reason = never["reason"]["message"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("job {bad} ended failed")),
        "{never}"
    );

    // A restart reads only active jobs, and history still answers.
    d.restart_after_sigkill();
    assert_eq!(in_memory(&d), 0, "nothing active, nothing in memory");
    assert_eq!(d.job(ok[1])["state"], "succeeded");
    assert_eq!(page(&d, "limit=100").0.len(), 6);
}

/// An ended job as the daemon would have stored it, `days_ago` days ago.
fn old_job(id: u64, days_ago: u64) -> JobRecord {
    let mut spec: JobSpec =
        serde_json::from_value(json!({"argv": ["true"], "user": "old"})).expect("spec");
    spec.validate().expect("valid");
    let at = gantry_controller::now_ms() - days_ago * 24 * 3600 * 1000;
    let mut j = JobRecord::new(id, spec, at);
    j.state = JobState::Succeeded;
    j.end_ms = Some(at + 1000);
    j
}

#[test]
fn gc_deletes_history_past_retention_with_its_logs_and_keeps_the_rest() {
    let mut d = Daemon::start_with_config(1, "[retention]\nlog_days = 30\njob_history_days = 60\n");
    let recent = d.submit(&d.shell_job("recent", 1, 0, "exit 0"));
    d.wait_state(recent, "succeeded");
    // Three ended jobs from before: 400 days (past both), 45 days (its log only), 10 days.
    let (ancient, middle, young) = (1_000_001, 1_000_002, 1_000_003);
    d.restart_after_sigkill_with(|data| {
        let store = Store::open(data).expect("store");
        for (id, days) in [(ancient, 400), (middle, 45), (young, 10)] {
            store.put_job(&old_job(id, days)).expect("put");
            store
                .event(0, Some(id), "submitted", "by old".into())
                .expect("event");
            let dir = data.join("jobs").join(id.to_string());
            std::fs::create_dir_all(&dir).expect("job dir");
            std::fs::write(dir.join("task-0.log"), "old output\n").expect("log");
        }
        store.flush().expect("flush");
    });
    assert_eq!(d.job(ancient)["state"], "succeeded");

    let server = format!("http://{}", addr(&d));
    let out = std::process::Command::new(gantry_bin())
        .args(["--server", &server, "admin", "gc"])
        .output()
        .expect("gantry admin gc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("deleted so far: 1 jobs, 2 job directories") && stdout.contains("done"),
        "{stdout}"
    );

    let (status, _) = d.get(&format!("/v1/jobs/{ancient}"));
    assert_eq!(status, 404, "the 400-day-old job is gone");
    let (_, events) = d.get(&format!("/v1/jobs/{ancient}/events"));
    assert!(events.get("error").is_some(), "{events}");
    let jobs_dir = |id: u64| d.out_dir().join("../data/jobs").join(id.to_string());
    assert!(!jobs_dir(ancient).exists() && !jobs_dir(middle).exists());
    assert_eq!(
        d.job(middle)["state"],
        "succeeded",
        "its record outlives its log"
    );
    assert!(jobs_dir(young).join("task-0.log").exists());
    assert_eq!(d.job(recent)["state"], "succeeded");
    // A second run finds nothing more.
    let (status, again) = d.post("/v1/admin/gc", &json!({}));
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["jobs_deleted"], &again["done"]),
        (&json!(0), &json!(true)),
        "{again}"
    );
}
