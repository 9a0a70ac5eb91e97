//! The job kinds people run, end to end with a real daemon and real processes: an interactive
//! `gantry run` (streams output, returns the exit code, Ctrl-C and a vanished client end the
//! job), arrays with `%N`, dependencies, a gang's rendezvous environment, and the warning
//! signal before a time limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, gantry_bin, id_of, tasks};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

fn gantry(d: &Daemon) -> Command {
    let mut cmd = Command::new(gantry_bin());
    cmd.arg("--server").arg(d.url()).env_remove("GANTRY_TOKEN");
    cmd
}

#[test]
fn gantry_run_streams_output_and_returns_the_exit_code() {
    let d = Daemon::start(2);
    let out = gantry(&d)
        .args(["run", "--gpus", "1", "--", "sh", "-c"])
        .arg("echo hello from $CUDA_VISIBLE_DEVICES; echo to-stderr >&2; exit 3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(stdout.contains("hello from 0"), "stdout: {stdout}");
    assert!(
        stdout.contains("to-stderr"),
        "the task's stderr is in its stream: {stdout}"
    );
    assert!(
        stderr.contains("job 1 failed: exit code 3"),
        "stderr: {stderr}"
    );
    let (_, jobs) = d.get("/v1/jobs");
    let job = &jobs.as_array().unwrap()[0];
    assert_eq!(job["spec"]["kind"], "interactive", "{job}");
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(
        job["spec"]["time_limit_s"], 14_400,
        "an interactive job without a limit gets the queue's: {job}"
    );
}

/// Starts `gantry run -- CMD` and returns it with a channel of its stdout lines.
fn start_run(d: &Daemon, script: &str) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = gantry(d)
        .args(["run", "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn wait_line(rx: &mpsc::Receiver<String>, want: &str) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200))
            && line.contains(want)
        {
            return;
        }
    }
    panic!("no line containing {want:?}");
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "gantry run did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn only_job(d: &Daemon) -> Value {
    let (_, jobs) = d.get("/v1/jobs");
    jobs.as_array().unwrap()[0].clone()
}

#[test]
fn ctrl_c_ends_an_interactive_job_and_a_vanished_client_cancels_it() {
    let d = Daemon::start(1);
    let (mut child, lines) = start_run(&d, "echo started; exec sleep 120");
    wait_line(&lines, "started");
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(130), "killed by the forwarded SIGINT");
    let id = id_of(&only_job(&d));
    let job = d.wait_for("the job to end", WAIT, || {
        let j = d.job(id);
        (j["state"] == "failed").then_some(j)
    });
    assert_eq!(job["exit_code"], 130, "{job}");

    let (mut child, lines) = start_run(&d, "echo up; exec sleep 120");
    wait_line(&lines, "up");
    child.kill().unwrap();
    child.wait().unwrap();
    let id2 = d.wait_for("the second job", WAIT, || {
        let j = only_job(&d);
        (id_of(&j) != id).then(|| id_of(&j))
    });
    let job = d.wait_state(id2, "cancelled");
    assert_eq!(job["end_reason"], "cancelled", "{job}");
}

#[test]
fn an_array_runs_at_most_its_limit_and_every_index_once() {
    let d = Daemon::start(8);
    let mut spec = d.shell_job("sweep", 1, 0, "echo index=$GANTRY_ARRAY_INDEX; sleep 0.3");
    spec["array"] = json!({"indices": (0..20).collect::<Vec<u32>>(), "max_running": 4});
    let (status, body) = d.post("/v1/jobs", &spec);
    assert_eq!(status, 201, "{body}");
    let ids: Vec<u64> = body["array_job_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 20, "{body}");
    let mut most = 0;
    let mut saw_reason = false;
    d.wait_for("every member to succeed", Duration::from_secs(300), || {
        let (_, jobs) = d.get("/v1/jobs?limit=100");
        let jobs = jobs.as_array().unwrap().clone();
        let running = jobs.iter().filter(|j| j["state"] == "running").count();
        most = most.max(running);
        saw_reason |= jobs.iter().any(|j| {
            j["state"] == "pending"
                && j["reason"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("at most 4"))
        });
        jobs.iter().all(|j| j["state"] == "succeeded").then_some(())
    });
    assert!(most <= 4, "at most 4 members ran at once, saw {most}");
    assert!(most >= 2, "members ran side by side, saw {most}");
    assert!(saw_reason, "a held member says why it waits");
    let mut indices: Vec<u64> = ids
        .iter()
        .map(|id| {
            let (_, log) = d.get_text(&format!("/v1/jobs/{id}/logs"));
            log.trim().trim_start_matches("index=").parse().unwrap()
        })
        .collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..20).collect::<Vec<u64>>());
}

