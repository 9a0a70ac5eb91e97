//! Issue 16, the attacks on identity, each performed against a real daemon running as root
//! with tasks run as their users (and cgroups where the attack is about them) and shown to
//! fail: a service's check command does not run as root nor outside the job's cgroup nor with
//! the daemon's environment (1); `LD_PRELOAD` in a job's env never reaches a root process and
//! the working directory is entered as the job's user (2); a local account is who the kernel
//! says on the Unix socket and a request without identity never runs as the user it names
//! (3); the data directory, the database and a job's files are private, and other users' job
//! details are hidden from a user token (5); a short cluster token in the environment is
//! refused (9).
//!
//! These tests need root (they switch users and make cgroups); CI runs them as root, and
//! anywhere else they fail saying so rather than pass without testing anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, gantry_bin, token_into};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// uid and gid of `nobody`, the account jobs run as here.
const NOBODY: u32 = 65534;

/// v1 controllers a task cgroup lives in on this host.
const CONTROLLERS: [&str; 5] = ["memory", "cpu", "cpuacct", "pids", "devices"];

fn require_root() {
    // SAFETY: no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "these tests switch users and need root (CI runs them as root)"
    );
}

/// A unique cgroup parent, removed (with its task cgroups) when dropped.
struct CgroupParent(String);

impl CgroupParent {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Self(format!("gantry-trust-{}-{n}", std::process::id()))
    }
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        for c in CONTROLLERS {
            let parent = PathBuf::from(format!("/sys/fs/cgroup/{c}/{}", self.0));
            for entry in fs::read_dir(&parent).into_iter().flatten().flatten() {
                let _ = fs::remove_dir(entry.path());
            }
            let _ = fs::remove_dir(&parent);
        }
    }
}

/// Tasks as their users, cgroups as given (`cgroups = "required"` makes a missing cgroup
/// hierarchy a visible failure).
fn as_users(cgroups: Option<&CgroupParent>) -> String {
    match cgroups {
        Some(p) => format!(
            "[execution]\nrun_as_user = true\ncgroups = \"required\"\ncgroup_parent = \"{}\"\n\
             gpu_device_pattern = \"/nonexistent/nvidia{{index}}\"\n",
            p.0
        ),
        None => "[execution]\nrun_as_user = true\ncgroups = \"off\"\n".into(),
    }
}

fn job(name: &str, user: &str, argv: Value) -> Value {
    json!({
        "name": name,
        "user": user,
        "argv": argv,
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    })
}

fn logs(d: &Daemon, id: u64) -> String {
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{text}");
    text
}

/// A directory everyone may enter and write (for files a job's user writes).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_check_command_runs_as_the_jobs_user_in_its_cgroup_with_the_jobs_environment_only() {
    require_root();
    let parent = CgroupParent::new();
    let d = Daemon::start_with_config(1, &as_users(Some(&parent)));
    let marker = "/root/gantry-trust-check-ran-as-root";
    let _ = fs::remove_file(marker);
    let probe = format!(
        "touch {marker} 2>/dev/null; \
         n=$(grep -c \"/job-$GANTRY_JOB_ID-task-0\" /proc/self/cgroup); \
         echo \"uid=$(id -u) cgroups=$n rust_log=${{RUST_LOG:-unset}} job=${{JOB_SECRET:-unset}}\" >&2; \
         exit 1"
    );
    let mut spec = job("checked", "nobody", json!(["sleep", "300"]));
    spec["kind"] = json!("service");
    spec["env"] = json!({"JOB_SECRET": "s3"});
    spec["service"] = json!({"health": {
        "command": ["/bin/sh", "-c", probe],
        "interval_s": 1, "failures": 100, "initial_delay_s": 0,
    }});
    let id = d.submit(&spec);
    let job = d.wait_for("the check to report", WAIT, || {
        let j = d.job(id);
        let error = j["health"]["last_error"].as_str().unwrap_or_default();
        error.contains("uid=").then_some(j)
    });
    let error = job["health"]["last_error"].as_str().unwrap();
    assert!(
        error.contains(&format!("uid={NOBODY} ")),
        "runs as the job's user: {error}"
    );
    assert!(
        !error.contains("cgroups=0"),
        "runs inside the job's task cgroup: {error}"
    );
    assert!(
        error.contains("rust_log=unset") && error.contains("job=s3"),
        "the job's environment, not the daemon's (RUST_LOG is the daemon's): {error}"
    );
    assert!(!Path::new(marker).exists(), "the check wrote as root");
    let (status, _) = d.delete(&format!("/v1/jobs/{id}"));
    assert_eq!(status, 200);
    d.wait_state(id, "cancelled");
}

