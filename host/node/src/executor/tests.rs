//! Tests of the executor with real processes: `launch` through the real shim (the test binary
//! re-executes itself as the shim, see `shim_entry`) and through a shell script that stands in for
//! it, `terminate`/`kill_now` on whole groups, and `adopt`. Every wait is bounded and polled.
//!
//! Owns only tests; the shim's in-process tests live in `shim.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::*;

pub(super) use super::test_shim::{SEP, SHIM_ARGS_ENV, write_script};
pub(super) const WAIT: Duration = Duration::from_secs(10);

/// Not a test: when the test binary is re-executed by the wrapper script, acts as the shim.
#[test]
fn shim_entry() {
    super::test_shim::act_as_shim_if_asked();
}

/// A script that runs the real shim: this test binary, filtered to `shim_entry`.
pub(crate) fn real_shim(dir: &Path) -> PathBuf {
    let module = module_path!().split_once("::").unwrap().1;
    super::test_shim::real_shim(dir, &format!("{module}::shim_entry"))
}

pub(super) fn spec(dir: &Path, argv: &[&str]) -> TaskLaunch {
    TaskLaunch {
        job_id: 7,
        task_index: 2,
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        env: vec![],
        workdir: None,
        log_path: dir.join("logs/job-7/task-2.log"),
        exit_path: dir.join("state/job-7/task-2.exit.json"),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mib: 1024,
        identity: None,
        input: TaskInput::None,
        stdout_file: None,
        stderr_file: None,
        image: None,
        mounts: Vec::new(),
    }
}

fn executor(shim: PathBuf) -> (Executor, UnboundedReceiver<TaskEvent>) {
    let (tx, rx) = unbounded_channel();
    (Executor::new(shim, tx), rx)
}

/// `launch`, retrying while the freshly written shim script is "text file busy" (another test
/// thread may have forked while it was open for writing).
pub(super) fn launch(exec: &Executor, l: &TaskLaunch) -> RunningTask {
    let deadline = Instant::now() + WAIT;
    loop {
        match exec.launch(l) {
            Err(ExecError::Spawn { source, .. })
                if source.raw_os_error() == Some(libc::ETXTBSY) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
}

/// SIGKILLs a task's process group when a test ends, so that a failing test leaves no process.
pub(super) struct GroupGuard(pub u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = signals::signal_group(self.0, libc::SIGKILL);
    }
}

/// Kills and reaps a directly started process when a test ends.
pub(super) struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) async fn next_event(rx: &mut UnboundedReceiver<TaskEvent>) -> TaskEvent {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no task event within the time limit")
        .expect("event channel closed")
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

pub(super) fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

pub(super) async fn wait_for_log(l: &TaskLaunch, needle: &str) {
    assert!(
        wait_until(|| read(&l.log_path).contains(needle)).await,
        "log never contained {needle:?}: {}",
        read(&l.log_path)
    );
}

#[tokio::test]
async fn launch_records_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let l = spec(dir.path(), &["sh", "-c", "exit 3"]);
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    assert!(task.pid > 1);
    let event = next_event(&mut rx).await;
    assert_eq!((event.job_id, event.task_index), (7, 2));
    assert_eq!(event.exit, TaskExit::Exited(3));
    assert!(read(&l.exit_path).starts_with(r#"{"exit":{"Exited":3},"usage":"#));
    assert!(
        event.usage.memory_peak_mib > 0,
        "the shim measured the tree: {:?}",
        event.usage
    );
}

#[tokio::test]
async fn launch_applies_env_workdir_and_captures_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    fs::create_dir(&work).unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let script =
        r#"echo "out:$GANTRY_T"; echo "err:$CUDA_VISIBLE_DEVICES" >&2; echo "cwd:$(pwd -P)""#;
    let mut l = spec(dir.path(), &["sh", "-c", script]);
    l.env = vec![
        ("GANTRY_T".into(), "hello".into()),
        ("CUDA_VISIBLE_DEVICES".into(), "1,3".into()),
    ];
    l.workdir = Some(work.clone());
    fs::create_dir_all(l.log_path.parent().unwrap()).unwrap();
    fs::write(&l.log_path, "from an earlier attempt\n").unwrap();
    launch(&exec, &l);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Exited(0));
    let log = read(&l.log_path);
    assert!(log.starts_with("from an earlier attempt\n"), "log: {log}");
    assert!(log.contains("out:hello\n"), "log: {log}");
    assert!(log.contains("err:1,3\n"), "log: {log}");
    let cwd = fs::canonicalize(&work).unwrap();
    assert!(
        log.contains(&format!("cwd:{}\n", cwd.display())),
        "log: {log}"
    );
}

#[tokio::test]
async fn launch_of_missing_command_reports_127() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let l = spec(dir.path(), &["gantry-no-such-command-xyz"]);
    launch(&exec, &l);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Exited(127));
    assert!(read(&l.log_path).contains("cannot start `gantry-no-such-command-xyz`"));
}

