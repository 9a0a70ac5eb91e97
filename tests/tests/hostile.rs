//! Misbehaving plugins against a live daemon. For each hostile fixture:
//!
//! * with jobs pending, `PUT /v1/policy` with it is refused (422 `dry-run-failed`), the fault is
//!   recorded with its kind and the plugin's name, and the active pipeline does not change;
//! * with the queue empty, the swap is attempted again: a cycle with nothing to decide calls
//!   no stage, so the dry run passes and the plugin goes live. Jobs submitted then make every
//!   cycle fault; each falls back to the built-in pipeline and still starts every job with
//!   sound allocations, and the fault (with `fell_back`) is visible in `/v1/faults`.
//!
//! Throughout: the daemon stays healthy, no GPU is booked twice and no gang runs partially.
//!
//! A plugin that sleeps (`std::thread::sleep` of an hour) must not hold the scheduler: its
//! sleep ends at once (plugin time is frozen), so the swap passes its dry run even with jobs
//! pending and every job still runs; one that sleeps until its clock moves hits its deadline.

use gantry_e2e::{Daemon, WAIT, gpu_set};
use serde_json::{Value, json};
use std::time::Instant;

/// One hostile component and what the host should make of it.
struct Fixture {
    name: &'static str,
    bytes: &'static [u8],
    /// "priority" or "placement".
    stage: &'static str,
    /// Expected fault kind.
    fault: &'static str,
    /// The plugin reference used in the pipeline.
    plugin_ref: Value,
}

fn pipeline(f: &Fixture) -> Value {
    let (priority, placement) = match f.stage {
        "priority" => (f.plugin_ref.clone(), json!({"plugin": "first-fit"})),
        _ => (json!({"plugin": "fifo"}), f.plugin_ref.clone()),
    };
    json!({
        "priority": [priority],
        "placement": placement,
        "preemption": {"plugin": "priority-preempt"},
    })
}

fn healthy(d: &Daemon) {
    let (status, body) = d.get("/v1/health");
    assert_eq!((status, &body["status"]), (200, &json!("ok")), "{body}");
}

fn active_version(d: &Daemon) -> Value {
    d.get("/v1/policy").1["active"]["version"].clone()
}

/// Waits for a fault of `f` (of its kind, at its stage) recorded in a cycle matching `cycle`.
fn expect_fault(d: &Daemon, f: &Fixture, cycle: impl Fn(u64) -> bool) -> Value {
    let what = format!("a {} fault of {}", f.fault, f.name);
    d.wait_for(&what, WAIT, || {
        let (_, faults) = d.get("/v1/faults");
        faults.as_array()?.iter().find_map(|x| {
            let ok = x["plugin"]["name"] == f.name
                && x["fault"]["kind"] == f.fault
                && x["stage"] == f.stage
                && x["cycle"].as_u64().is_some_and(&cycle);
            ok.then(|| x.clone())
        })
    })
}

/// Two single-GPU jobs and a gang of two single-GPU tasks (the whole node); all must run
/// with disjoint GPUs and the gang complete, then succeed once released.
fn run_mixed_jobs(d: &Daemon) {
    let s1 = d.submit(&d.blocking_job("single-1", 1, 1));
    let s2 = d.submit(&d.blocking_job("single-2", 1, 1));
    let gang = d.submit(&d.blocking_job("gang", 2, 1));
    let mut seen: Vec<u32> = Vec::new();
    for (id, rank) in [(s1, 0), (s2, 0), (gang, 0), (gang, 1)] {
        let env = d.task_env(id, rank);
        assert_eq!(env["RANK"], rank.to_string());
        seen.extend(gpu_set(&env["CUDA_VISIBLE_DEVICES"]));
        if id == gang {
            assert_eq!(env["WORLD_SIZE"], "2", "gang task sees a partial world");
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1, 2, 3], "tasks got overlapping or missing GPUs");
    for id in [s1, s2, gang] {
        d.wait_state(id, "running");
    }
    let gang_job = d.job(gang);
    assert_eq!(
        gang_job["tasks"].as_array().map(Vec::len),
        Some(2),
        "{gang_job}"
    );
    d.check_allocations();
    healthy(d);
    for id in [s1, s2, gang] {
        d.release(id);
        d.wait_state(id, "succeeded");
    }
}