#[test]
fn an_http_check_only_probes_a_port_the_services_user_listens_on() {
    require_root();
    let d = Daemon::start_with_config(1, &as_users(None));
    let daemon_port: u16 = d.url().rsplit(':').next().unwrap().parse().unwrap();
    let mut spec = job("aims-at-the-daemon", "nobody", json!(["sleep", "300"]));
    spec["kind"] = json!("service");
    spec["service"] = json!({"port": daemon_port, "health": {
        "http_path": "/v1/health", "interval_s": 1, "failures": 100, "initial_delay_s": 0,
    }});
    let id = d.submit(&spec);
    let job = d.wait_for("the check to report", WAIT, || {
        let j = d.job(id);
        j["health"]["last_error"].is_string().then_some(j)
    });
    let error = job["health"]["last_error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "port {daemon_port} is not held by the service's user"
        )),
        "{job}"
    );
    assert_ne!(job["health"]["state"], "healthy", "{job}");
    d.delete(&format!("/v1/jobs/{id}"));
    d.wait_state(id, "cancelled");
}

/// Builds a shared object whose constructor appends `euid=N` to `$GANTRY_PRELOAD_OUT`.
fn preload_library(dir: &Path) -> PathBuf {
    let source = dir.join("p.c");
    fs::write(
        &source,
        "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n\
         __attribute__((constructor)) static void record(void) {\n\
           const char *out = getenv(\"GANTRY_PRELOAD_OUT\");\n\
           if (!out) return;\n\
           FILE *f = fopen(out, \"a\");\n\
           if (f) { fprintf(f, \"euid=%d\\n\", (int)geteuid()); fclose(f); }\n\
         }\n",
    )
    .unwrap();
    let library = dir.join("p.so");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .output()
        .expect("gcc is needed to build the preload library");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    fs::set_permissions(&library, fs::Permissions::from_mode(0o755)).unwrap();
    library
}

