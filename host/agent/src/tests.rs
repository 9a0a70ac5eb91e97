//! Tests of the agent's task table with real processes: launches go through the real shim
//! (this test binary re-executed as the shim, see `shim_entry`), a key starts at most once
//! (replayed, concurrent), ends and acknowledgements, and the restart scan. Every wait is
//! bounded and polled.
//!
//! Owns only tests; the HTTP side is in `tests_http.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tasks::{ACKED, TaskTable};
use gantry_api::cluster::{LaunchRequest, PROTOCOL_VERSION, TaskKey};
use gantry_node::executor::{Executor, TaskExit};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Not a test: when this test binary is re-executed as the task shim, acts as it.
#[test]
fn shim_entry() {
    gantry_node::executor::test_shim::act_as_shim_if_asked();
}

/// A script that runs the real shim: this test binary, filtered to `shim_entry`.
fn real_shim(dir: &Path) -> std::path::PathBuf {
    let module = module_path!().split_once("::").unwrap().1;
    gantry_node::executor::test_shim::real_shim(dir, &format!("{module}::shim_entry"))
}

/// Bound of every wait here.
pub(super) const WAIT: Duration = Duration::from_secs(10);

/// A table under `dir` with GPUs 0 and 1 whose executor's ends are fed into it.
pub(super) fn table(dir: &Path) -> Arc<TaskTable> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let executor = Executor::new(real_shim(dir), tx);
    let table = Arc::new(
        TaskTable::new(
            dir.join("agent-tasks"),
            executor,
            [0, 1].into_iter().collect(),
            Duration::from_millis(500),
        )
        .unwrap(),
    );
    let fed = table.clone();
    tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            fed.task_ended(&event);
        }
    });
    table
}

pub(super) fn key(run: u64) -> TaskKey {
    TaskKey {
        job: 7,
        task: 0,
        run,
    }
}

pub(super) fn request(key: TaskKey, argv: &[&str]) -> LaunchRequest {
    LaunchRequest {
        protocol: PROTOCOL_VERSION,
        key,
        argv: argv.iter().map(|s| (*s).to_string()).collect(),
        script: None,
        env: vec![],
        workdir: None,
        gpus: vec![1],
        cpu_milli: 1000,
        memory_mib: 256,
        user: "nobody-in-particular".into(),
        anonymous: false,
        input: gantry_api::task::TaskInput::None,
        stdout_file: None,
        stderr_file: None,
        image: None,
        mounts: Vec::new(),
    }
}

/// SIGKILLs a process group when a test ends, so a failing test leaves no process.
pub(super) struct GroupGuard(pub u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        gantry_node::sys::kill_group(self.0);
    }
}

pub(super) async fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

/// Launches through a blocking thread, as the server does; retries while the freshly
/// written shim script is "text file busy" (another test thread forked while it was open).
pub(super) async fn launch(
    table: &Arc<TaskTable>,
    request: &LaunchRequest,
) -> gantry_api::cluster::LaunchReply {
    let deadline = Instant::now() + WAIT;
    loop {
        let (t, r) = (table.clone(), request.clone());
        match tokio::task::spawn_blocking(move || t.launch(&r))
            .await
            .unwrap()
        {
            Err(super::tasks::TaskError::Launch { source, .. })
                if source.to_string().contains("busy") && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other.unwrap(),
        }
    }
}

