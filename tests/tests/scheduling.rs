//! Scheduling on one 4-GPU node with the default pipeline: disjoint GPU assignment, pending
//! reasons, exit codes, cancel, time limits and logs, observed through the API and the
//! environment the tasks actually received.

use gantry_e2e::{Daemon, WAIT, gpu_set, process_exists};
use serde_json::json;

#[test]
fn two_jobs_share_the_node_and_a_third_waits_for_all_gpus() {
    let d = Daemon::start(4);
    let a = d.submit(&d.blocking_job("a", 1, 2));
    let b = d.submit(&d.blocking_job("b", 1, 2));
    let gpus_a = gpu_set(&d.task_env(a, 0)["CUDA_VISIBLE_DEVICES"]);
    let gpus_b = gpu_set(&d.task_env(b, 0)["CUDA_VISIBLE_DEVICES"]);
    assert_eq!(
        (gpus_a.len(), gpus_b.len()),
        (2, 2),
        "{gpus_a:?} {gpus_b:?}"
    );
    assert!(
        gpus_a.iter().all(|g| !gpus_b.contains(g)),
        "jobs share GPUs: {gpus_a:?} and {gpus_b:?}"
    );
    for (id, env_gpus) in [(a, &gpus_a), (b, &gpus_b)] {
        let job = d.wait_state(id, "running");
        let held: Vec<u64> = job["tasks"][0]["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .map(|g| g["index"].as_u64().expect("index"))
            .collect();
        let env: Vec<u64> = env_gpus.iter().map(|g| u64::from(*g)).collect();
        assert_eq!(
            held, env,
            "job {id}: record and CUDA_VISIBLE_DEVICES differ"
        );
    }
    d.check_allocations();

    let c = d.submit(&d.blocking_job("c", 1, 4));
    let waiting = d.wait_for("job c to get a pending reason", WAIT, || {
        let job = d.job(c);
        job["reason"]["code"].is_string().then_some(job)
    });
    assert_eq!(waiting["state"], "pending", "{waiting}");
    assert_eq!(waiting["reason"]["code"], "insufficient-gpus", "{waiting}");
    let message = waiting["reason"]["message"].as_str().expect("message");
    assert!(
        message.contains("GPU"),
        "message does not name GPUs: {message}"
    );

    d.release(a);
    d.release(b);
    d.wait_state(a, "succeeded");
    d.wait_state(b, "succeeded");
    let gpus_c = gpu_set(&d.task_env(c, 0)["CUDA_VISIBLE_DEVICES"]);
    assert_eq!(gpus_c, vec![0, 1, 2, 3]);
    let job = d.wait_state(c, "running");
    assert_eq!(job["tasks"][0]["gpus"].as_array().map(Vec::len), Some(4));
    d.release(c);
    let done = d.wait_state(c, "succeeded");
    assert_eq!(done["exit_code"], 0, "{done}");
}

#[test]
fn exit_codes_are_recorded() {
    let d = Daemon::start(4);
    let failing = d.submit(&d.shell_job("exit-3", 1, 1, "exit 3"));
    let ok = d.submit(&d.shell_job("exit-0", 1, 0, "true"));
    let job = d.wait_state(failing, "failed");
    assert_eq!(job["exit_code"], 3, "{job}");
    let job = d.wait_state(ok, "succeeded");
    assert_eq!(job["exit_code"], 0, "{job}");
}

#[test]
fn cancel_stops_a_running_job_and_kills_its_processes() {
    let d = Daemon::start(4);
    let id = d.submit(&d.blocking_job("victim", 1, 1));
    let shell: i32 = d.task_env(id, 0)["TASK_SHELL_PID"]
        .parse()
        .expect("TASK_SHELL_PID");
    let group = d.wait_state(id, "running")["tasks"][0]["pid"]
        .as_i64()
        .expect("task pid") as i32;
    assert!(process_exists(shell));

    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{body}");
    d.wait_state(id, "cancelled");
    d.wait_for("the task's shell to be gone", WAIT, || {
        (!process_exists(shell)).then_some(())
    });
    d.wait_for("the task's process group to be gone", WAIT, || {
        (!process_exists(-group)).then_some(())
    });

    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(status, 409, "cancel of an ended job: {body}");
    assert_eq!(body["error"]["code"], "already-ended", "{body}");
}

#[test]
fn a_job_past_its_time_limit_ends_timed_out() {
    let d = Daemon::start(4);
    let mut spec = d.blocking_job("forever", 1, 1);
    spec["time_limit_s"] = json!(1);
    let id = d.submit(&spec);
    let shell: i32 = d.task_env(id, 0)["TASK_SHELL_PID"]
        .parse()
        .expect("TASK_SHELL_PID");
    let job = d.wait_state(id, "timed_out");
    assert!(job["exit_code"].as_i64().is_some_and(|c| c != 0), "{job}");
    d.wait_for("the timed-out task's shell to be gone", WAIT, || {
        (!process_exists(shell)).then_some(())
    });
}

#[test]
fn logs_return_what_the_job_printed() {
    let d = Daemon::start(4);
    let script = "echo hello-from-stdout; echo hello-from-stderr >&2";
    let id = d.submit(&d.shell_job("chatty", 1, 0, script));
    d.wait_state(id, "succeeded");
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs?task=0"));
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("hello-from-stdout"), "log: {text:?}");
    assert!(text.contains("hello-from-stderr"), "log: {text:?}");
}