#[tokio::test]
async fn launch_rejects_empty_argv_and_missing_shim() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, _rx) = executor(dir.path().join("no-such-shim"));
    let empty = spec(dir.path(), &[]);
    assert!(matches!(exec.launch(&empty), Err(ExecError::EmptyArgv)));
    let l = spec(dir.path(), &["true"]);
    assert!(matches!(exec.launch(&l), Err(ExecError::Spawn { .. })));
}

#[test]
fn launch_outside_a_runtime_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, _rx) = executor(real_shim(dir.path()));
    let l = spec(dir.path(), &["true"]);
    assert!(matches!(exec.launch(&l), Err(ExecError::NoRuntime)));
}

/// Through a stand-in shim script: the command line protocol, the new process group, the
/// environment (the job's variables reach the command through the env file, never the shim's
/// own environment, which runs as root), the removal of a stale record, and the fallback to
/// the shim's own exit status.
#[tokio::test]
async fn launch_protocol_with_stand_in_shim() {
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("fake-shim");
    write_script(
        &shim,
        "#!/bin/sh\nd=$(dirname \"$0\")\nprintf '%s\\n' \"$@\" > \"$d/args.txt\"\n\
         echo \"$$ $(cut -d' ' -f5 /proc/$$/stat) ${GANTRY_T:-unset}\" > \"$d/proc.txt\"\nexit 42\n",
    );
    let (exec, mut rx) = executor(shim);
    let mut l = spec(dir.path(), &["prog", "a b", "--", "c"]);
    l.workdir = Some(dir.path().to_path_buf());
    l.env = vec![("GANTRY_T".into(), "v".into())];
    fs::create_dir_all(l.exit_path.parent().unwrap()).unwrap();
    fs::write(&l.exit_path, r#"{"exit":{"Exited":0}}"#).unwrap();
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Exited(42));

    let d = dir.path().display().to_string();
    let (e, lg) = (l.exit_path.display(), l.log_path.display());
    let env_file = l.exit_path.with_extension("env");
    let v = env_file.display();
    let argv_file = l.exit_path.with_extension("argv");
    let a = argv_file.display();
    // The job's arguments are in the command file, never on the shim's command line.
    let expected = format!(
        "task-shim\n--exit-file\n{e}\n--log\n{lg}\n--env-file\n{v}\n--workdir\n{d}\n--argv-file\n{a}\n--\n"
    );
    assert_eq!(read(&dir.path().join("args.txt")), expected);
    assert_eq!(
        super::command_file::read(&argv_file).unwrap(),
        ["prog", "a b", "--", "c"]
    );
    let p = task.pid;
    assert_eq!(
        read(&dir.path().join("proc.txt")),
        format!("{p} {p} unset\n")
    );
    let env = fs::read(&env_file).unwrap();
    assert!(
        env.split(|b| *b == 0).any(|entry| entry == b"GANTRY_T=v"),
        "the job's variable is in the command's env file"
    );
    assert!(l.log_path.parent().unwrap().is_dir(), "log dir created");
}

#[tokio::test]
async fn terminate_stops_a_plain_command_with_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let l = spec(dir.path(), &["sh", "-c", "echo ready; exec sleep 1000"]);
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "ready").await;
    exec.terminate(task.pid, Duration::from_secs(60));
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Signaled(15));
    // Only a shim that survived SIGTERM can have written this.
    assert!(read(&l.exit_path).starts_with(r#"{"exit":{"Signaled":15}"#));
}

/// A stop sent while the shim starts, or while its child joins the cgroups and switches
/// user before `execve`, still reaches the command as SIGTERM (not SIGKILL after the grace).
#[tokio::test]
async fn a_stop_sent_as_the_task_starts_ends_it_with_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    for delay_ms in [0, 0, 1, 2, 3, 5, 8, 12, 20, 30] {
        let l = spec(dir.path(), &["sleep", "1000"]);
        let _ = fs::remove_file(&l.exit_path);
        let task = launch(&exec, &l);
        let _guard = GroupGuard(task.pid);
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        exec.terminate(task.pid, Duration::from_secs(60));
        let end = next_event(&mut rx).await;
        assert_eq!(
            end.exit,
            TaskExit::Signaled(15),
            "stopped {delay_ms} ms after launch"
        );
    }
}

#[tokio::test]
async fn terminate_escalates_to_sigkill_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let l = spec(
        dir.path(),
        &["sh", "-c", "trap '' TERM; echo ready; exec sleep 1000"],
    );
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "ready").await;
    let grace = Duration::from_millis(300);
    let sent = Instant::now();
    exec.terminate(task.pid, grace);
    // SIGKILL reaches the shim too, so there is no record and its own status is reported.
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Signaled(9));
    assert!(
        sent.elapsed() >= grace,
        "killed before the grace period ended"
    );
    assert!(!l.exit_path.exists());
    assert!(wait_until(|| !signals::group_exists(task.pid)).await);
}