#[test]
fn dependencies_wait_run_or_are_cancelled_with_a_reason() {
    let d = Daemon::start(2);
    let first = d.submit(&d.blocking_job("first", 1, 0));
    let mut after_ok = d.shell_job("after-ok", 1, 0, "echo ran");
    after_ok["dependencies"] = json!([{"kind": "afterok", "job": first}]);
    let after_ok = d.submit(&after_ok);
    let mut after_not_ok = d.shell_job("after-not-ok", 1, 0, "echo ran");
    after_not_ok["dependencies"] = json!([{"kind": "afternotok", "job": first}]);
    let after_not_ok = d.submit(&after_not_ok);

    let waiting = d.wait_for("the dependency reason", WAIT, || {
        let j = d.job(after_ok);
        j["reason"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("afterok:{first}")))
            .then_some(j)
    });
    assert_eq!(waiting["state"], "pending", "{waiting}");
    d.release(first);
    d.wait_state(first, "succeeded");
    d.wait_state(after_ok, "succeeded");
    let cancelled = d.wait_state(after_not_ok, "cancelled");
    assert_eq!(
        cancelled["end_reason"], "dependency-never-satisfied",
        "{cancelled}"
    );
    assert!(
        cancelled["reason"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("can never be satisfied")),
        "{cancelled}"
    );

    let mut unknown = d.shell_job("x", 1, 0, "true");
    unknown["dependencies"] = json!([{"kind": "afterok", "job": 999_999}]);
    let (status, body) = d.post("/v1/jobs", &unknown);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "dependencies[0].job", "{body}");
}

/// Rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects and sends its rank
/// and world size: the rendezvous shape torchrun uses, standard library only.
const RENDEZVOUS: &str = r#"
import os, socket, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print("env", rank, world, os.environ["LOCAL_RANK"], os.environ["LOCAL_WORLD_SIZE"], os.environ["NODE_RANK"], addr, port, os.environ["GANTRY_NODELIST"], flush=True)
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(world); s.settimeout(30)
    seen = set()
    while len(seen) < world - 1:
        c, _ = s.accept(); r, w = c.recv(64).decode().split(); seen.add(int(r))
        assert int(w) == world; c.sendall(b"ok"); c.close()
    print("rank0 saw", sorted(seen), flush=True)
else:
    deadline = time.time() + 30
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(0.1)
    c.sendall(f"{rank} {world}".encode()); assert c.recv(2) == b"ok"
    print("joined", rank, flush=True)
"#;

#[test]
fn a_gang_gets_a_consistent_rendezvous_and_connects_to_rank_0() {
    let d = Daemon::start(2);
    let id = d.submit(&json!({
        "name": "gang",
        "argv": ["python3", "-c", RENDEZVOUS],
        "tasks": tasks(2, 1),
    }));
    let job = d.wait_state(id, "succeeded");
    let logs: Vec<String> = (0..2)
        .map(|t| d.get_text(&format!("/v1/jobs/{id}/logs?task={t}")).1)
        .collect();
    assert!(logs[0].contains("rank0 saw [1]"), "{logs:?}");
    assert!(logs[1].contains("joined 1"), "{logs:?}");
    let env: Vec<Vec<&str>> = logs
        .iter()
        .map(|l| l.lines().next().unwrap().split(' ').collect())
        .collect();
    // env RANK WORLD LOCAL_RANK LOCAL_WORLD NODE_RANK ADDR PORT NODELIST
    assert_eq!(env[0][1..6], ["0", "2", "0", "2", "0"], "{logs:?}");
    assert_eq!(env[1][1..6], ["1", "2", "1", "2", "0"], "{logs:?}");
    assert_eq!(env[0][6..], env[1][6..], "same address, port and node list");
    assert_eq!(
        job["rendezvous_port"].as_u64().map(|p| p.to_string()),
        Some(env[0][7].to_string()),
        "{job}"
    );
}

#[test]
fn the_warning_signal_comes_before_the_time_limit() {
    let d = Daemon::start(1);
    let mut spec = d.shell_job(
        "warned",
        1,
        0,
        r#"trap 'echo got-USR1 > "$OUTDIR/warned-$GANTRY_JOB_ID"' USR1; while true; do sleep 0.1; done"#,
    );
    spec["time_limit_s"] = json!(4);
    spec["signal"] = json!({"signal": "USR1", "before_s": 2});
    let id = d.submit(&spec);
    let marker = d.out_dir().join(format!("warned-{id}"));
    d.wait_for("the warning signal", WAIT, || marker.exists().then_some(()));
    let early = d.job(id);
    assert_eq!(
        early["state"], "running",
        "warned before the limit: {early}"
    );
    let job = d.wait_state(id, "timed_out");
    assert_eq!(job["end_reason"], "time-limit", "{job}");
}