#[test]
fn a_jobs_env_never_reaches_a_root_process_and_its_workdir_is_entered_as_its_user() {
    require_root();
    let d = Daemon::start_with_config(1, &as_users(None));
    let shared = open_dir();
    let library = preload_library(shared.path());
    let record = shared.path().join("constructors");
    let mut spec = job("preload", "nobody", json!(["/bin/true"]));
    spec["env"] = json!({
        "LD_PRELOAD": library,
        "GANTRY_PRELOAD_OUT": record,
        "LD_LIBRARY_PATH": shared.path(),
    });
    let id = d.submit(&spec);
    d.wait_state(id, "succeeded");
    let seen = fs::read_to_string(&record).unwrap_or_default();
    assert!(
        seen.lines().count() >= 1,
        "the job's own command does get its LD_PRELOAD"
    );
    assert!(
        seen.lines().all(|l| l == format!("euid={NOBODY}")),
        "the library ran in a root process: {seen}"
    );

    // A directory only root may enter: the job's user cannot work there. Refused at submit,
    // naming it (this is the daemon's only node).
    let private = tempfile::tempdir().unwrap();
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(private.path().join("root-secret"), "x").unwrap();
    let mut spec = job("peek", "nobody", json!(["ls", "-a"]));
    spec["workdir"] = json!(private.path());
    let (status, body) = d.post("/v1/jobs", &spec);
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("workdir")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot enter") && m.contains("0700")),
        "{body}"
    );
    // And if it closes after the submit, the kernel refuses the user at start: the job
    // waits behind a blocker while the directory is still open, then it is closed.
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let shared = open_dir();
    let release = shared.path().join("release");
    let blocker = d.submit(&json!({
        "name": "blocker",
        "user": "nobody",
        "argv": ["sh", "-c", format!("while [ ! -e {} ]; do sleep 0.05; done", release.display())],
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
    }));
    d.wait_state(blocker, "running");
    spec["tasks"] = json!([{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]);
    let id = d.submit(&spec);
    fs::set_permissions(private.path(), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(&release, "").unwrap();
    let ended = d.wait_state(id, "failed");
    let log = logs(&d, id);
    assert!(
        !log.contains("root-secret"),
        "listed a directory its user cannot enter: {log}"
    );
    assert!(
        log.contains("Permission denied"),
        "the kernel refused the user: {log} {ended}"
    );
}

/// Runs the gantry CLI as `nobody` against the daemon's Unix socket, with `USER` set to
/// `claimed`.
fn cli_as_nobody(socket: &Path, claimed: &str, args: &[&str]) -> std::process::Output {
    Command::new(gantry_bin())
        .arg("--server")
        .arg(format!("unix:{}", socket.display()))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("USER", claimed)
        .env("HOME", "/")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("cannot run gantry as nobody")
}

#[test]
fn a_local_caller_is_who_the_kernel_says_and_an_anonymous_one_never_runs_as_whom_it_names() {
    require_root();
    let d = Daemon::start_with_config(1, &as_users(None));
    // The harness's directory is private; let other accounts reach the data dir (0711).
    let root = d.out_dir().parent().unwrap().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    let socket = root.join("data/gantry.sock");
    assert!(socket.exists(), "the daemon serves a Unix socket");

    // nobody claiming to be `daemon` (uid 1): refused, naming the field.
    let claim = cli_as_nobody(&socket, "daemon", &["submit", "--", "id", "-u"]);
    let stderr = String::from_utf8_lossy(&claim.stderr);
    assert!(!claim.status.success(), "{stderr}");
    assert!(
        stderr.contains("403") && stderr.contains("`user`"),
        "refused naming user: {stderr}"
    );

    // As itself: accepted without any token, and the job runs as nobody.
    let own = cli_as_nobody(&socket, "nobody", &["submit", "--", "id", "-u"]);
    let stdout = String::from_utf8_lossy(&own.stdout);
    assert!(
        own.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&own.stderr)
    );
    let id: u64 = stdout
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {stdout:?}"));
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["spec"]["user"], "nobody", "{done}");
    assert_eq!(logs(&d, id).trim(), NOBODY.to_string());

    // Over TCP without a token there is no identity: naming `daemon` runs as the fallback.
    let id = d.submit(&job("claim", "daemon", json!(["id", "-u"])));
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["spec"]["anonymous"], true, "{done}");
    assert_eq!(
        logs(&d, id).trim(),
        NOBODY.to_string(),
        "ran as the user it named"
    );
    // The request cannot say it is not anonymous.
    let mut spec = job_spec_claiming_identity();
    spec["user"] = json!("daemon");
    let id = d.submit(&spec);
    d.wait_state(id, "succeeded");
    assert_eq!(logs(&d, id).trim(), NOBODY.to_string());
}

/// One GET over the Unix socket; the status line, or `None` when the daemon closed the
/// connection unanswered.
fn socket_get(socket: &Path, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.lines().next().map(str::to_owned)
}

#[test]
fn one_local_account_cannot_hold_every_connection_of_the_socket() {
    let d = Daemon::start_with_config(1, "[http]\nmax_connections_per_ip = 3\n");
    let socket = d.out_dir().parent().unwrap().join("data/gantry.sock");
    // Polled: under load the daemon may be slow to answer its first request on the socket.
    let ok = d.wait_for("the socket to answer", WAIT, || {
        socket_get(&socket, "/v1/health")
    });
    assert!(ok.contains(" 200 "), "{ok}");
    let held: Vec<_> = (0..3)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect();
    // The daemon counts a connection once it accepted it: the fourth is closed unanswered.
    d.wait_for("a connection past the limit to be closed", WAIT, || {
        socket_get(&socket, "/v1/health").is_none().then_some(())
    });
    drop(held);
    d.wait_for("a slot to come back", WAIT, || {
        socket_get(&socket, "/v1/health").filter(|l| l.contains(" 200 "))
    });
}