#[tokio::test]
async fn terminate_kills_grandchildren_that_ignore_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild.pid");
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let script = r#"sh -c 'trap "" TERM; echo grandchild-ready; exec sleep 1000' &
echo $! > "$1"; wait"#;
    let l = spec(
        dir.path(),
        &["sh", "-c", script, "sh", pid_file.to_str().unwrap()],
    );
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "grandchild-ready").await;
    let grandchild: u32 = read(&pid_file).trim().parse().unwrap();
    assert!(signals::process_alive(grandchild));

    exec.terminate(task.pid, Duration::from_millis(300));
    // The child dies of SIGTERM and the shim records it; the grandchild outlives the shim...
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Signaled(15));
    // ...until the group SIGKILL after the grace period.
    assert!(
        wait_until(|| !signals::process_alive(grandchild)).await,
        "grandchild {grandchild} survived terminate"
    );
}

#[tokio::test]
async fn kill_now_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let (exec, mut rx) = executor(real_shim(dir.path()));
    let l = spec(dir.path(), &["sh", "-c", "echo ready; exec sleep 1000"]);
    let task = launch(&exec, &l);
    let _guard = GroupGuard(task.pid);
    wait_for_log(&l, "ready").await;
    exec.kill_now(task.pid);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Signaled(9));
    assert!(wait_until(|| !signals::group_exists(task.pid)).await);
}

/// Starts `sh -c script sh <exit_path> <marker>` directly (not through the executor), as a shim
/// left over from before a restart would be, and waits until it runs.
async fn orphan_like(dir: &Path, script: &str) -> (ChildGuard, PathBuf) {
    let exit_path = dir.join("exit.json");
    let marker = dir.join("started");
    let mut command = std::process::Command::new("sh");
    command
        .args(["-c", script, "sh"])
        .arg(&exit_path)
        .arg(&marker);
    // Started as the executor starts a shim: a session of its own (adoption checks it).
    // SAFETY: new_session_for_child makes only async-signal-safe calls.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(
            &mut command,
            crate::process_hygiene::new_session_for_child,
        );
    }
    let child = ChildGuard(command.spawn().unwrap());
    assert!(wait_until(|| marker.exists()).await);
    (child, exit_path)
}

#[tokio::test]
async fn adopt_reports_the_record_written_before_exit() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"touch "$2"; sleep 0.3; echo '{"exit":{"Exited":7}}' > "$1""#;
    let (child, exit_path) = orphan_like(dir.path(), script).await;
    let (exec, mut rx) = executor(PathBuf::from("unused"));
    exec.adopt(3, 1, child.0.id(), exit_path);
    let event = next_event(&mut rx).await;
    assert_eq!((event.job_id, event.task_index), (3, 1));
    assert_eq!(event.exit, TaskExit::Exited(7));
    // It was an unreaped zombie of this process (adopt must treat that as gone) until the
    // guard reaps it.
}

#[tokio::test]
async fn adopt_without_record_reports_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (child, exit_path) = orphan_like(dir.path(), r#"touch "$2"; sleep 0.2"#).await;
    let (exec, mut rx) = executor(PathBuf::from("unused"));
    exec.adopt(3, 0, child.0.id(), exit_path);
    assert_eq!(next_event(&mut rx).await.exit, TaskExit::Lost);
}

#[test]
fn adopt_of_a_reused_pid_outside_a_runtime_reports_lost() {
    let dir = tempfile::tempdir().unwrap();
    let unrelated = ChildGuard(
        std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap(),
    );
    let (exec, mut rx) = executor(PathBuf::from("unused"));
    exec.adopt(9, 0, unrelated.0.id(), dir.path().join("exit.json"));
    let deadline = Instant::now() + WAIT;
    let event = loop {
        match rx.try_recv() {
            Ok(event) => break event,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("no adopt event: {e}"),
        }
    };
    assert_eq!(event.exit, TaskExit::Lost);
}

#[tokio::test]
async fn find_running_finds_a_shim_by_its_exit_path_only() {
    let dir = tempfile::tempdir().unwrap();
    let (child, exit_path) = orphan_like(dir.path(), r#"touch "$2"; sleep 5"#).await;
    let (exec, _rx) = executor(PathBuf::from("unused"));
    assert_eq!(exec.find_running(&exit_path), Some(child.0.id()));
    assert_eq!(exec.find_running(&dir.path().join("exit")), None);
    drop(child);
    assert_eq!(exec.find_running(&exit_path), None, "a reaped shim is gone");
}

#[test]
fn exit_since_ignores_a_record_older_than_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exit.json");
    let (exec, _rx) = executor(PathBuf::from("unused"));
    assert_eq!(exec.exit_since(&path, 0), None);
    record::write_atomic(&path, &record::ExitRecord::exit_only(TaskExit::Exited(3))).unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(exec.exit_since(&path, 0), Some(TaskExit::Exited(3)));
    assert_eq!(
        exec.exit_since(&path, now_ms + 60_000),
        None,
        "stale record"
    );
}