#[test]
fn a_preempted_job_gets_its_signal_checkpoints_and_resumes_after_requeue() {
    // Without a token a request is a user: let users ask for the tier this test needs.
    let d = Daemon::start_with_config(2, "[limits]\nmax_user_tier = { \"*\" = 10 }\n");
    let pipeline = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "first-fit"},
        "preemption": {"plugin": "priority-preempt", "config": {"grace_s": 5}},
    });
    let (status, body) = d.put("/v1/policy", &pipeline);
    assert_eq!(status, 200, "{body}");
    let script = r#"ck="$OUTDIR/checkpoint-$GANTRY_JOB_ID"
if [ -e "$ck" ]; then echo "resumed from $(cat "$ck")"; exit 0; fi
trap 'echo step-42 > "$ck"; echo checkpointed; exit 0' USR1
echo first-run
touch "$OUTDIR/ready-$GANTRY_JOB_ID"
while true; do sleep 0.1; done"#;
    let mut low = d.shell_job("low", 1, 2, script);
    low["preemptible"] = json!(true);
    low["signal"] = json!({"signal": "USR1"});
    let low = d.submit(&low);
    // Evict only once its trap is set: a signal before that would end it unrecorded.
    let ready = d.out_dir().join(format!("ready-{low}"));
    d.wait_for("the job to set its trap", WAIT, || {
        ready.exists().then_some(())
    });
    let mut high = d.shell_job("high", 1, 2, "sleep 0.5");
    high["tier"] = json!(10);
    let high = d.submit(&high);
    d.wait_state(high, "succeeded");
    let job = d.wait_state(low, "succeeded");
    assert_eq!(job["requeues"], 1, "{job}");
    let (_, log) = d.get_text(&format!("/v1/jobs/{low}/logs"));
    assert!(log.contains("first-run"), "{log}");
    assert!(log.contains("checkpointed"), "{log}");
    assert!(log.contains("resumed from step-42"), "{log}");
}

#[test]
fn a_launch_that_fails_is_requeued_up_to_its_limit_then_fails_with_the_reason() {
    // The job's directory cannot be made (a file stands where it goes): every launch fails
    // before any process starts. (A job whose user cannot run here is refused at submit on a
    // one-node cluster, so the launch failure is made on disk.)
    let d = Daemon::start(1);
    let jobs = d.out_dir().parent().unwrap().join("data/jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(jobs.join("1"), "not a directory").unwrap();
    let mut spec = d.shell_job("no-dir", 1, 0, "true");
    spec["max_requeues"] = json!(2);
    let id = d.submit(&spec);
    assert_eq!(id, 1, "the job whose directory is blocked");
    let job = d.wait_state(id, "failed");
    assert_eq!(job["end_reason"], "launch-failed", "{job}");
    assert_eq!(job["requeues"], 2, "requeued twice, then failed: {job}");
    let message = job["reason"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot write the job script") && message.contains("limit 2"),
        "the reason names the cause and the limit: {job}"
    );
}

#[test]
fn an_evicted_job_past_its_requeue_limit_ends_preempted() {
    // Without a token a request is a user: let users ask for the tier this test needs.
    let d = Daemon::start_with_config(1, "[limits]\nmax_user_tier = { \"*\" = 5 }\n");
    let pipeline = json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "first-fit"},
        "preemption": {"plugin": "priority-preempt", "config": {"grace_s": 1}},
    });
    let (status, body) = d.put("/v1/policy", &pipeline);
    assert_eq!(status, 200, "{body}");
    let mut low = d.blocking_job("low", 1, 1);
    low["preemptible"] = json!(true);
    low["max_requeues"] = json!(0);
    let low = d.submit(&low);
    d.wait_state(low, "running");
    let mut high = d.shell_job("high", 1, 1, "true");
    high["tier"] = json!(5);
    let high = d.submit(&high);
    let job = d.wait_state(low, "preempted");
    assert_eq!(job["end_reason"], "preempted", "{job}");
    assert!(
        job["reason"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not requeued") && m.contains("limit 0")),
        "{job}"
    );
    d.wait_state(high, "succeeded");
}