fn exercise(f: &Fixture) {
    let d = Daemon::start(4);
    let (status, info) = d.post_bytes("/v1/plugins", f.bytes);
    assert_eq!(status, 201, "{info}");
    assert_eq!(info["name"], f.name, "{info}");
    let default_version = active_version(&d);

    // (b) Jobs pending: a 2-GPU job runs, a gang of 2 x 2 GPUs waits for it.
    let blocker = d.submit(&d.blocking_job("blocker", 1, 2));
    d.wait_state(blocker, "running");
    let waiting = d.submit(&d.blocking_job("waiting-gang", 2, 2));
    d.wait_for("the gang to wait for GPUs", WAIT, || {
        (d.job(waiting)["reason"]["code"] == "insufficient-gpus").then_some(())
    });
    let (status, body) = d.put("/v1/policy", &pipeline(f));
    assert_eq!(status, 422, "swap with pending jobs: {body}");
    assert_eq!(body["error"]["code"], "dry-run-failed", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(f.name),
        "message does not name the plugin: {body}"
    );
    assert_eq!(
        active_version(&d),
        default_version,
        "a refused swap changed the pipeline"
    );
    expect_fault(&d, f, |c| c == 0);
    healthy(&d);
    d.release(blocker);
    d.wait_state(waiting, "running");
    d.check_allocations();
    d.release(waiting);
    d.wait_state(waiting, "succeeded");

    // (a) Queue empty: the dry run has no job to misbehave on.
    let (status, body) = d.put("/v1/policy", &pipeline(f));
    assert_eq!(
        status, 200,
        "an idle swap calls no stage, so it must be accepted: {body}"
    );
    assert!(body["swap_ms"].is_number(), "{body}");
    let (_, policy) = d.get("/v1/policy");
    assert_eq!(
        policy["fallback_version"], default_version,
        "the last good pipeline (the one that just ran jobs) must be the fallback: {policy}"
    );
    run_mixed_jobs(&d);
    let fault = expect_fault(&d, f, |c| c > 0);
    assert_eq!(fault["fell_back"], true, "{fault}");
    healthy(&d);
}

#[test]
fn infinite_loop_hits_the_deadline() {
    exercise(&Fixture {
        name: "hostile-loop",
        bytes: gantry_components::HOSTILE_LOOP,
        stage: "priority",
        fault: "deadline-exceeded",
        plugin_ref: json!({"plugin": "hostile-loop"}),
    });
}

#[test]
fn memory_hog_hits_the_memory_cap() {
    exercise(&Fixture {
        name: "hostile-memory",
        bytes: gantry_components::HOSTILE_MEMORY,
        stage: "priority",
        fault: "memory-limit",
        plugin_ref: json!({"plugin": "hostile-memory", "memory_mib": 64, "deadline_ms": 2000}),
    });
}

#[test]
fn trap_is_contained() {
    exercise(&Fixture {
        name: "hostile-trap",
        bytes: gantry_components::HOSTILE_TRAP,
        stage: "placement",
        fault: "trap",
        plugin_ref: json!({"plugin": "hostile-trap"}),
    });
}

#[test]
fn double_booking_is_rejected() {
    exercise(&Fixture {
        name: "hostile-double-book",
        bytes: gantry_components::HOSTILE_DOUBLE_BOOK,
        stage: "placement",
        fault: "invalid-output",
        plugin_ref: json!({"plugin": "hostile-double-book"}),
    });
}

#[test]
fn half_a_gang_is_rejected() {
    exercise(&Fixture {
        name: "hostile-half-gang",
        bytes: gantry_components::HOSTILE_HALF_GANG,
        stage: "placement",
        fault: "invalid-output",
        plugin_ref: json!({"plugin": "hostile-half-gang"}),
    });
}

#[test]
fn an_hour_long_sleep_does_not_hold_the_scheduler() {
    let f = Fixture {
        name: "hostile-sleep",
        bytes: gantry_components::HOSTILE_SLEEP,
        stage: "priority",
        fault: "none expected",
        plugin_ref: json!({"plugin": "hostile-sleep"}),
    };
    let d = Daemon::start(4);
    let (status, info) = d.post_bytes("/v1/plugins", f.bytes);
    assert_eq!(status, 201, "{info}");
    assert_eq!(info["name"], f.name, "{info}");

    // Jobs pending, so the dry run calls `score`, which sleeps for an hour: the sleep
    // must end at once and the swap be answered (the harness's requests give up at 60 s).
    let blocker = d.submit(&d.blocking_job("blocker", 1, 2));
    d.wait_state(blocker, "running");
    let waiting = d.submit(&d.blocking_job("waiting-gang", 2, 2));
    d.wait_for("the gang to wait for GPUs", WAIT, || {
        (d.job(waiting)["reason"]["code"] == "insufficient-gpus").then_some(())
    });
    let started = Instant::now();
    let (status, body) = d.put("/v1/policy", &pipeline(&f));
    assert_eq!(
        status, 200,
        "the sleep ends at once, so the dry run passes: {body}"
    );
    assert!(
        started.elapsed() < WAIT,
        "the swap took {:?}",
        started.elapsed()
    );
    let (_, policy) = d.get("/v1/policy");
    assert_eq!(
        policy["active"]["spec"]["priority"][0]["plugin"], f.name,
        "{policy}"
    );
    healthy(&d);

    // The live sleeping plugin orders every cycle; jobs keep being submitted and run.
    d.release(blocker);
    d.wait_state(waiting, "running");
    d.check_allocations();
    d.release(waiting);
    d.wait_state(waiting, "succeeded");
    run_mixed_jobs(&d);
    let (_, faults) = d.get("/v1/faults");
    let mine: Vec<&Value> = faults
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|x| x["plugin"]["name"] == f.name)
                .collect()
        })
        .unwrap_or_default();
    assert!(mine.is_empty(), "a sleep is not a fault: {mine:?}");
    healthy(&d);
}

#[test]
fn sleeping_until_the_clock_moves_hits_the_deadline() {
    exercise(&Fixture {
        name: "hostile-sleep",
        bytes: gantry_components::HOSTILE_SLEEP,
        stage: "priority",
        fault: "deadline-exceeded",
        plugin_ref: json!({"plugin": "hostile-sleep", "config": {"until_clock_moves": true}}),
    });
}
