//! Multi-node mode end to end: a `gantry serve` controller that runs no tasks itself
//! (`[cluster] local_node = false`) and real `gantry agent`s on 127.0.0.1 with fake GPUs.
//! A gang spans two agents with consistent ranks and a real Python rendezvous across them;
//! SIGKILL of an agent marks its node down, stops the rest of the gang and requeues it onto
//! the other agents, and the restarted agent's orphaned task is stopped; SIGKILL of the
//! controller leaves tasks running and each end is recorded once; a wrong token is refused;
//! a replayed launch starts nothing and an unwanted one is stopped; a task (as its user, as
//! on a real node) cannot reach the cluster token: not in its environment, nor in any
//! process's, nor in the config files or data directories.
//!
//! Jobs here record their environment per run (`env-<job>-<rank>-<requeue count>`), append
//! their shell's pid to `starts-<job>-<rank>` each time a task starts, and wait for
//! `release-<job>-<requeue count>`: a test releases one run of a job, never an orphaned
//! older run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::{Agent, RENDEZVOUS, Relay, node};
use gantry_e2e::root::{open_dir, require_root};
use gantry_e2e::{Daemon, WAIT, gpu_set, process_exists, tasks};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The cluster token of these tests (at least 16 bytes).
const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
const HEARTBEAT_MS: u64 = 200;
const DOWN_AFTER_MS: u64 = 1500;
/// Agents' kill grace (their config) plus slack: bound for a stopped task to be gone.
const STOP_BOUND: Duration = Duration::from_secs(15);

/// Records the run's environment, counts starts, and waits for this run's release file.
const RUN_SCRIPT: &str = r#"run="$GANTRY_JOB_ID-$RANK-$GANTRY_REQUEUE_COUNT"
echo "$$" >> "$OUTDIR/starts-$GANTRY_JOB_ID-$RANK"
{ echo "TASK_SHELL_PID=$$"; env; } > "$OUTDIR/env-$run.tmp" && mv "$OUTDIR/env-$run.tmp" "$OUTDIR/env-$run"
while [ ! -e "$OUTDIR/release-$GANTRY_JOB_ID-$GANTRY_REQUEUE_COUNT" ]; do sleep 0.05; done"#;

/// A controller that runs tasks only on agents, with fast heartbeats.
fn controller() -> Daemon {
    Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = {HEARTBEAT_MS}\nnode_down_after_ms = {DOWN_AFTER_MS}\n"
        ),
    )
}

/// Agents `node-a`, `node-b`, ... with 4 GPUs each, joined to `controller_url`.
fn agents(d: &Daemon, controller_url: &str, count: usize) -> Vec<Agent> {
    ["node-a", "node-b", "node-c"][..count]
        .iter()
        .map(|name| Agent::start(d, controller_url, name, 4, TOKEN))
        .collect()
}

/// A job of `count` tasks × `gpus` GPUs running [`RUN_SCRIPT`].
fn run_job(d: &Daemon, name: &str, count: u32, gpus: u32, requeue: bool) -> Value {
    let mut spec = d.shell_job(name, count, gpus, RUN_SCRIPT);
    spec["requeue"] = json!(requeue);
    spec
}

