//! Issue 27, items 4 and 5: `gantry jobs` and `gantry nodes` shaped like squeue and
//! `sinfo -N`, and the `scontrol` commands
//! SLURM users type for a pending job, and
//! `scancel --signal`, through the real CLI against a real daemon: `gantry hold`, `release`,
//! `update --time --dependency` and `signal`, with the refusals a user meets (a running
//! job, a job not held, a dependency on a later job).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::json;
use std::process::{Command, Output};

fn gantry(d: &Daemon, args: &[&str]) -> Output {
    Command::new(gantry_bin())
        .args(["--server", d.url()])
        .args(args)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "accepted: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn one_gpu(name: &str, argv: &[&str]) -> serde_json::Value {
    json!({"name": name, "argv": argv,
           "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]})
}

#[test]
fn a_held_job_waits_until_released_and_an_update_changes_its_limit_and_dependencies() {
    let d = Daemon::start(1);
    let script = "trap 'echo got USR1' USR1; echo ready; while :; do sleep 0.1; done";
    let blocker = d.submit(&one_gpu("blocker", &["sh", "-c", script]));
    d.wait_state(blocker, "running");
    let held = d.submit(&one_gpu("held", &["true"]));
    let (h, b) = (held.to_string(), blocker.to_string());

    let out = ok(&gantry(&d, &["hold", &h]));
    assert!(
        out.contains(&format!("job {held}: pending, held by")),
        "{out}"
    );
    let reason = d.wait_for("the hold in the job's reason", gantry_e2e::WAIT, || {
        let job = d.job(held);
        let message = job["reason"]["message"].as_str()?.to_string();
        message.contains("held by").then_some(message)
    });
    assert!(
        reason.contains(&format!("gantry release {held}")),
        "{reason}"
    );
    // scontrol show job: Key=Value lines a person reads.
    let shown = ok(&gantry(&d, &["job", &h]));
    assert!(
        shown.starts_with(&format!("JobId={held} JobName=held")),
        "{shown}"
    );
    for part in [
        "JobState=pending",
        "HeldBy=anonymous",
        "Reason=held-by-policy: held by",
    ] {
        assert!(shown.contains(part), "{part} missing:\n{shown}");
    }

    // scontrol update: SLURM's time forms, and dependencies replaced.
    let out = ok(&gantry(
        &d,
        &[
            "update",
            &h,
            "--time",
            "1:30:00",
            "-d",
            &format!("afterany:{b}"),
        ],
    ));
    assert!(out.contains("time limit 5400 s"), "{out}");
    assert!(out.contains(&format!("afterany:{blocker}")), "{out}");
    let job = d.job(held);
    assert_eq!(job["spec"]["time_limit_s"], 5400);
    assert_eq!(
        job["spec"]["dependencies"],
        json!([{"kind": "afterany", "job": blocker}])
    );
    let later = (held + 50).to_string();
    let err = refused(&gantry(
        &d,
        &["update", &h, "-d", &format!("afterok:{later}")],
    ));
    assert!(
        err.contains("dependencies[0].job") && err.contains("submitted before"),
        "{err}"
    );
    let err = refused(&gantry(&d, &["update", &h, "--time", "soon"]));
    assert!(err.contains("--time"), "{err}");

    // scancel --signal: the running blocker's trap runs.
    ok(&gantry(&d, &["signal", &b, "SIGUSR1"]));
    d.wait_for("the trap's output", gantry_e2e::WAIT, || {
        let (_, text) = d.get_text(&format!("/v1/jobs/{blocker}/logs"));
        text.contains("got USR1").then_some(())
    });
    let err = refused(&gantry(&d, &["hold", &b]));
    assert!(err.contains("only a pending job can be held"), "{err}");

    // The GPU frees; a job submitted after the held one starts on it, the held one waits.
    ok(&gantry(&d, &["cancel", &b]));
    d.wait_state(blocker, "cancelled");
    let after = d.submit(&one_gpu("after", &["true"]));
    d.wait_state(after, "succeeded");
    assert_eq!(d.job(held)["state"], "pending", "a held job started");

    let out = ok(&gantry(&d, &["release", &h]));
    assert!(
        out.contains(&format!("job {held}: pending")) && !out.contains("held by"),
        "{out}"
    );
    let done = d.wait_state(held, "succeeded");
    assert_eq!(done["held_by"], serde_json::Value::Null);
    let err = refused(&gantry(&d, &["release", &h]));
    assert!(err.contains("only a pending job can be released"), "{err}");
    let err = refused(&gantry(&d, &["update", "999999", "--time", "1h"]));
    assert!(err.contains("does not exist"), "{err}");

    // The events tell the story.
    let (_, events) = d.get(&format!("/v1/jobs/{held}/events"));
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["held", "updated", "released", "started"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
}

#[test]
fn releasing_a_job_that_is_not_held_is_refused_and_hold_is_idempotent() {
    let d = Daemon::start(1);
    let blocker = d.submit(&one_gpu("blocker", &["sleep", "60"]));
    d.wait_state(blocker, "running");
    let waiting = d.submit(&one_gpu("waiting", &["true"]));
    let w = waiting.to_string();
    let err = refused(&gantry(&d, &["release", &w]));
    assert!(err.contains("is not held"), "{err}");
    ok(&gantry(&d, &["hold", &w]));
    ok(&gantry(&d, &["hold", &w]));
    let (status, body) = d.post(&format!("/v1/jobs/{waiting}/release"), &json!({}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = d.post(&format!("/v1/jobs/{waiting}/release"), &json!({}));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("not-held")),
        "{body}"
    );
    ok(&gantry(&d, &["cancel", &blocker.to_string()]));
    d.wait_state(waiting, "succeeded");
}

#[test]
fn a_job_with_a_begin_time_waits_for_it_then_runs() {
    let d = Daemon::start(1);
    let out = ok(&gantry(
        &d,
        &["submit", "--begin", "now+3", "--gpus", "1", "--", "true"],
    ));
    assert!(out.contains("submitted job 1"), "{out}");
    let job = d.job(1);
    let begin = job["spec"]["begin_ms"].as_u64().unwrap();
    assert!(begin >= job["submit_ms"].as_u64().unwrap() + 2_000, "{job}");
    let waiting = d.wait_for("the begin-time reason", WAIT, || {
        let job = d.job(1);
        let message = job["reason"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        message.contains("waits for its begin time").then_some(job)
    });
    assert_eq!(waiting["state"], "pending", "{waiting}");
    let shown = ok(&gantry(&d, &["job", "1"]));
    assert!(shown.contains(" EligibleTime="), "{shown}");
    let done = d.wait_state(1, "succeeded");
    assert!(done["start_ms"].as_u64().unwrap() >= begin, "{done}");
    let err = refused(&gantry(&d, &["submit", "--begin", "someday", "--", "true"]));
    assert!(err.contains("begin"), "{err}");
}

#[test]
fn cancel_takes_array_ids_members_users_and_states_as_scancel_does() {
    let d = Daemon::start(1);
    ok(&gantry(
        &d,
        &["submit", "--array", "0-3", "--", "sleep", "60"],
    ));
    let state = |id: u64| d.job(id)["state"].as_str().unwrap().to_string();
    // Members 1..=4 (indices 0..=3); the array's id is its first member's.
    assert_eq!(d.job(3)["array"]["index"], 2);
    let out = ok(&gantry(&d, &["cancel", "1_2"]));
    assert_eq!(out.trim(), "job 3: \"cancelled\"", "{out}");
    assert_eq!(state(3), "cancelled");
    assert_ne!(state(4), "cancelled");
    let out = ok(&gantry(&d, &["cancel", "1"]));
    assert_eq!(out.lines().count(), 3, "every member not ended yet: {out}");
    for id in 1..=4 {
        d.wait_for(&format!("job {id} to end"), WAIT, || {
            (state(id) == "cancelled").then_some(())
        });
    }
    let err = refused(&gantry(&d, &["cancel", "1_9"]));
    assert!(err.contains("array 1 has no member 9"), "{err}");

    // By state, then by user.
    let running = d.submit(&one_gpu("running", &["sleep", "60"]));
    d.wait_state(running, "running");
    let pending = d.submit(&one_gpu("pending", &["true"]));
    let out = ok(&gantry(&d, &["cancel", "--state", "pending"]));
    assert_eq!(out.trim(), format!("job {pending}: \"cancelled\""), "{out}");
    assert_eq!(state(running), "running");
    let out = ok(&gantry(&d, &["cancel", "--user", "someone-else"]));
    assert_eq!(out.trim(), "no job matched");
    let user = d.job(running)["spec"]["user"].as_str().unwrap().to_string();
    let out = ok(&gantry(&d, &["cancel", "--user", &user]));
    // A running job answers while it stops.
    assert_eq!(out.trim(), format!("job {running}: \"running\""), "{out}");
    d.wait_state(running, "cancelled");
    let err = refused(&gantry(&d, &["cancel"]));
    assert!(err.contains("name the jobs to cancel"), "{err}");
}

#[test]
fn gantry_jobs_lists_like_squeue_with_arrays_collapsed_and_json_for_scripts() {
    let d = Daemon::start(1);
    let quick = d.submit(&one_gpu("quick", &["true"]));
    d.wait_state(quick, "succeeded");
    let mut array = one_gpu("sweep", &["sleep", "60"]);
    array["array"] = json!({"indices": (0..10).collect::<Vec<u32>>()});
    let first = d.submit(&array);
    d.wait_state(first, "running");
    d.wait_for("the members' reasons", gantry_e2e::WAIT, || {
        let job = d.job(first + 9);
        job["reason"]["message"].as_str().map(|_| ())
    });

    let table = ok(&gantry(&d, &["jobs"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("JOBID") && lines[0].contains("NODELIST(REASON)"),
        "{table}"
    );
    let line_of = |id: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no line for {id}:\n{table}"))
            .to_string()
    };
    let running = line_of(&format!("{first}_0"));
    assert!(
        running.contains("running") && running.contains("GPUs [0]"),
        "{running}"
    );
    // The member next in line waits for the GPU, the rest behind it: one line per reason.
    let next = line_of(&format!("{first}_1"));
    assert!(
        next.contains("pending") && next.contains("(insufficient-gpus"),
        "{next}"
    );
    let behind = line_of(&format!("{first}_[2-9]"));
    assert!(behind.contains("(blocked-by-higher-priority"), "{behind}");
    // Ended a moment ago: still listed, as squeue keeps a job for MinJobAge.
    assert!(line_of(&quick.to_string()).contains("succeeded"), "{table}");

    let json_out = ok(&gantry(
        &d,
        &[
            "jobs",
            "--state",
            "succeeded,running",
            "--since",
            "1h",
            "--json",
        ],
    ));
    let listed: Vec<serde_json::Value> = serde_json::from_str(&json_out).unwrap();
    let mut ids: Vec<u64> = listed.iter().map(|j| j["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![quick, first], "{json_out}");
    let all = ok(&gantry(&d, &["jobs", "--all", "--json"]));
    let all: Vec<serde_json::Value> = serde_json::from_str(&all).unwrap();
    assert_eq!(all.len(), 11, "every job, members one by one");

    // sinfo -N: one line per node, its one GPU allocated to the running member.
    let nodes = ok(&gantry(&d, &["nodes"]));
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(lines.len(), 2, "{nodes}");
    assert!(
        lines[0].starts_with("NODE") && lines[0].ends_with("REASON"),
        "{nodes}"
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&cells[2..4], ["1", "1.00"], "{nodes}");
    let json_nodes: serde_json::Value =
        serde_json::from_str(&ok(&gantry(&d, &["nodes", "--json"]))).unwrap();
    assert_eq!(
        json_nodes[0]["gpus"][0]["allocated_milli"], 1000,
        "{json_nodes}"
    );

    ok(&gantry(&d, &["cancel", &format!("{first}-{}", first + 9)]));
}
