//! The example pipelines under `examples/policies/` load in a running daemon and
//! behave as their READMEs say.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, id_of, workspace};
use serde_json::{Value, json};

fn pipeline(name: &str) -> Value {
    let path = workspace()
        .join("examples/policies")
        .join(name)
        .join("pipeline.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn state(d: &Daemon, id: u64) -> String {
    d.get(&format!("/v1/jobs/{id}")).1["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn notebooks_beside_training() {
    let d = Daemon::start(2);
    let (status, swap) = d.put("/v1/policy", &pipeline("notebooks"));
    assert_eq!(status, 200, "{swap}");

    let notebook = |gpus: u32, extra: Value| {
        let mut job = d.blocking_job("notebook", 1, gpus);
        job["queue"] = json!("interactive");
        job["kind"] = json!("interactive");
        for (k, v) in extra.as_object().unwrap() {
            job[k] = v.clone();
        }
        d.post("/v1/jobs", &job)
    };
    let (status, body) = notebook(2, json!({}));
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("at most 1 GPUs per job"),
        "{body}"
    );
    let (status, body) = notebook(1, json!({"time_limit_s": 6 * 3600}));
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("at most 4h per job (asked 6h)"),
        "{body}"
    );
    let mut batch = d.blocking_job("nb-batch", 1, 1);
    batch["queue"] = json!("interactive");
    let (status, body) = d.post("/v1/jobs", &batch);
    assert_eq!(status, 422, "{body}");
    let mut elsewhere = d.blocking_job("scratch", 1, 1);
    elsewhere["queue"] = json!("scratch");
    let (status, body) = d.post("/v1/jobs", &elsewhere);
    assert_eq!(status, 422, "{body}");
    assert!(
        body.to_string().contains("queue scratch does not exist"),
        "{body}"
    );

    // Two notebooks take both GPUs; each got the 4 h default and is preemptible.
    let (status, a) = notebook(1, json!({}));
    assert_eq!(status, 201, "{a}");
    let (_, b) = notebook(1, json!({}));
    let (a, b) = (id_of(&a), id_of(&b));
    d.task_env(a, 0);
    d.task_env(b, 0);
    let job_a = d.get(&format!("/v1/jobs/{a}")).1;
    assert_eq!(job_a["spec"]["time_limit_s"], 14_400, "{job_a}");
    assert_eq!(job_a["spec"]["preemptible"], true, "{job_a}");

    // A 1-GPU training job evicts one notebook, starts, and the notebook is requeued.
    let mut train = d.blocking_job("train", 1, 1);
    train["queue"] = json!("training");
    let (status, t) = d.post("/v1/jobs", &train);
    assert_eq!(status, 201, "{t}");
    let t = id_of(&t);
    d.task_env(t, 0);
    let victim = d.wait_for("a notebook to be requeued", WAIT, || {
        [a, b].into_iter().find(|id| {
            let j = d.get(&format!("/v1/jobs/{id}")).1;
            j["requeues"].as_u64().unwrap_or(0) > 0
        })
    });
    let other = if victim == a { b } else { a };
    assert_eq!(state(&d, other), "running");
    assert_eq!(state(&d, victim), "pending");
    d.check_allocations();
    // When training ends, the notebook runs again.
    d.release(t);
    d.wait_for("the evicted notebook to run again", WAIT, || {
        (state(&d, victim) == "running").then_some(())
    });
    d.release(a);
    d.release(b);
}

/// Jobs of `queue`/`account` that record their env and wait for release, light on CPU
/// (32 of them share this machine's cores).
fn team_job(d: &Daemon, queue: &str, i: u32) -> u64 {
    let mut job = d.blocking_job(&format!("{queue}-{i}"), 1, 1);
    job["queue"] = json!(queue);
    job["account"] = json!(queue);
    job["tasks"] =
        json!([{"count": 1, "gpus": 1, "gpu_milli": 0, "cpu_milli": 20, "memory_mib": 16}]);
    let (status, created) = d.post("/v1/jobs", &job);
    assert_eq!(status, 201, "{created}");
    id_of(&created)
}

fn count(d: &Daemon, ids: &[u64], want: &str) -> usize {
    ids.iter().filter(|id| state(d, **id) == want).count()
}

