//! Issue 27, a SLURM user's first day, as a user would type it: the CLI over the daemon's
//! socket as a real local account (`nobody`), from a directory of that user's, with that
//! user's shell environment; a job gets the environment and SLURM variables `sbatch` would
//! give it; who you are is visible (`gantry whoami`, and a note when a submission has no
//! identity); a job that could never start is refused at submit, naming why; a second
//! daemon on the same cgroup parent refuses to start and leaves the first one's task alone;
//! the CLI ends quietly on a closed pipe.
//!
//! Needs root (it runs the CLI as another account and makes cgroups); CI runs it as root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::root::{CgroupParent, require_root};
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::json;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gantry_e2e::as_user::{NOBODY, daemon_for_users, nobodys_dir};

/// A daemon whose tasks run as their users, with its socket reachable by other accounts.
fn daemon() -> (Daemon, PathBuf) {
    daemon_for_users(2)
}

/// The CLI as nobody, in `dir`, with `env` as its whole environment.
fn cli(socket: &Path, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    gantry_e2e::as_user::cli_as_nobody(socket, dir, env, args)
}

fn job_id(out: &Output) -> u64 {
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no job id in {text:?} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

fn log_of(d: &Daemon, id: u64) -> String {
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{text}");
    text
}

#[test]
fn a_job_gets_the_users_environment_directory_and_slurm_variables() {
    require_root("this test runs the CLI as another account");
    let (d, socket) = daemon();
    let home = nobodys_dir();
    let bin = home.path().join("bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::chown(&bin, Some(NOBODY), Some(NOBODY)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let env = [
        ("PATH", path.as_str()),
        ("USER", "nobody"),
        ("HOME", "/nonexistent"),
        ("LEARNING_RATE", "0.1"),
        ("GANTRY_TOKEN", "must-not-travel"),
    ];
    let out = cli(&socket, home.path(), &env, &["submit", "--", "env"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = job_id(&out);
    d.wait_state(id, "succeeded");
    let log = log_of(&d, id);
    let var = |name: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {log}"))
            .to_string()
    };
    assert_eq!(var("PATH"), path, "the user's PATH");
    assert_eq!(var("LEARNING_RATE"), "0.1");
    let here = home.path().canonicalize().unwrap();
    assert_eq!(Path::new(&var("SLURM_SUBMIT_DIR")), here);
    assert_eq!(var("SLURM_JOB_ID"), id.to_string());
    assert_eq!(var("SLURM_PROCID"), "0");
    assert_eq!(var("SLURM_NTASKS"), "1");
    assert!(
        !log.contains("must-not-travel"),
        "the token travelled: {log}"
    );

    // --export=NONE and -D as sbatch means them.
    let out = cli(
        &socket,
        home.path(),
        &env,
        &[
            "submit",
            "--export=NONE",
            "-D",
            "/tmp",
            "--",
            "sh",
            "-c",
            "pwd; echo lr=$LEARNING_RATE",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = job_id(&out);
    d.wait_state(id, "succeeded");
    let log = log_of(&d, id);
    assert!(log.starts_with("/tmp\nlr=\n"), "{log}");
}

#[test]
fn who_you_are_is_visible_and_a_job_that_could_never_run_is_refused_at_submit() {
    require_root("this test runs the CLI as another account");
    let (d, socket) = daemon();
    let home = nobodys_dir();
    let env = [("PATH", "/usr/bin:/bin"), ("USER", "nobody")];
    let out = cli(&socket, home.path(), &env, &["whoami"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.starts_with("nobody (role user"),
        "{text}"
    );
    // Over TCP without a token: anonymous, and the CLI says so on stderr.
    let out = Command::new(gantry_bin())
        .args(["--server", d.url(), "submit", "--", "true"])
        .env_remove("GANTRY_TOKEN")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no identity"), "{stderr}");
    // Root's job with allow_root off: refused now, naming `user`, not requeued five times.
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"name": "as-root", "user": "root", "argv": ["true"],
                "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}]}),
    );
    // An anonymous caller's job runs as the fallback account; root's claim is refused.
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("user")),
        "{body}"
    );
}

#[test]
fn the_cli_ends_quietly_when_its_reader_goes_away() {
    let d = Daemon::start(1);
    for n in 0..30 {
        d.submit(&json!({"name": format!("j{n}"), "argv": ["true"],
                          "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}]}));
    }
    for _ in 0..5 {
        let mut child = Command::new(gantry_bin())
            .args(["--server", d.url(), "jobs", "--all"])
            .env("HOME", "/nonexistent")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 8];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_ne!(out.status.code(), Some(101), "{stderr}");
    }
}

#[test]
fn a_second_daemon_on_the_same_cgroup_parent_refuses_and_the_first_ones_task_lives() {
    require_root("this test runs the CLI as another account");
    let parent = CgroupParent::new("gantry-second");
    let execution = format!(
        "[execution]\nrun_as_user = false\ncgroups = \"required\"\ncgroup_parent = \"{}\"\n\
         gpu_device_pattern = \"/nonexistent/nvidia{{index}}\"\n",
        parent.0
    );
    let d = Daemon::start_with_config(1, &execution);
    let id = d.submit(&d.blocking_job("first", 1, 0));
    let env = d.task_env(id, 0);
    let pid: i32 = env["TASK_SHELL_PID"].parse().unwrap();
    // The second daemon: its own data dir and port, the same parent cgroup.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gantry.toml");
    fs::write(&config, &execution).unwrap();
    let mut second = Command::new(gantry_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-nvml",
            "--gpus",
            "1",
            "--config",
        ])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            panic!("the second daemon kept running on the first one's cgroup parent");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    second
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("in use by another gantry daemon")
            && stderr.contains(&format!("pid {}", d.pid())),
        "{stderr}"
    );
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(
        unsafe { libc::kill(pid, 0) },
        0,
        "the first daemon's task was killed"
    );
    assert_eq!(d.job(id)["state"], "running");
    d.release(id);
    d.wait_state(id, "succeeded");
}

#[test]
fn a_json_or_yaml_spec_is_submitted_as_it_is_and_cancel_takes_ids_and_ranges() {
    let d = Daemon::start(1);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("job.json");
    fs::write(
        &spec,
        r#"{"name": "from-json", "argv": ["sh", "-c", "echo from json"],
            "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}]}"#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(gantry_bin())
            .args(["--server", d.url()])
            .args(args)
            .env("HOME", "/nonexistent")
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["submit", spec.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = job_id(&out);
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["spec"]["name"], "from-json");
    assert_eq!(log_of(&d, id), "from json\n");
    // The same as YAML, as `kubectl apply -f` takes it.
    let yaml = dir.path().join("job.yaml");
    fs::write(
        &yaml,
        "name: from-yaml\nargv: [sh, -c, 'echo from yaml']\n\
         tasks:\n  - {count: 1, gpus: 0, cpu_milli: 100, memory_mib: 64}\n",
    )
    .unwrap();
    let out = run(&["submit", yaml.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_yaml = job_id(&out);
    assert_eq!(
        d.wait_state(from_yaml, "succeeded")["spec"]["name"],
        "from-yaml"
    );
    assert_eq!(log_of(&d, from_yaml), "from yaml\n");
    // scancel's shapes: ids and ranges, each cancelled.
    let sleepers: Vec<u64> = (0..3)
        .map(|n| {
            d.submit(&json!({"name": format!("sleep-{n}"), "argv": ["sleep", "60"],
                              "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}]}))
        })
        .collect();
    let range = format!("{}-{}", sleepers[1], sleepers[2]);
    let out = run(&["cancel", &sleepers[0].to_string(), &range]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for id in sleepers {
        d.wait_state(id, "cancelled");
    }
}

#[test]
fn an_array_of_two_thousand_small_members_is_accepted_and_stores_its_index_list_once() {
    let d = Daemon::start(1);
    let (status, body) = d.post(
        "/v1/jobs",
        &json!({"name": "sweep", "argv": ["sleep", "60"],
                "array": {"indices": (0..2000).collect::<Vec<u32>>(), "max_running": 1},
                "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}]}),
    );
    assert_eq!(status, 201, "{body}");
    let ids = body["array_job_ids"].as_array().unwrap();
    assert_eq!(ids.len(), 2000);
    let first = d.job(ids[0].as_u64().unwrap());
    assert_eq!(
        first["spec"]["array"]["indices"].as_array().unwrap().len(),
        2000
    );
    let last = d.job(ids[1999].as_u64().unwrap());
    assert_eq!(last["spec"]["array"], serde_json::Value::Null, "{last}");
    assert_eq!(last["array"]["index"], 1999);
    assert_eq!(last["array"]["array_id"], ids[0]);
    assert_eq!(last["array"]["max_running"], 1);
}

#[test]
fn logs_follow_prints_what_the_task_writes_until_the_job_ends() {
    let d = Daemon::start(1);
    let id = d.submit(&json!({"name": "talker", "argv": ["sh", "-c", "echo one; sleep 1; echo two"],
                              "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}]}));
    let mut follow = Command::new(gantry_bin())
        .args(["--server", d.url(), "logs", "-f", &id.to_string()])
        .env("HOME", "/nonexistent")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while follow.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = follow.kill();
            panic!("gantry logs -f did not end with the job");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = follow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\n");
}

#[test]
fn a_refused_upload_is_reported_as_a_refusal_not_as_an_unreachable_daemon() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.toml");
    let alice = gantry_e2e::token_into(&file, "alice", "ml", "user");
    let d = Daemon::start_with_config(1, &fs::read_to_string(&file).unwrap());
    // A user may not add plugins; a large body is refused before it is all read.
    let plugin = tokens.path().join("big.wasm");
    fs::write(&plugin, vec![0u8; 24 << 20]).unwrap();
    for _ in 0..3 {
        let out = Command::new(gantry_bin())
            .args(["--server", d.url(), "plugin", "add"])
            .arg(&plugin)
            .env("GANTRY_TOKEN", &alice)
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(!stderr.contains("cannot reach"), "{stderr}");
        assert!(
            stderr.contains("403") || stderr.contains("most likely refused it"),
            "{stderr}"
        );
    }
}