fn job_spec_claiming_identity() -> Value {
    let mut spec = job("claim-again", "daemon", json!(["id", "-u"]));
    spec["anonymous"] = json!(false);
    spec
}

#[test]
fn the_data_dir_database_and_job_files_are_private_and_other_users_details_hidden() {
    require_root();
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.toml");
    let alice = token_into(&file, "nobody", "ml", "user");
    let bob = token_into(&file, "bob", "cv", "user");
    let olga = token_into(&file, "olga", "infra", "operator");
    let extra = format!("{}\n{}", fs::read_to_string(&file).unwrap(), as_users(None));
    let d = Daemon::start_with_config(1, &extra);
    let spec = json!({
        "name": "private",
        "script": "#!/bin/sh\necho started\n",
        "env": {"API_KEY": "alice-secret"},
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    });
    let id = d.submit_as(&alice, &spec);
    d.wait_for("the job to succeed", WAIT, || {
        let (_, j) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
        (j["state"] == "succeeded").then_some(())
    });

    let data = d.out_dir().parent().unwrap().join("data");
    assert_eq!(mode(&data), 0o711, "data dir");
    assert_eq!(mode(&data.join("db")), 0o700, "database");
    assert_eq!(mode(&data.join("history")), 0o700, "history database");
    let job_dir = data.join(format!("jobs/{id}"));
    assert_eq!(mode(&job_dir), 0o711, "job dir");
    for (name, want_mode, want_uid) in [
        // The daemon's: its size limit is kept by the shim, so the task may not reopen it.
        ("task-0.log", 0o600, 0),
        ("script", 0o700, NOBODY),
        ("task-0.exit", 0o600, 0),
        ("task-0.env", 0o600, 0),
    ] {
        let path = job_dir.join(name);
        let meta = fs::symlink_metadata(&path).unwrap();
        assert_eq!(mode(&path), want_mode, "{name}");
        assert_eq!(meta.uid(), want_uid, "{name} owner");
    }

    let (status, seen) = d.get_as(&bob, &format!("/v1/jobs/{id}"));
    assert_eq!(status, 200);
    assert_eq!(
        seen["spec"]["env"],
        json!({}),
        "bob sees alice's env: {seen}"
    );
    assert!(!seen.to_string().contains("alice-secret"), "{seen}");
    assert!(!seen.to_string().contains("echo started"), "{seen}");
    let (_, list) = d.get_as(&bob, "/v1/jobs");
    assert!(!list.to_string().contains("alice-secret"), "{list}");
    let (_, own) = d.get_as(&alice, &format!("/v1/jobs/{id}"));
    assert_eq!(own["spec"]["env"]["API_KEY"], "alice-secret");
    let (_, ops) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
    assert_eq!(ops["spec"]["env"]["API_KEY"], "alice-secret");

    // A replicated service's template is hers as her jobs are.
    let service = json!({
        "name": "private-web", "kind": "service", "argv": ["sleep", "300"],
        "env": {"API_KEY": "alice-secret"}, "service": {"replicas": 1},
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    });
    let (status, created) = d.request_as(
        Some(&alice),
        "POST",
        "/v1/services",
        Some((service.to_string().as_bytes(), "application/json")),
    );
    assert_eq!(status, 201, "{created}");
    let sid = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"].clone();
    for path in [format!("/v1/services/{sid}"), "/v1/services".to_string()] {
        let (status, seen) = d.get_as(&bob, &path);
        assert_eq!(status, 200, "{seen}");
        assert!(
            !seen.to_string().contains("alice-secret"),
            "bob sees {seen}"
        );
    }
    let (_, ops) = d.get_as(&olga, &format!("/v1/services/{sid}"));
    assert_eq!(ops["template"]["env"]["API_KEY"], "alice-secret", "{ops}");
    let (status, stopped) =
        d.request_as(Some(&alice), "DELETE", &format!("/v1/services/{sid}"), None);
    assert_eq!(status, 200, "{stopped}");
}

#[test]
fn a_short_cluster_token_in_the_environment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(gantry_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-nvml",
            "--gpus",
            "1",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("GANTRY_CLUSTER_TOKEN", "short")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("GANTRY_CLUSTER_TOKEN"), "{stderr}");
}