#[test]
fn two_teams_sharing() {
    let d = Daemon::start(32);
    let (status, swap) = d.put("/v1/policy", &pipeline("two-teams"));
    assert_eq!(status, 200, "{swap}");
    let mut other = d.blocking_job("nobody", 1, 1);
    other["queue"] = json!("team-c");
    let (status, body) = d.post("/v1/jobs", &other);
    assert_eq!(status, 422, "{body}");

    // Team A alone: 16 nominal + 8 borrowed run, 6 wait with the quota named.
    let a: Vec<u64> = (0..30).map(|i| team_job(&d, "team-a", i)).collect();
    d.wait_for("24 of team A's jobs to run", WAIT, || {
        (count(&d, &a, "running") == 24).then_some(())
    });
    let held: Vec<&u64> = a.iter().filter(|id| state(&d, **id) == "pending").collect();
    assert_eq!(held.len(), 6);
    // A job submitted after a cycle took its snapshot gets its reason from the next cycle.
    let reason = d.wait_for("the waiting job's reason", WAIT, || {
        let job = d.get(&format!("/v1/jobs/{}", held[0])).1;
        (!job["reason"].is_null()).then(|| job["reason"].to_string())
    });
    assert!(
        reason.contains("team-a") && reason.contains("borrow"),
        "{reason}"
    );

    // Team B submits 16: 8 take the free GPUs, 8 more reclaim what A borrowed.
    let b: Vec<u64> = (0..16).map(|i| team_job(&d, "team-b", i)).collect();
    d.wait_for("all 16 of team B's jobs to run", WAIT * 4, || {
        (count(&d, &b, "running") == 16).then_some(())
    });
    assert_eq!(
        count(&d, &a, "running"),
        16,
        "team A is back to its nominal quota"
    );
    let requeued = a
        .iter()
        .filter(|id| d.get(&format!("/v1/jobs/{id}")).1["requeues"].as_u64() == Some(1))
        .count();
    assert_eq!(
        requeued, 8,
        "exactly A's 8 borrowed jobs were evicted, once each"
    );
    d.check_allocations();
    for id in a.iter().chain(&b) {
        d.release(*id);
    }
}

#[test]
fn small_lab_backfills_short_jobs_without_delaying_the_reserved_one() {
    let d = Daemon::start(4);
    let (status, swap) = d.put("/v1/policy", &pipeline("small-lab"));
    assert_eq!(status, 200, "{swap}");
    let submit = |name: &str, gpus: u32, limit_s: u64| {
        let mut job = d.blocking_job(name, 1, gpus);
        job["time_limit_s"] = json!(limit_s);
        let (status, created) = d.post("/v1/jobs", &job);
        assert_eq!(status, 201, "{created}");
        id_of(&created)
    };
    // 3 of 4 GPUs busy for up to an hour; the big job needs all 4 and is reserved.
    let running = submit("running", 3, 3600);
    d.task_env(running, 0);
    let big = submit("big", 4, 3600);
    let reason = d.wait_for("the big job's reservation", WAIT, || {
        let j = d.get(&format!("/v1/jobs/{big}")).1;
        let m = j["reason"]["message"].as_str().unwrap_or("").to_string();
        m.contains("reserved to start").then_some(m)
    });
    assert!(
        reason.contains(&format!("when job {running} ends")),
        "{reason}"
    );
    // A 2-hour job on the free GPU would delay the big job; a 10-minute one backfills.
    let long = submit("long", 1, 7200);
    let why = d.wait_for("the long job to be refused", WAIT, || {
        let j = d.get(&format!("/v1/jobs/{long}")).1;
        let m = j["reason"]["message"].as_str().unwrap_or("").to_string();
        m.contains("would delay").then_some(m)
    });
    assert!(why.contains(&format!("job {big}")), "{why}");
    let short = submit("short", 1, 600);
    d.task_env(short, 0);
    assert_eq!(state(&d, long), "pending");
    // When the running jobs end, the big job starts before the long one.
    d.release(running);
    d.release(short);
    d.task_env(big, 0);
    assert_eq!(state(&d, long), "pending");
    d.release(big);
    d.task_env(long, 0);
    d.release(long);
}