/// The environment rank `rank` of run `run` (requeue count) of job `id` recorded.
fn run_env(d: &Daemon, id: u64, rank: u32, run: u32) -> BTreeMap<String, String> {
    let path = d.out_dir().join(format!("env-{id}-{rank}-{run}"));
    let text = d.wait_for(
        &format!("rank {rank} of run {run} of job {id} to start"),
        WAIT,
        || fs::read_to_string(&path).ok(),
    );
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The shell pid a run's task recorded.
fn shell_pid(env: &BTreeMap<String, String>) -> i32 {
    env["TASK_SHELL_PID"].parse().unwrap()
}

/// How many times rank `rank` of job `id` started (all runs).
fn starts(d: &Daemon, id: u64, rank: u32) -> usize {
    fs::read_to_string(d.out_dir().join(format!("starts-{id}-{rank}")))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Lets run `run` of job `id` exit 0.
fn release_run(d: &Daemon, id: u64, run: u32) {
    fs::write(d.out_dir().join(format!("release-{id}-{run}")), b"").unwrap();
}

/// The node of each task of a job record.
fn task_nodes(job: &Value) -> Vec<String> {
    job["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["node"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `what` holds for job `id` (panics at once if it ends otherwise).
fn wait_job(d: &Daemon, id: u64, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    d.wait_for(&format!("job {id}: {what}"), WAIT, || {
        let job = d.job(id);
        if ok(&job) {
            return Some(job);
        }
        let state = job["state"].as_str().unwrap_or_default();
        assert!(
            !gantry_e2e::TERMINAL.contains(&state),
            "job {id} ended before {what}: {job}\n{}",
            d.log_tail()
        );
        None
    })
}

/// The job's events of `kind`.
fn events(d: &Daemon, id: u64, kind: &str) -> Vec<Value> {
    let (status, all) = d.get(&format!("/v1/jobs/{id}/events"));
    assert_eq!(status, 200, "{all}");
    all.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// Asserts job `id` succeeded exactly once: one `succeeded` event and one accounting record
/// per task, each task index once, started when its task's run started.
fn assert_succeeded_once(d: &Daemon, id: u64, task_count: usize) {
    let job = d.job(id);
    assert_eq!(job["state"], "succeeded", "{job}");
    let ends = events(d, id, "succeeded");
    assert_eq!(ends.len(), 1, "job {id} ended more than once: {ends:?}");
    let (status, acct) = d.get(&format!("/v1/accounting?job={id}"));
    assert_eq!(status, 200, "{acct}");
    let records = acct["records"].as_array().unwrap();
    assert_eq!(records.len(), task_count, "job {id}: {acct}");
    let mut indices: Vec<u64> = records
        .iter()
        .map(|r| r["task_index"].as_u64().unwrap())
        .collect();
    indices.sort_unstable();
    assert_eq!(
        indices,
        (0..task_count as u64).collect::<Vec<_>>(),
        "{acct}"
    );
    for r in records {
        let t = &job["tasks"][r["task_index"].as_u64().unwrap() as usize];
        assert_eq!(r["start_ms"], t["started_ms"], "{r} vs {job}");
    }
}

/// Waits until process `pid` is gone.
fn wait_gone(d: &Daemon, what: &str, pid: i32) {
    d.wait_for(&format!("{what} (pid {pid}) to end"), STOP_BOUND, || {
        (!process_exists(pid)).then_some(())
    });
}

#[test]
fn gang_spans_two_agents_with_consistent_ranks_and_a_python_rendezvous() {
    let d = controller();
    let agents = agents(&d, d.url(), 3);
    let id = d.submit(&run_job(&d, "gang", 2, 4, false));
    let env: Vec<_> = (0..2).map(|r| run_env(&d, id, r, 0)).collect();
    let job = wait_job(&d, id, "running with pids", |j| {
        j["state"] == "running"
            && j["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["pid"].is_u64())
    });
    let nodes = task_nodes(&job);
    assert_ne!(nodes[0], nodes[1], "4-GPU tasks on 4-GPU agents: {job}");
    for (rank, e) in env.iter().enumerate() {
        let ctx = format!("rank {rank}: {e:?}");
        assert_eq!(e["RANK"], rank.to_string(), "{ctx}");
        assert_eq!(e["WORLD_SIZE"], "2", "{ctx}");
        assert_eq!(e["NODE_RANK"], rank.to_string(), "{ctx}");
        assert_eq!(e["LOCAL_RANK"], "0", "{ctx}");
        assert_eq!(e["LOCAL_WORLD_SIZE"], "1", "{ctx}");
        assert_eq!(e["GANTRY_NODE"], nodes[rank], "{ctx}");
        assert_eq!(e["GANTRY_NODELIST"], nodes.join(","), "{ctx}");
        assert_eq!(gpu_set(&e["CUDA_VISIBLE_DEVICES"]), [0, 1, 2, 3], "{ctx}");
    }
    assert_eq!(env[0]["MASTER_ADDR"], "127.0.0.1", "rank 0's node address");
    assert_eq!(env[0]["MASTER_ADDR"], env[1]["MASTER_ADDR"]);
    assert_eq!(env[0]["MASTER_PORT"], env[1]["MASTER_PORT"]);
    assert_eq!(
        job["rendezvous_port"]
            .as_u64()
            .map(|p| p.to_string())
            .as_ref(),
        Some(&env[0]["MASTER_PORT"]),
        "{job}"
    );
    for a in &agents {
        let n = node(&d, a.name()).unwrap();
        let busy = nodes.iter().any(|x| x == a.name());
        for gpu in n["gpus"].as_array().unwrap() {
            let (milli, jobs) = if busy {
                (1000, json!([[id, 1000]]))
            } else {
                (0, json!([]))
            };
            assert_eq!(gpu["allocated_milli"], milli, "{n}");
            assert_eq!(gpu["jobs"], jobs, "{n}");
        }
    }
    release_run(&d, id, 0);
    d.wait_state(id, "succeeded");
    assert_succeeded_once(&d, id, 2);

    // A real rendezvous between the two ranks, across two agents.
    let rdv = d.submit(&json!({
        "name": "rendezvous",
        "argv": ["python3", "-c", RENDEZVOUS],
        "tasks": tasks(2, 4),
    }));
    let done = d.wait_state(rdv, "succeeded");
    let nodes = task_nodes(&done);
    assert_ne!(nodes[0], nodes[1], "{done}");
    let logs: Vec<String> = (0..2)
        .map(|t| {
            let (status, text) = d.get_text(&format!("/v1/jobs/{rdv}/logs?task={t}"));
            assert_eq!(status, 200, "{text}");
            text
        })
        .collect();
    assert!(
        logs[0].contains(&format!(
            "rank0 on {} heard: rank 1 of 2 on {}",
            nodes[0], nodes[1]
        )),
        "{logs:?}"
    );
    assert!(
        logs[1].contains(&format!(
            "rank1 on {} heard: welcome from {}",
            nodes[1], nodes[0]
        )),
        "{logs:?}"
    );
}

#[test]
fn sigkill_of_an_agent_requeues_the_gang_which_then_runs_on_the_others() {
    let d = controller();
    let mut agents = agents(&d, d.url(), 3);
    let id = d.submit(&run_job(&d, "requeued-gang", 2, 4, true));
    let first: Vec<_> = (0..2).map(|r| run_env(&d, id, r, 0)).collect();
    let job = wait_job(&d, id, "running", |j| j["state"] == "running");
    let nodes = task_nodes(&job);
    let victim = agents.iter().position(|a| a.name() == nodes[1]).unwrap();
    let (survivor_pid, orphan_pid) = (shell_pid(&first[0]), shell_pid(&first[1]));

    // SIGKILL rank 1's agent: its node is down within the configured time, with a reason.
    let killed_at = Instant::now();
    agents[victim].sigkill();
    let down = agents[victim].poll(
        "the killed agent's node to be down",
        Duration::from_millis(DOWN_AFTER_MS) + WAIT,
        &d,
        || node(&d, &nodes[1]).filter(|n| n["state"] == "down"),
    );
    let took = killed_at.elapsed();
    assert!(
        took <= Duration::from_millis(DOWN_AFTER_MS + 3000),
        "down after {took:?}, configured {DOWN_AFTER_MS} ms: {down}"
    );
    let reason = down["down_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("heartbeat"), "{down}");

    // The rest of the gang is stopped; the orphan on the dead agent's node runs on.
    wait_gone(&d, "rank 0 of the broken gang", survivor_pid);
    assert!(
        process_exists(orphan_pid),
        "the orphan needs no agent to run"
    );

    // Requeued, then started again on the two agents still up.
    let again = wait_job(&d, id, "requeued and running again", |j| {
        j["requeues"] == 1 && j["state"] == "running"
    });
    assert_eq!(events(&d, id, "requeued").len(), 1, "{again}");
    let second: Vec<_> = (0..2).map(|r| run_env(&d, id, r, 1)).collect();
    let renodes = task_nodes(&again);
    assert_ne!(renodes[0], renodes[1], "{again}");
    assert!(
        !renodes.contains(&nodes[1]),
        "ran on the down node: {again}"
    );
    for (rank, e) in second.iter().enumerate() {
        assert_eq!(e["GANTRY_NODE"], renodes[rank], "{e:?}");
        assert_eq!(e["GANTRY_REQUEUE_COUNT"], "1", "{e:?}");
    }
    release_run(&d, id, 1);
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["requeues"], 1, "{done}");
    assert_eq!(events(&d, id, "succeeded").len(), 1);
    assert!(process_exists(orphan_pid), "nothing reached the orphan yet");

    // The agent comes back: its node is up, and the controller stops the orphan.
    agents[victim].restart(&d);
    wait_gone(&d, "the orphaned rank 1 of the first run", orphan_pid);
    let back = node(&d, &nodes[1]).unwrap();
    assert_eq!(back["state"], "up", "{back}");
    assert_eq!(back["down_reason"], Value::Null, "{back}");
}

#[test]
fn controller_sigkill_keeps_tasks_and_records_each_end_once() {
    let mut d = controller();
    // The daemon harness restarts the controller on a new port, while agents keep the URL
    // they were started with (as real agents keep --controller). So agents are given a
    // relay's fixed URL, pointed at the new controller after the restart: to the agents the
    // controller is unreachable for a while and then back at the same URL. (Restarting the
    // agents with a new URL instead would test agent restarts, not a controller restart.)
    let relay = Relay::start(d.url());
    let agents = agents(&d, &relay.url(), 3);
    let gang = d.submit(&run_job(&d, "gang", 2, 2, false));
    let singles: Vec<u64> = (0..3)
        .map(|i| d.submit(&run_job(&d, &format!("single-{i}"), 1, 1, false)))
        .collect();
    let mut ranks: Vec<(u64, u32)> = vec![(gang, 0), (gang, 1)];
    ranks.extend(singles.iter().map(|&s| (s, 0)));
    let pids: Vec<i32> = ranks
        .iter()
        .map(|&(id, r)| shell_pid(&run_env(&d, id, r, 0)))
        .collect();
    let before: BTreeMap<u64, Value> = ranks
        .iter()
        .map(|&(id, _)| {
            let job = wait_job(&d, id, "running with pids", |j| {
                j["state"] == "running"
                    && j["tasks"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|t| t["pid"].is_u64())
            });
            (id, job)
        })
        .collect();

    d.restart_after_sigkill();
    relay.retarget(d.url());
    for a in &agents {
        a.wait_up(&d);
    }
    for (&(id, rank), &pid) in ranks.iter().zip(&pids) {
        assert!(
            process_exists(pid),
            "job {id} rank {rank} died with the controller"
        );
        assert_eq!(
            starts(&d, id, rank),
            1,
            "job {id} rank {rank} started again"
        );
    }
    for (id, was) in &before {
        let now = d.job(*id);
        assert_eq!(now["state"], "running", "{now}");
        assert_eq!(now["requeues"], 0, "{now}");
        for (t, w) in now["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .zip(was["tasks"].as_array().unwrap())
        {
            assert_eq!(
                (&t["node"], &t["pid"], &t["started_ms"]),
                (&w["node"], &w["pid"], &w["started_ms"]),
                "job {id} changed across the restart: {now} vs {was}"
            );
        }
    }

    for id in before.keys() {
        release_run(&d, *id, 0);
    }
    for id in before.keys() {
        d.wait_state(*id, "succeeded");
    }
    for (id, was) in &before {
        assert_succeeded_once(&d, *id, was["tasks"].as_array().unwrap().len());
    }
    for (&(id, rank), &pid) in ranks.iter().zip(&pids) {
        assert!(!process_exists(pid), "job {id} rank {rank} still runs");
        assert_eq!(
            starts(&d, id, rank),
            1,
            "job {id} rank {rank} started again"
        );
    }
}

/// A heartbeat body for node `name` speaking `protocol`.
fn heartbeat(name: &str, protocol: u32) -> Value {
    json!({
        "protocol": protocol,
        "node": {"name": name, "cpu_milli": 1000, "memory_mib": 1024, "gpus": [],
                 "labels": {}, "gpu_source": "config"},
        "agent_url": "http://127.0.0.1:9",
        "addr": "127.0.0.1",
        "running": [],
        "ended": []
    })
}

#[test]
fn an_agent_with_a_wrong_token_is_refused() {
    let d = controller();
    let good = Agent::start(&d, d.url(), "node-a", 4, TOKEN);
    let mut bad = Agent::spawn(d.url(), "intruder", 4, "not-the-cluster-token-0123456789");
    let status = bad.wait_exit(WAIT);
    assert!(!status.success(), "{status}\n{}", bad.log_tail());
    let err = bad.stderr();
    assert!(err.contains("token") && err.contains("401"), "{err}");
    assert!(node(&d, "intruder").is_none(), "a refused agent is listed");
    assert!(node(&d, "node-a").is_some());

    // A second agent under a name whose agent is alive is refused (409), and the node keeps
    // its agent.
    let mut twin = Agent::spawn(d.url(), "node-a", 4, TOKEN);
    let status = twin.wait_exit(WAIT);
    assert!(!status.success(), "{status}\n{}", twin.log_tail());
    let err = twin.stderr();
    assert!(err.contains("in use") && err.contains("node-a"), "{err}");
    let listed = node(&d, "node-a").expect("node-a");
    assert_eq!(listed["agent"], good.url(), "{listed}");

    // The route itself: 401 with a JSON body without or with a wrong token; 409 naming the
    // protocol for another protocol version with the right one.
    let post = |token: Option<&str>, body: &Value| {
        let bytes = body.to_string().into_bytes();
        let (status, text) = d.request_as(
            token,
            "POST",
            "/cluster/v1/heartbeat",
            Some((&bytes, "application/json")),
        );
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("heartbeat answer ({status}) is not JSON ({e}): {text:?}"));
        (status, value)
    };
    for token in [None, Some("not-the-cluster-token-0123456789")] {
        let (status, body) = post(token, &heartbeat("raw", 1));
        assert_eq!(status, 401, "{token:?}: {body}");
        assert!(
            body["error"].as_str().is_some_and(|e| e.contains("token")),
            "{body}"
        );
    }
    let other = gantry_api::cluster::PROTOCOL_VERSION + 1;
    let (status, body) = post(Some(TOKEN), &heartbeat("raw", other));
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["field"], "protocol", "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("protocol")),
        "{body}"
    );
    assert!(
        node(&d, "raw").is_none(),
        "a refused heartbeat registered a node"
    );
}

/// Processes that are task shims of job `id`'s task 0 on `agent` (any run).
fn shims_of(agent: &Agent, id: u64) -> Vec<i32> {
    let needle = format!("{}/agent-tasks/{id}.0.", agent.data_dir().display()).into_bytes();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            let shim = cmdline.windows(9).any(|w| w == b"task-shim");
            let ours = cmdline
                .windows(needle.len())
                .any(|w| w == needle.as_slice());
            (shim && ours).then_some(pid)
        })
        .collect()
}

#[test]
fn a_replayed_launch_does_not_start_a_second_task() {
    let d = controller();
    let agents = agents(&d, d.url(), 1);
    let agent = &agents[0];
    let id = d.submit(&run_job(&d, "replayed", 1, 1, false));
    let env = run_env(&d, id, 0, 0);
    let job = wait_job(&d, id, "running with a pid", |j| {
        j["state"] == "running" && j["tasks"][0]["pid"].is_u64()
    });
    let task = &job["tasks"][0];
    let (pid, run) = (
        task["pid"].as_u64().unwrap(),
        task["started_ms"].as_u64().unwrap(),
    );
    assert_eq!(task["node"], agent.name());
    let gpus: Vec<u64> = task["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["index"].as_u64().unwrap())
        .collect();
    let launch = |run: u64, argv: Value| {
        json!({
            "protocol": gantry_api::cluster::PROTOCOL_VERSION,
            "key": {"job": id, "task": 0, "run": run},
            "argv": argv,
            "env": [["OUTDIR", d.out_dir()], ["GANTRY_JOB_ID", id.to_string()], ["RANK", "0"],
                    ["GANTRY_REQUEUE_COUNT", "0"]],
            "gpus": gpus,
            "cpu_milli": 100,
            "memory_mib": 64,
            "user": job["spec"]["user"],
        })
    };

    // The controller speaks to the agent with the node's own credential.
    let credential = gantry_api::cluster_token::node_credential(TOKEN, agent.name());
    // The same key, twice: nothing new starts.
    let replay = launch(run, job["spec"]["argv"].clone());
    for attempt in 0..2 {
        let (status, reply) = agent.post("/agent/v1/launch", Some(&credential), &replay);
        assert_eq!(status, 200, "attempt {attempt}: {reply}");
        assert_eq!(reply["replayed"], true, "attempt {attempt}: {reply}");
        assert_eq!(reply["pid"], pid, "attempt {attempt}: {reply}");
        assert_eq!(reply["ended"], Value::Null, "attempt {attempt}: {reply}");
    }
    assert_eq!(
        shims_of(agent, id),
        [pid as i32],
        "one task process for the job"
    );
    assert_eq!(starts(&d, id, 0), 1, "the job's script ran once");
    assert!(process_exists(shell_pid(&env)));

    // A fresh key starts a task; the controller does not want it and has it stopped.
    let fresh = launch(
        run + 1,
        json!([
            "/bin/sh",
            "-c",
            "echo $$ > \"$OUTDIR/fresh-$GANTRY_JOB_ID\"; exec sleep 600"
        ]),
    );
    let (status, reply) = agent.post("/agent/v1/launch", Some(&credential), &fresh);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["replayed"], false, "{reply}");
    let fresh_pid = reply["pid"].as_u64().unwrap();
    assert_ne!(fresh_pid, pid, "{reply}");
    let run_dir = agent
        .data_dir()
        .join(format!("agent-tasks/{id}.0.{}", run + 1));
    assert!(run_dir.is_dir(), "no run directory {}", run_dir.display());
    wait_gone(&d, "the unwanted task", fresh_pid as i32);
    agent.poll("the unwanted task's end to be reported", WAIT, &d, || {
        run_dir.join("acked").exists().then_some(())
    });
    let still = d.job(id);
    assert_eq!(still["state"], "running", "{still}");
    assert_eq!(still["tasks"][0]["pid"], pid, "{still}");
    assert_eq!(still["tasks"][0]["started_ms"], run, "{still}");
    assert_eq!(shims_of(agent, id), [pid as i32]);

    release_run(&d, id, 0);
    d.wait_state(id, "succeeded");
    assert_succeeded_once(&d, id, 1);
    assert_eq!(starts(&d, id, 0), 1, "the job's script ran once");
}

/// What a task running as nobody looks through for the cluster token: every process's
/// environment and command line, the open files of the processes in `$PIDS`, the files in
/// `$FILES` and whatever it can list under `$DIRS`. Each regular file it can read is copied
/// into `$OUT/copies` (the test searches them); the paths it could not read go to
/// `$OUT/denied`.
const TOKEN_SCAN: &str = r#"set -u
mkdir "$OUT/copies"
id -u > "$OUT/uid"
scan() {
  # Pipes and sockets among the open files would block a read: only regular files.
  if [ -e "$1" ] && [ ! -f "$1" ]; then echo "$1" >> "$OUT/special"; return; fi
  name=$(printf %s "$1" | tr / %)
  if cat "$1" > "$OUT/copies/$name" 2>/dev/null; then echo "$1" >> "$OUT/read"
  else rm -f "$OUT/copies/$name"; echo "$1" >> "$OUT/denied"; fi
}
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline $FILES; do scan "$f"; done
for p in $PIDS; do
  for f in /proc/$p/fd/*; do scan "$f"; done
done
for d in $DIRS; do
  for f in $(find "$d" -type f 2>/dev/null); do scan "$f"; done
done
echo done > "$OUT/finished""#;

/// The processes, files and directories that hold the cluster token.
struct Holders {
    pids: Vec<u32>,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

/// Runs [`TOKEN_SCAN`] as nobody in a job of `d`'s (on node `node` when given) and asserts it
/// finds the token in a control file it may read (the scan is live) and nowhere else, having
/// tried, and been refused, each holder's environment and each holding file.
fn assert_token_out_of_reach(d: &Daemon, node: Option<&str>, holders: &Holders) {
    let canary = open_dir();
    let canary_file = canary.path().join("canary");
    fs::write(&canary_file, format!("token = {TOKEN:?}\n")).unwrap();
    fs::set_permissions(&canary_file, fs::Permissions::from_mode(0o644)).unwrap();
    let out = open_dir();
    let words = |paths: &mut dyn Iterator<Item = String>| paths.collect::<Vec<_>>().join(" ");
    let mut dirs = holders.dirs.clone();
    dirs.push(canary.path().to_path_buf());
    let spec = json!({
        "name": "curious",
        "user": "nobody",
        "argv": ["/bin/sh", "-c", TOKEN_SCAN],
        "workdir": out.path(),
        "env": {
            "OUT": out.path(),
            "DIRS": words(&mut dirs.iter().map(|p| p.display().to_string())),
            "FILES": words(&mut holders.files.iter().map(|p| p.display().to_string())),
            "PIDS": words(&mut holders.pids.iter().map(u32::to_string)),
        },
        "tasks": tasks(1, 1),
    });
    let id = d.submit(&spec);
    let done = d.wait_state(id, "succeeded");
    if let Some(node) = node {
        assert_eq!(task_nodes(&done), [node], "{done}");
    }
    let read = |name: &str| fs::read_to_string(out.path().join(name)).unwrap_or_default();
    assert_eq!(read("finished"), "done\n", "the scan ran to its end");
    assert_eq!(read("uid"), "65534\n", "the task runs as nobody");

    let mut holding: Vec<String> = fs::read_dir(out.path().join("copies"))
        .unwrap()
        .flatten()
        .filter(|e| {
            fs::read(e.path())
                .unwrap()
                .windows(TOKEN.len())
                .any(|w| w == TOKEN.as_bytes())
        })
        .map(|e| e.file_name().to_string_lossy().replace('%', "/"))
        .collect();
    holding.sort();
    let canary_name = canary_file.display().to_string();
    assert!(
        holding.contains(&canary_name),
        "the scan did not find the token in the control file {canary_name}: {holding:?}"
    );
    holding.retain(|p| *p != canary_name);
    assert!(
        holding.is_empty(),
        "a task reads the cluster token in {holding:?}"
    );
    // It tried the places that hold the token, and was refused.
    let denied = read("denied");
    eprintln!(
        "the task read {} files and was refused {}",
        read("read").lines().count(),
        denied.lines().count()
    );
    let environs = holders.pids.iter().map(|p| format!("/proc/{p}/environ"));
    let files = holders.files.iter().map(|p| p.display().to_string());
    for place in environs.chain(files) {
        assert!(
            denied.lines().any(|l| l == place),
            "the task was not refused {place}; refused: {denied}"
        );
    }
    let own = read("read");
    assert!(
        own.lines().any(|l| l.ends_with("/environ")),
        "the task read no environment at all (not even its own): {own}"
    );
}

#[test]
fn tasks_on_an_agent_cannot_reach_the_cluster_token() {
    require_root("tasks run as their user (nobody) on the agent, as on a real node");
    let d = controller();
    let agent = Agent::start_with(
        &d,
        d.url(),
        "node-a",
        4,
        TOKEN,
        "[execution]\nrun_as_user = true\n",
    );
    let controller_dir = d.out_dir().parent().unwrap().to_path_buf();
    let agent_dir = agent.data_dir().parent().unwrap().to_path_buf();
    let config = controller_dir.join("gantry.toml");
    assert!(
        fs::read_to_string(&config).unwrap().contains(TOKEN),
        "the controller's config holds the token"
    );
    let holders = Holders {
        // The agent has the token in its environment, the controller in its config.
        pids: vec![agent.pid(), d.pid()],
        files: vec![config, agent_dir.join("agent.toml")],
        dirs: vec![controller_dir, agent_dir],
    };
    assert_token_out_of_reach(&d, Some("node-a"), &holders);
}

#[test]
fn tasks_on_the_controllers_own_node_cannot_reach_the_cluster_token() {
    require_root("tasks run as their user (nobody), as on a real node");
    let d = Daemon::start_with_config(
        1,
        &format!("[cluster]\ntoken = \"{TOKEN}\"\n\n[execution]\nrun_as_user = true\n"),
    );
    let dir = d.out_dir().parent().unwrap().to_path_buf();
    let config = dir.join("gantry.toml");
    assert!(
        fs::read_to_string(&config).unwrap().contains(TOKEN),
        "the daemon's config holds the token"
    );
    let holders = Holders {
        pids: vec![d.pid()],
        files: vec![config],
        dirs: vec![dir],
    };
    assert_token_out_of_reach(&d, None, &holders);
}