fn ended_exit(table: &TaskTable, key: TaskKey) -> Option<TaskExit> {
    table
        .report()
        .1
        .into_iter()
        .find(|e| e.key == key)
        .map(|e| e.exit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_starts_once_even_when_replayed_or_concurrent_and_a_new_run_starts_anew() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path());
    let first = launch(&table, &request(key(1), &["sleep", "30"])).await;
    let _g1 = GroupGuard(first.pid);
    assert!(!first.replayed && first.pid > 1 && first.ended.is_none());
    let again = launch(&table, &request(key(1), &["sleep", "30"])).await;
    assert_eq!(
        (again.pid, again.replayed, again.ended),
        (first.pid, true, None)
    );

    // Two launches of a new key at once: one starts it, the other is a replay.
    let second = request(key(2), &["sleep", "30"]);
    let (a, b) = tokio::join!(launch(&table, &second), launch(&table, &second));
    let _g2 = GroupGuard(a.pid);
    assert_eq!(a.pid, b.pid, "one process for one key");
    assert!(
        a.replayed != b.replayed,
        "exactly one launch started it: {a:?} {b:?}"
    );
    assert_ne!(a.pid, first.pid, "another run is another process");

    let (running, ended) = table.report();
    let mut keys: Vec<_> = running.iter().map(|r| r.key).collect();
    keys.sort();
    assert_eq!(keys, vec![key(1), key(2)]);
    assert!(ended.is_empty());
    let task_dirs = std::fs::read_dir(dir.path().join("agent-tasks"))
        .unwrap()
        .count();
    assert_eq!(task_dirs, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_is_reported_until_acknowledged_and_replays_never_restart_it() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path());
    let mut req = request(key(5), &[]);
    req.script = Some("echo from-script; exit 3\n".into());
    let started = launch(&table, &req).await;
    let _g = GroupGuard(started.pid);
    assert!(wait_until(|| ended_exit(&table, key(5)).is_some()).await);
    assert_eq!(ended_exit(&table, key(5)), Some(TaskExit::Exited(3)));
    let run_dir = table.dir(key(5));
    let log = std::fs::read_to_string(TaskTable::log_path(&run_dir)).unwrap();
    assert!(log.contains("from-script"), "log: {log}");

    let replay = launch(&table, &req).await;
    assert!(replay.replayed);
    assert_eq!(replay.pid, started.pid);
    assert_eq!(replay.ended.map(|e| e.exit), Some(TaskExit::Exited(3)));

    table.acknowledge(&[key(5)]);
    assert!(run_dir.join(ACKED).exists());
    assert!(table.report().1.is_empty(), "forgotten once acknowledged");
    let late = launch(&table, &req).await;
    assert!(late.replayed, "an acknowledged run is not started again");
    assert_eq!(late.ended.map(|e| e.exit), Some(TaskExit::Exited(3)));
    assert_eq!(late.pid, started.pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_launches_name_their_field_and_leave_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let table = table(dir.path());
    let mut old = request(key(1), &["true"]);
    old.protocol = PROTOCOL_VERSION + 1;
    let e = table.launch(&old).unwrap_err();
    assert_eq!((e.status(), e.field()), (409, Some("protocol")));
    let e = table.launch(&request(key(1), &[])).unwrap_err();
    assert_eq!((e.status(), e.field()), (400, Some("argv")));
    let mut gpu = request(key(1), &["true"]);
    gpu.gpus = vec![0, 5];
    let e = table.launch(&gpu).unwrap_err();
    assert_eq!((e.status(), e.field()), (400, Some("gpus")));
    assert!(e.to_string().contains("GPU 5"), "{e}");
    assert_eq!(std::fs::read_dir(&table.root).unwrap().count(), 0);
}

/// A stand-in for a shim that outlived the agent: a process of the agent's account whose
/// command line carries the exit path (as the real shim's does), leading its own session.
fn fake_survivor(exit_path: &Path) -> std::process::Child {
    let mut command = std::process::Command::new("sh");
    command.args(["-c", "sleep 30; true"]).arg(exit_path);
    gantry_node::process_hygiene::in_new_session(&mut command)
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_adopts_survivors_reports_ends_and_losses_and_skips_acknowledged_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("agent-tasks");
    let make = |k: TaskKey| {
        let d = root.join(k.to_string());
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (alive, recorded, lost, acked) = (key(1), key(2), key(3), key(4));
    let mut survivor = fake_survivor(&TaskTable::exit_path(&make(alive)));
    let _g = GroupGuard(survivor.id());
    let record =
        r#"{"exit":{"Exited":3},"usage":{"cpu_ms":5,"memory_peak_mib":2,"oom_killed":false}}"#;
    std::fs::write(TaskTable::exit_path(&make(recorded)), record).unwrap();
    make(lost);
    let acked_dir = make(acked);
    std::fs::write(TaskTable::exit_path(&acked_dir), record).unwrap();
    std::fs::write(acked_dir.join(ACKED), "").unwrap();
    std::fs::create_dir_all(root.join("not-a-task")).unwrap();

    let table = table(dir.path());
    let found = table.recover().unwrap();
    assert_eq!((found.adopted, found.ended), (1, 2));
    let (running, ended) = table.report();
    assert_eq!(running.len(), 1);
    assert_eq!((running[0].key, running[0].pid), (alive, survivor.id()));
    let ends: Vec<_> = ended.iter().map(|e| (e.key, e.exit)).collect();
    assert_eq!(
        ends,
        vec![(recorded, TaskExit::Exited(3)), (lost, TaskExit::Lost)]
    );
    assert_eq!(ended[0].usage.cpu_ms, 5, "usage read from the record");

    // The adopted task's end reaches the table through the executor.
    survivor.kill().unwrap();
    survivor.wait().unwrap();
    assert!(wait_until(|| ended_exit(&table, alive).is_some()).await);
    assert_eq!(ended_exit(&table, alive), Some(TaskExit::Lost));
}
