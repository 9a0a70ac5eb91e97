//! Durability across a SIGKILL of the daemon: every acknowledged job survives with its state,
//! finished jobs keep their exit codes, queued jobs stay queued, a running job is re-attached
//! (not relaunched) and finishes normally, and job ids are never reused.

use gantry_e2e::{Daemon, id_of, process_exists};

#[test]
fn sigkill_and_restart_keeps_every_job_and_reattaches_running_ones() {
    let mut d = Daemon::start(4);
    let ok = d.submit(&d.shell_job("ok", 1, 1, "exit 0"));
    let bad = d.submit(&d.shell_job("bad", 1, 1, "exit 5"));
    d.wait_state(ok, "succeeded");
    d.wait_state(bad, "failed");
    let running = d.submit(&d.blocking_job("running", 1, 4));
    let shell: i32 = d.task_env(running, 0)["TASK_SHELL_PID"]
        .parse()
        .expect("TASK_SHELL_PID");
    let pid_before = d.wait_state(running, "running")["tasks"][0]["pid"].clone();
    // Submitting flushes the store, so the running job's start is durable from here on.
    let queued = [
        d.submit(&d.blocking_job("queued-1", 1, 2)),
        d.submit(&d.blocking_job("queued-2", 1, 2)),
    ];
    for id in queued {
        d.wait_state(id, "pending");
    }
    let acknowledged = [ok, bad, running, queued[0], queued[1]];

    d.restart_after_sigkill();

    let (status, list) = d.get("/v1/jobs");
    assert_eq!(status, 200, "{list}");
    let listed: Vec<u64> = list
        .as_array()
        .expect("job list")
        .iter()
        .map(id_of)
        .collect();
    for id in acknowledged {
        assert!(listed.contains(&id), "job {id} lost in the restart: {list}");
    }
    let job = d.job(ok);
    assert_eq!(
        (&job["state"], &job["exit_code"]),
        (&"succeeded".into(), &0.into()),
        "{job}"
    );
    let job = d.job(bad);
    assert_eq!(
        (&job["state"], &job["exit_code"]),
        (&"failed".into(), &5.into()),
        "{job}"
    );
    for id in queued {
        assert_eq!(
            d.job(id)["state"],
            "pending",
            "queued job {id} after restart"
        );
    }
    let job = d.job(running);
    assert_eq!(job["state"], "running", "{job}");
    assert_eq!(
        job["tasks"][0]["pid"], pid_before,
        "the running job was relaunched: {job}"
    );
    assert!(
        process_exists(shell),
        "the running job's process died in the restart"
    );

    d.release(running);
    let job = d.wait_state(running, "succeeded");
    assert_eq!(job["exit_code"], 0, "{job}");
    for id in queued {
        d.task_env(id, 0);
        d.release(id);
        d.wait_state(id, "succeeded");
    }

    let fresh = d.submit(&d.shell_job("fresh", 1, 0, "true"));
    assert!(
        acknowledged.iter().all(|id| fresh > *id),
        "new job id {fresh} reuses or precedes {acknowledged:?}"
    );
    d.wait_state(fresh, "succeeded");
}
