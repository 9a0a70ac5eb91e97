//! Issue 26, the ways to root and the denial of service, each attack performed against a real
//! daemon running as root with tasks run as `nobody`, and shown to fail (`docs/security.md`
//! names each by its number):
//!
//! - R1: a task opens the daemon's controlling terminal (where `TIOCSTI` types into root's
//!   shell) or joins another task's process group: tasks are in a session of their own,
//!   without a terminal;
//! - R2: a task reads a descriptor the daemon was started with (`gantry serve 8<secret`);
//! - R3: the daemon starts on a data directory another account owns or others may write;
//! - U7: the CLI sends its token to a socket another account planted;
//! - U8: a relative `workdir` resolves against the daemon's directory (it changes to `/`), and
//!   a config file that holds the cluster token may be read by others;
//! - D11: a local user binds 127.0.0.2, .3, ... to get past the per-caller connection cap;
//! - D12: the tasks of a node together take every process number of the host; a task writes
//!   past its log's limit by reopening the log by name.
//!
//! These tests need root (they switch users, make cgroups and give directories away); CI
//! runs them as root, and anywhere else they fail saying so rather than pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::root::{CgroupParent, open_dir, require_root};
use gantry_e2e::{Daemon, WAIT, gantry_bin, make_private};
use serde_json::{Value, json};
use std::ffi::CString;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

/// Tasks as their users, no cgroups.
const AS_USERS: &str = "[execution]\nrun_as_user = true\ncgroups = \"off\"\n";

fn shell_job(name: &str, script: &str) -> Value {
    json!({
        "name": name,
        "user": "nobody",
        "argv": ["/bin/sh", "-c", script],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    })
}

fn logs(d: &Daemon, id: u64) -> String {
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{text}");
    text
}

