//! Idle-GPU reclaim on the fake NVML library (issue 47, item 4): the node samples NVML's
//! per-process utilization and memory, attributes them to the jobs holding the GPUs, shows
//! them in `gantry job` and accounting, and gives them to the preemption stage, where the
//! built-in `idle-reclaim` plugin ends a notebook idle past its window when a job of its
//! queue waits, and leaves a busy one alone.
//!
//! Proved here: per-job utilization and memory equal the scenario's processes; a `gantry
//! run` session idle past its window is warned in its terminal, gets its checkpoint signal
//! (SIGTERM) only `warn_s` after the warning, ends `preempted` with the reason, and its GPU goes to the waiting job; a busy
//! notebook that did not consent to preemption keeps running; accounting records GPU time
//! used next to GPU time held.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::fake_nvml::{FakeGpus, node_toml};
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::process::{Command, Stdio};

/// The GPU index task 0 of `job` holds.
fn gpu_of(job: &Value) -> u64 {
    job["tasks"][0]["gpus"][0]["index"].as_u64().unwrap()
}

/// Waits for `path` to hold a pid, and returns it.
fn pid_in(d: &Daemon, path: &std::path::Path) -> u64 {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        if std::time::Instant::now() > deadline {
            let (_, jobs) = d.get("/v1/jobs");
            let (_, log) = d.get_text("/v1/jobs/1/logs");
            panic!("no pid in {}: {jobs}\n{log}", path.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn an_idle_notebook_is_warned_then_ended_for_a_waiting_job_while_a_busy_one_stays() {
    let dir = tempfile::tempdir().unwrap();
    let mut gpus = FakeGpus::uniform(dir.path(), "node", 2, "NVIDIA A100-SXM4-80GB", 81_920);
    let d = Daemon::start_on_fake_nvml(gpus.path(), &node_toml("gpu_sample_every_s = 1\n"));
    let pipeline = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "first-fit"},
        "preemption": {"plugin": "idle-reclaim", "config": {"rules": [
            {"queue": "*", "threshold_percent": 5, "window_s": 3, "warn_s": 5, "grace_s": 2, "kinds": ["interactive"]}
        ]}},
    });
    let (status, body) = d.put("/v1/policy", &pipeline);
    assert_eq!(status, 200, "{body}");

    // An idle notebook, as a person starts one: `gantry run`, attached.
    let out = d.out_dir();
    std::fs::create_dir_all(&out).unwrap();
    let idle_pid = out.join("idle.pid");
    let signalled = out.join("idle.signalled");
    let script = format!(
        "echo $$ > {}; trap 'echo checkpoint-signal; touch {}; exit 0' TERM; echo notebook-up; while :; do sleep 0.1; done",
        idle_pid.display(),
        signalled.display()
    );
    let stderr_path = dir.path().join("run.stderr");
    let run = Command::new(gantry_bin())
        .args([
            "--server",
            d.url(),
            "run",
            "--gpus",
            "1",
            "--no-stdin",
            "--",
        ])
        .args(["/bin/sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let idle_pid = pid_in(&d, &idle_pid);
    // The daemon's first job.
    let idle_id = 1;
    let idle = d.wait_state(idle_id, "running");
    assert_eq!(idle["spec"]["kind"], "interactive", "{idle}");
    assert_eq!(idle["spec"]["preemptible"], false, "{idle}");

    // A busy notebook, submitted through the API.
    let busy_pid = out.join("busy.pid");
    let mut busy = d.shell_job(
        "busy",
        1,
        1,
        &format!("echo $$ > {}; sleep 300", busy_pid.display()),
    );
    busy["kind"] = json!("interactive");
    let busy_id = d.submit(&busy);
    let busy = d.wait_state(busy_id, "running");
    let busy_pid = pid_in(&d, &busy_pid);

    // NVML sees each job's process on its GPU: one holds memory and computes nothing, the
    // other is 80 % busy.
    let (idle_gpu, busy_gpu) = (gpu_of(&idle), gpu_of(&busy));
    assert_ne!(idle_gpu, busy_gpu);
    gpus.update(|s| {
        s["devices"][idle_gpu as usize]["processes"] =
            json!([{"pid": idle_pid, "used_memory_mib": 512, "sm_util": 0}]);
        s["devices"][busy_gpu as usize]["processes"] =
            json!([{"pid": busy_pid, "used_memory_mib": 2048, "sm_util": 80}]);
    });
    for (id, util, mib) in [(idle_id, 0, 512), (busy_id, 80, 2048)] {
        let usage = d.wait_for("two samples of the job's GPU use", WAIT, || {
            let u = d.job(id)["tasks"][0]["gpu_usage"].clone();
            (u["samples"].as_u64()? >= 2 && u["memory_mib"] == mib).then_some(u)
        });
        assert_eq!(usage["util_percent"], util, "job {id}: {usage}");
        assert_eq!(usage["memory_peak_mib"], mib, "job {id}: {usage}");
    }
    let shown = Command::new(gantry_bin())
        .args(["--server", d.url(), "job", &busy_id.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("GpuUse=0:") && text.contains("Util=80% Mem=2048M"),
        "{text}"
    );

    // A job of the same queue waits for a GPU: the idle notebook is reclaimed for it.
    let waiting = d.submit(&d.shell_job("waiting", 1, 1, "echo got-a-gpu"));
    // Warned first: told, still running, not yet signalled (the signal is 5 s away).
    let warned = d.wait_for("the warning", WAIT, || {
        let job = d.job(idle_id);
        let message = job["reason"]["message"].as_str()?.to_string();
        message.contains("checkpoint signal in 5 s").then_some(job)
    });
    assert_eq!(warned["state"], "running", "{warned}");
    assert!(
        !signalled.exists(),
        "the checkpoint signal came with the warning: {warned}"
    );
    let ended = d.wait_state(idle_id, "preempted");
    let reason = ended["reason"]["message"].as_str().unwrap_or_default();
    assert!(
        reason.contains("idle GPU reclaim") && reason.contains(&format!("job {waiting} waits")),
        "{ended}"
    );
    // Not requeued (it would take the GPU back, still idle): it did not consent.
    assert_eq!(ended["requeues"], 0, "{ended}");
    assert!(reason.contains("not requeued"), "{ended}");
    d.wait_state(waiting, "succeeded");
    assert_eq!(
        d.job(busy_id)["state"],
        "running",
        "the busy notebook stays"
    );

    // The person at the notebook was told, and the job got its checkpoint signal.
    let finished = run.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&finished.stdout);
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        stderr.contains(&format!(
            "gantry: job {idle_id}: to be stopped in 7 s (checkpoint signal in 5 s)"
        )) && stderr.contains("idle GPU reclaim"),
        "{stderr}"
    );
    assert!(stdout.contains("checkpoint-signal"), "{stdout}\n{stderr}");
    assert!(signalled.exists(), "{stdout}");
    let (_, events) = d.get(&format!("/v1/jobs/{idle_id}/events"));
    let events = events.to_string();
    assert!(events.contains("idle GPU reclaim"), "{events}");
    assert!(
        events.contains("checkpoint signal 15 sent after the warning"),
        "{events}"
    );

    // Accounting: the idle notebook held a GPU and used none of it.
    let (_, acct) = d.get(&format!("/v1/accounting?job={idle_id}"));
    let record = &acct["records"][0];
    assert_eq!(record["gpu_used_milli_seconds"], 0, "{acct}");
    assert!(record["gpu_milli_seconds"].as_u64().unwrap() > 0, "{acct}");
    // The busy one, cancelled, used some.
    let (status, body) = d.delete(&format!("/v1/jobs/{busy_id}"));
    assert!(status < 300, "{body}");
    d.wait_state(busy_id, "cancelled");
    let (_, acct) = d.get(&format!("/v1/accounting?job={busy_id}"));
    let used = acct["records"][0]["gpu_used_milli_seconds"]
        .as_u64()
        .unwrap();
    assert!(used > 0, "{acct}");
    assert!(
        acct["total"]["gpu_used_hours"].as_f64().unwrap() > 0.0,
        "{acct}"
    );
}

#[test]
fn an_agents_samples_reach_the_controller_in_its_heartbeat() {
    const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let mut gpus = FakeGpus::uniform(dir.path(), "agent", 1, "NVIDIA H100 80GB HBM3", 81_559);
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let _agent = gantry_e2e::agents::Agent::start_on_fake_nvml(
        &d,
        d.url(),
        "sampled-agent",
        TOKEN,
        &node_toml("gpu_sample_every_s = 1\n"),
        gpus.path(),
    );
    let out = d.out_dir();
    let pid_file = out.join("agent-job.pid");
    let id = d.submit(&d.shell_job(
        "on-the-agent",
        1,
        1,
        &format!("echo $$ > {}; sleep 300", pid_file.display()),
    ));
    d.wait_state(id, "running");
    let pid = pid_in(&d, &pid_file);
    gpus.update(|s| {
        s["devices"][0]["processes"] =
            json!([{"pid": pid, "used_memory_mib": 1024, "sm_util": 55}]);
    });
    let usage = d.wait_for("the agent's samples of the job", WAIT, || {
        let u = d.job(id)["tasks"][0]["gpu_usage"].clone();
        (u["samples"].as_u64()? >= 2 && u["util_percent"] == 55).then_some(u)
    });
    assert_eq!(usage["memory_mib"], 1024, "{usage}");
    let (status, body) = d.delete(&format!("/v1/jobs/{id}"));
    assert!(status < 300, "{body}");
    d.wait_state(id, "cancelled");
}