/// Fields 5, 6 and 7 of `/proc/<pid>/stat`: process group, session, controlling terminal.
fn group_session_tty(pid: u32) -> (i64, i64, i64) {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<i64> = after
        .split_whitespace()
        .skip(2)
        .take(3)
        .map(|v| v.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

/// A new pseudo-terminal: its master end and the path of its slave.
fn open_pty() -> (OwnedFd, PathBuf) {
    // SAFETY: plain calls on a descriptor this function owns; ptsname_r writes at most
    // `buf.len()` bytes into `buf`.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, buf.as_mut_ptr(), buf.len()), 0);
        let name = std::ffi::CStr::from_ptr(buf.as_ptr());
        (
            OwnedFd::from_raw_fd(master),
            PathBuf::from(name.to_str().unwrap()),
        )
    }
}

#[test]
fn a_task_gets_neither_the_daemons_terminal_nor_its_session_nor_its_descriptors() {
    require_root("this test switches users");
    // Root's secret, open in the daemon as fd 8, as `gantry serve 8<secret` would have it.
    let private = tempfile::tempdir().unwrap();
    let secret_path = private.path().join("root-only");
    let secret_text = format!("root-only-secret-{}", std::process::id());
    fs::write(&secret_path, &secret_text).unwrap();
    fs::set_permissions(&secret_path, fs::Permissions::from_mode(0o600)).unwrap();
    let secret = fs::File::open(&secret_path).unwrap();
    let secret_fd = secret.as_raw_fd();
    // The terminal root started the daemon from: the daemon leads a session with it as its
    // controlling terminal, as a shell's job would.
    let (_master, slave) = open_pty();
    let slave = CString::new(slave.to_str().unwrap()).unwrap();
    let d = Daemon::start_prepared(1, AS_USERS, &move |cmd: &mut Command| {
        let slave = slave.clone();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let tty = libc::open(slave.as_ptr(), libc::O_RDWR);
                if tty < 0 || libc::ioctl(tty, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::dup2(tty, 0);
                if libc::dup2(secret_fd, 8) != 8 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let (_, daemon_session, daemon_tty) = group_session_tty(d.pid());
    assert_ne!(daemon_tty, 0, "the daemon has a controlling terminal");
    assert!(
        fs::read_link(format!("/proc/{}/fd/8", d.pid())).is_ok(),
        "the daemon holds fd 8"
    );

    let shared = open_dir();
    let pgid_file = shared.path().join("victim-pgid");
    // A victim task whose process group the attacker tries to join.
    let victim = d.submit(&shell_job(
        "victim",
        &format!(
            "cut -d' ' -f5 /proc/$$/stat > {pg}.tmp && mv {pg}.tmp {pg}; sleep 60",
            pg = pgid_file.display()
        ),
    ));
    let victim_pgid = d.wait_for("the victim's process group", WAIT, || {
        fs::read_to_string(&pgid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    });
    let attack = format!(
        "echo \"ids $(cut -d' ' -f5,6,7 /proc/$$/stat)\"; \
         if ( exec 3<>/dev/tty ) 2>/dev/null; then echo TTY-OPENED; fi; \
         if cat <&8; then echo FD8-READ; fi; \
         n=3; while [ $n -lt 256 ]; do [ -e /proc/$$/fd/$n ] && echo \"open-fd $n\"; n=$((n+1)); done; \
         python3 -c 'import os\ntry:\n os.setpgid(0, {victim_pgid}); print(\"JOINED\")\nexcept OSError as e: print(\"setpgid\", e.errno)'"
    );
    let id = d.submit(&shell_job("attack", &attack));
    d.wait_for("the attack to end", WAIT, || {
        let job = d.job(id);
        (job["state"] != "running" && job["state"] != "pending").then_some(())
    });
    let log = logs(&d, id);
    assert!(!log.contains(&secret_text), "read root's descriptor: {log}");
    assert!(!log.contains("FD8-READ"), "{log}");
    assert!(!log.contains("TTY-OPENED"), "opened root's terminal: {log}");
    assert!(
        !log.contains("JOINED"),
        "joined another task's group: {log}"
    );
    assert!(
        log.contains(&format!("setpgid {}", libc::EPERM)),
        "the kernel refused the group change: {log}"
    );
    let ids: Vec<i64> = log
        .lines()
        .find_map(|l| l.strip_prefix("ids "))
        .unwrap_or_else(|| panic!("{log}"))
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let (group, session, tty) = (ids[0], ids[1], ids[2]);
    assert_eq!(tty, 0, "a controlling terminal: {log}");
    assert_ne!(session, daemon_session, "the daemon's session: {log}");
    assert_ne!(group, victim_pgid, "{log}");
    // Probed with `test -e` (which opens nothing), before any pipe of the shell's own.
    let open: Vec<&str> = log.lines().filter(|l| l.starts_with("open-fd ")).collect();
    assert!(
        open.is_empty(),
        "descriptors above 2 reached the task: {open:?}"
    );
    d.post(&format!("/v1/jobs/{victim}/cancel"), &json!({}));
}

/// Runs `gantry serve` with `args`, expecting it to refuse to start; returns its stderr.
fn serve_refused(args: &[&str], config: Option<&Path>) -> String {
    let mut cmd = Command::new(gantry_bin());
    cmd.arg("serve")
        .args(["--listen", "127.0.0.1:0", "--no-nvml", "--gpus", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gantry serve {args:?} kept running; it should have refused to start");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    err
}

#[test]
fn the_daemon_refuses_a_data_dir_another_account_owns_or_others_may_write() {
    require_root("this test switches users");
    let base = tempfile::tempdir().unwrap();
    fs::set_permissions(base.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // alice's directory: she could swap job directories and plant links in it.
    let theirs = base.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    for data in [theirs.clone(), theirs.join("gantry-data")] {
        let err = serve_refused(&["--data-dir", data.to_str().unwrap()], None);
        assert!(
            err.contains("refusing the data directory") && err.contains("owned by uid 65534"),
            "{err}"
        );
    }
    assert!(
        !theirs.join("gantry-data/gantry.sock").exists(),
        "nothing bound in it"
    );
    // A directory everyone may write, sticky or not, above or as the data directory.
    let open = base.path().join("open");
    fs::create_dir(&open).unwrap();
    for mode in [0o777, 0o775] {
        fs::set_permissions(&open, fs::Permissions::from_mode(mode)).unwrap();
        let err = serve_refused(&["--data-dir", open.join("data").to_str().unwrap()], None);
        assert!(
            err.contains("may be written by its group or by others"),
            "{err}"
        );
    }
    fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
    let err = serve_refused(&["--data-dir", open.to_str().unwrap()], None);
    assert!(
        err.contains("may be written by its group or by others"),
        "{err}"
    );
    // The socket's directory is held to the same rule.
    let config = base.path().join("socket.toml");
    fs::write(
        &config,
        format!(
            "socket = {:?}\n",
            theirs.join("gantry.sock").display().to_string()
        ),
    )
    .unwrap();
    let mine = base.path().join("mine");
    let err = serve_refused(&["--data-dir", mine.to_str().unwrap()], Some(&config));
    assert!(
        err.contains("refusing the directory of the API socket") && err.contains("65534"),
        "{err}"
    );
}

#[test]
fn the_daemon_works_from_slash_and_a_relative_workdir_or_an_exposed_token_is_refused() {
    require_root("this test switches users");
    let d = Daemon::start_with_config(1, AS_USERS);
    assert_eq!(
        fs::read_link(format!("/proc/{}/cwd", d.pid())).unwrap(),
        Path::new("/")
    );
    for workdir in [".", "gantry-data", "../etc"] {
        let mut spec = shell_job("relative", "pwd");
        spec["workdir"] = json!(workdir);
        let (status, body) = d.post("/v1/jobs", &spec);
        assert_eq!(
            (status, &body["error"]["field"]),
            (400, &json!("workdir")),
            "{body}"
        );
    }
    // A job without a workdir works in its own directory, not the daemon's.
    let id = d.submit(&shell_job("pwd", "pwd -P"));
    d.wait_state(id, "succeeded");
    let log = logs(&d, id);
    assert!(log.trim().ends_with("/work"), "{log}");

    // A config file that holds the cluster token and others may read.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gantry.toml");
    fs::write(
        &config,
        "[execution]\ncgroups = \"off\"\n[cluster]\ntoken = \"0123456789abcdef0123456789abcdef\"\n",
    )
    .unwrap();
    fs::set_permissions(&config, fs::Permissions::from_mode(0o644)).unwrap();
    let data = dir.path().join("data");
    let err = serve_refused(&["--data-dir", data.to_str().unwrap()], Some(&config));
    assert!(
        err.contains("holds [cluster] token") && err.contains("0644"),
        "{err}"
    );
    make_private(&config);
    let mut ok = Command::new(gantry_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-nvml",
            "--gpus",
            "1",
        ])
        .arg("--data-dir")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = [0u8; 32];
    let read = ok.stdout.as_mut().unwrap().read(&mut first).unwrap();
    let _ = ok.kill();
    let _ = ok.wait();
    assert!(
        read > 0,
        "a private config with the token is accepted (the daemon printed its start)"
    );
}

/// A TCP connection to `to` from the local address `from` (port chosen by the kernel).
fn connect_from(from: [u8; 4], to: std::net::SocketAddr) -> std::net::TcpStream {
    // SAFETY: plain socket calls on a descriptor this function owns and hands to TcpStream;
    // the address structs live for the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let stream = std::net::TcpStream::from_raw_fd(fd);
        let mut local: libc::sockaddr_in = std::mem::zeroed();
        local.sin_family = libc::AF_INET as libc::sa_family_t;
        local.sin_addr.s_addr = u32::from_ne_bytes(from);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, (&raw const local).cast(), len),
            0,
            "bind {from:?}: {}",
            std::io::Error::last_os_error()
        );
        let std::net::SocketAddr::V4(to) = to else {
            panic!("an IPv4 daemon address")
        };
        let mut remote: libc::sockaddr_in = std::mem::zeroed();
        remote.sin_family = libc::AF_INET as libc::sa_family_t;
        remote.sin_port = to.port().to_be();
        remote.sin_addr.s_addr = u32::from_ne_bytes(to.ip().octets());
        assert_eq!(
            libc::connect(fd, (&raw const remote).cast(), len),
            0,
            "connect: {}",
            std::io::Error::last_os_error()
        );
        stream
    }
}

#[test]
fn the_whole_loopback_range_is_one_caller_for_the_connection_cap() {
    let d = Daemon::start_with_config(1, "[http]\nmax_connections_per_ip = 4\n");
    let addr: std::net::SocketAddr = d.url().trim_start_matches("http://").parse().unwrap();
    // Four connections from four loopback addresses, held open.
    let held: Vec<_> = (2..6).map(|n| connect_from([127, 0, 0, n], addr)).collect();
    let answer = |from: [u8; 4]| {
        let mut s = connect_from(from, addr);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ =
            s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text
    };
    // The daemon counts a connection once it has accepted it: poll until the four held ones
    // are counted, then every other loopback address is over the cap too.
    d.wait_for(
        "the held connections to fill the loopback cap",
        WAIT,
        || {
            answer([127, 0, 0, 41])
                .starts_with("HTTP/1.1 503")
                .then_some(())
        },
    );
    let text = answer([127, 0, 0, 1]);
    assert!(text.starts_with("HTTP/1.1 503"), "from 127.0.0.1: {text}");
    drop(held);
    d.wait_for("the cap to free up", WAIT, || {
        answer([127, 0, 0, 7])
            .starts_with("HTTP/1.1 200")
            .then_some(())
    });
}

#[test]
fn the_tasks_of_a_node_together_cannot_take_more_processes_than_its_bound() {
    require_root("this test switches users");
    let parent = CgroupParent::new("gantry-pids");
    let d = Daemon::start_with_config(
        2,
        &format!(
            "[execution]\nrun_as_user = true\ncgroups = \"required\"\ncgroup_parent = \"{}\"\n\
             gpu_device_pattern = \"/nonexistent/nvidia{{index}}\"\npids_max = 64\nnode_pids_max = 64\n",
            parent.0
        ),
    );
    let max = ["pids", ""]
        .iter()
        .find_map(|c| fs::read_to_string(format!("/sys/fs/cgroup/{c}/{}/pids.max", parent.0)).ok())
        .expect("the parent cgroup has a pids limit");
    assert_eq!(max.trim(), "64");
    // Two tasks of 50 processes each: each fits its own limit, not both the node's.
    let shared = open_dir();
    let script = format!(
        "for i in $(seq 50); do sleep 30 & done; touch {dir}/spawned-$GANTRY_TASK_INDEX; wait",
        dir = shared.path().display()
    );
    let mut spec = shell_job("forker", &script);
    spec["tasks"] = json!([{"count": 2, "gpus": 1, "cpu_milli": 100, "memory_mib": 256}]);
    let id = d.submit(&spec);
    let pids_current = || {
        ["pids", ""]
            .iter()
            .find_map(|c| {
                fs::read_to_string(format!("/sys/fs/cgroup/{c}/{}/pids.current", parent.0)).ok()
            })
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    let mut most = 0;
    let spawned = d.wait_for("both tasks to fork or the job to end", WAIT, || {
        most = most.max(pids_current());
        let spawned = fs::read_dir(shared.path()).unwrap().count();
        let state = d.job(id)["state"].clone();
        (spawned >= 2 || (state != "running" && state != "pending")).then_some(spawned)
    });
    assert!(
        spawned < 2,
        "both tasks ran 50 processes, past the node's bound of 64"
    );
    assert!(most <= 64, "{most} processes under the node's bound of 64");
    let log: String = (0..2)
        .map(|t| d.get_text(&format!("/v1/jobs/{id}/logs?task={t}")).1)
        .collect();
    assert!(log.contains("fork"), "a fork was refused: {log}");
    d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
}

/// Runs `gantry jobs` against the Unix socket `socket` with a bearer token in the
/// environment, as bob would in a shared project directory.
fn cli_jobs_with_token(socket: &Path) -> std::process::Output {
    Command::new(gantry_bin())
        .arg("--server")
        .arg(format!("unix:{}", socket.display()))
        .arg("jobs")
        .env("GANTRY_TOKEN", "bobs-secret-bearer-token-0123456789")
        .env_remove("GANTRY_DAEMON_UID")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_cli_sends_no_token_over_a_socket_and_talks_only_to_a_socket_of_root_or_its_own() {
    require_root("this test switches users");
    let shared = open_dir();
    // A socket served by the caller's own account (root here): it is talked to, without the
    // token (the kernel names the caller on a socket).
    let own = shared.path().join("own.sock");
    let listener = std::os::unix::net::UnixListener::bind(&own).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let _ = conn.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
        String::from_utf8_lossy(&request).into_owned()
    });
    let out = cli_jobs_with_token(&own);
    let request = server.join().unwrap();
    assert!(request.starts_with("GET /v1/jobs"), "{request} {out:?}");
    assert!(
        !request.to_ascii_lowercase().contains("authorization") && !request.contains("bobs-secret"),
        "the token went over the socket: {request}"
    );
    // alice's socket (nobody here) in the shared directory: the CLI does not talk to it.
    let planted = shared.path().join("gantry.sock");
    let captured = shared.path().join("captured");
    let script = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind({planted:?})\ns.listen(4)\n\
         open({ready:?}, 'w').close()\nc, _ = s.accept()\nc.settimeout(5)\n\
         try:\n    data = c.recv(65536)\nexcept OSError:\n    data = b''\n\
         open({captured:?}, 'wb').write(data)\n",
        planted = planted.display().to_string(),
        ready = shared.path().join("ready").display().to_string(),
        captured = captured.display().to_string(),
    );
    let mut alice = Command::new("python3")
        .args(["-c", &script])
        .uid(NOBODY)
        .gid(NOBODY)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while !shared.path().join("ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the planted socket never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = cli_jobs_with_token(&planted);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("served by uid 65534"), "{stderr}");
    let deadline = Instant::now() + WAIT;
    while !captured.exists() {
        assert!(
            Instant::now() < deadline,
            "the planted socket never saw its connection close"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = alice.kill();
    let _ = alice.wait();
    assert_eq!(
        fs::read(&captured).unwrap(),
        Vec::<u8>::new(),
        "the CLI sent the planted socket something"
    );
}

#[test]
fn a_task_cannot_write_past_its_log_limit_by_reopening_its_log() {
    require_root("this test switches users");
    let d = Daemon::start_with_config(1, &format!("{AS_USERS}[limits]\nmax_log_mib = 1\n"));
    // Let nobody reach the job's directory by name, as a user on the node could.
    let root = d.out_dir().parent().unwrap().to_path_buf();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    let log = root.join("data/jobs/1/task-0.log");
    let script = format!(
        "echo start; head -c 3000000 /dev/zero >> {} 2>/dev/null && echo WROTE || echo refused",
        log.display()
    );
    let id = d.submit(&shell_job("reopen", &script));
    assert_eq!(id, 1);
    d.wait_state(id, "succeeded");
    let text = logs(&d, id);
    assert!(
        text.contains("refused") && !text.contains("WROTE"),
        "{text}"
    );
    let size = fs::metadata(&log).unwrap().len();
    assert!(
        size <= (1 << 20) + 4096,
        "the log grew past its limit: {size} bytes"
    );
}
