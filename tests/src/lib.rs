//! Harness for Gantry's end-to-end tests: a real `gantry serve` on 127.0.0.1 with fake GPUs, a
//! throw-away data directory, and helpers to call its HTTP API and to wait, with a bound, for
//! what it does.
//!
//! The daemon binary is `<target>/<profile>/gantry`, built once per test binary with
//! `cargo build -p gantry` when it is missing or older than the workspace sources
//! (`GANTRY_E2E_BIN=path` uses a given binary; `GANTRY_E2E_NO_BUILD=1` never builds).
//!
//! Jobs made by [`Daemon::blocking_job`] write their environment to
//! `<out>/env-<job>-<rank>` and then wait until the test calls [`Daemon::release`], so a test
//! decides when each job ends. Dropping a [`Daemon`] SIGKILLs it and every task process group it
//! started: tests leak no processes.
#![deny(missing_docs)]

pub mod agents;
pub mod as_user;
mod auth;
mod binary;
pub mod controllers;
pub mod fake_nvml;
pub mod images;
mod process;
pub mod raw_http;
pub mod root;
pub mod services;
pub mod site;
pub mod slurm;

pub use auth::{CreatedToken, Serve, create_token, token_into};
pub use binary::{fake_nvml_library, gantry_bin, workspace};

/// A Python or JavaScript component built by `scripts/build-plugin-examples`.
pub fn guest(name: &str) -> Vec<u8> {
    let path = workspace()
        .join("target/plugin-examples")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the Python and JS plugins first with scripts/build-plugin-examples (scripts/test does it)",
            path.display()
        )
    })
}
pub use process::process_exists;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Default bound for waiting on the daemon.
pub const WAIT: Duration = Duration::from_secs(30);

/// How often waits poll.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// Fast cycles and a short kill grace, so tests stay quick.
const CONFIG: &str = "cycle_interval_ms = 200\nkill_grace_s = 2\n\n[plugins]\ndeadline_ms = 100\n";

/// Test daemons trust their anonymous TCP callers (the harness's requests) as admins, as
/// the tests were written for: they drain nodes, swap policies and submit as made-up users
/// over plain HTTP. The default is `user` (`docs/security.md`); a test whose extra config
/// has an `[auth]` table of its own decides for itself (`tests/tests/trust_anonymous.rs`).
const ANONYMOUS_ADMIN: &str = "[auth]\nanonymous_role = \"admin\"\n";

/// The `[execution]` settings of test daemons, for every key a test does not set itself:
/// tasks keep the daemon's user (tests run the daemon as root and submit jobs as made-up users
/// whose tasks write into 0700 temp dirs) and get no cgroups (tests ask for tiny memory and
/// CPU, and several daemons share the host). `tests/tests/isolation.rs` sets both.
const EXECUTION_DEFAULTS: [(&str, &str); 2] = [("run_as_user", "false"), ("cgroups", "\"off\"")];

/// `toml` with [`EXECUTION_DEFAULTS`]: added to its `[execution]` table for the keys that
/// table does not set (TOML forbids defining a table twice), or as a new table at the end.
pub fn with_execution_defaults(toml: &str) -> String {
    let lines: Vec<&str> = toml.lines().collect();
    let Some(header) = lines.iter().position(|l| l.trim() == "[execution]") else {
        let table: String = EXECUTION_DEFAULTS
            .iter()
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect();
        return format!("{toml}\n\n[execution]\n{table}");
    };
    let body_end = lines[header + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |p| header + 1 + p);
    let sets = |key: &str| {
        lines[header + 1..body_end]
            .iter()
            .any(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == key))
    };
    let mut out: Vec<String> = lines[..=header].iter().map(|l| (*l).to_owned()).collect();
    for (k, v) in EXECUTION_DEFAULTS.iter().filter(|(k, _)| !sets(k)) {
        out.push(format!("{k} = {v}"));
    }
    out.extend(lines[header + 1..].iter().map(|l| (*l).to_owned()));
    out.join("\n") + "\n"
}

/// Records the shell's pid and the environment, then waits for the release file.
const BLOCKING_SCRIPT: &str = r#"f="$OUTDIR/env-$GANTRY_JOB_ID-$RANK"
{ echo "TASK_SHELL_PID=$$"; env; } > "$f.tmp" && mv "$f.tmp" "$f"
while [ ! -e "$OUTDIR/release-$GANTRY_JOB_ID" ]; do sleep 0.05; done"#;

/// The `Content-Type` of raw bytes posted to `path`: the plugin upload takes
/// `application/octet-stream`, every other route JSON.
pub(crate) fn bytes_type(path: &str) -> &'static str {
    if path == "/v1/plugins" {
        "application/octet-stream"
    } else {
        "application/json"
    }
}

/// Job states after which nothing changes.
pub const TERMINAL: [&str; 5] = ["succeeded", "failed", "cancelled", "timed_out", "preempted"];

/// Per-task resources sized for a small test machine: `count` tasks of `gpus` GPUs each.
pub fn tasks(count: u32, gpus: u32) -> Value {
    json!([{"count": count, "gpus": gpus, "gpu_milli": 0, "cpu_milli": 100, "memory_mib": 64}])
}

/// The job id of a JSON job record.
pub fn id_of(job: &Value) -> u64 {
    job["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no id in {job}"))
}

/// The GPU indices in a `CUDA_VISIBLE_DEVICES` value, sorted.
pub fn gpu_set(visible: &str) -> Vec<u32> {
    let mut v: Vec<u32> = visible
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("bad GPU list {visible:?}"))
        })
        .collect();
    v.sort_unstable();
    v
}

/// Polls `probe` every 50 ms until it returns `Some`, or panics after `timeout` naming
/// `what` and showing `logs()` (the tails of the processes concerned).
pub fn poll_until<T>(
    what: &str,
    timeout: Duration,
    logs: impl Fn() -> String,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}\n{}", logs());
        }
        std::thread::sleep(POLL);
    }
}

/// Makes a file readable by its owner only: the daemon refuses a config file that holds a
/// cluster token and that others may read.
pub fn make_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .expect("cannot make a file private");
}

/// A running `gantry serve` with its own temporary directory.
pub struct Daemon {
    child: Child,
    base: String,
    agent: ureq::Agent,
    gpus: u32,
    generation: u32,
    dir: tempfile::TempDir,
}

thread_local! {
    /// The address [`Daemon::start_listening`] asks for, while it starts the daemon.
    static LISTEN: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    /// The binary [`Daemon::start_with_binary`] asks for, while it starts the daemon.
    static BINARY: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
    /// The scenario [`Daemon::start_on_fake_nvml`] asks for, while it starts the daemon.
    static FAKE_NVML: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

impl Daemon {
    /// Starts a daemon with `gpus` fake GPUs and waits until it listens.
    pub fn start(gpus: u32) -> Self {
        Self::start_with_config(gpus, "")
    }

    /// Like [`Daemon::start`], with `extra_toml` appended to the test config (e.g.
    /// `[[auth.tokens]]` entries); keys of an `[execution]` table in it replace the test
    /// defaults (tasks as the daemon's user, no cgroups).
    pub fn start_with_config(gpus: u32, extra_toml: &str) -> Self {
        Self::start_inner(gpus, extra_toml, None)
    }

    /// Like [`Daemon::start_with_config`], serving HTTPS with `[tls]` `cert` and `key`
    /// (PEM files); the harness's own requests trust `cert` (a self-signed certificate)
    /// and nothing else. [`Daemon::url`] is then an `https://` URL.
    pub fn start_tls(gpus: u32, extra_toml: &str, cert: &Path, key: &Path) -> Self {
        let tls = format!(
            "{extra_toml}\n[tls]\ncert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        );
        let pem = fs::read(cert).expect("cannot read the test certificate");
        let trusted = ureq::tls::Certificate::from_pem(&pem).expect("not a PEM certificate");
        Self::start_inner(gpus, &tls, Some(trusted))
    }

    /// Like [`Daemon::start_with_config`], letting `prepare` change the daemon's command
    /// before it starts (e.g. give it a controlling terminal or an extra descriptor, as an
    /// operator's shell might); a restart starts it plainly.
    pub fn start_prepared(gpus: u32, extra_toml: &str, prepare: &dyn Fn(&mut Command)) -> Self {
        Self::start_inner_prepared(gpus, extra_toml, None, prepare)
    }

    fn start_inner(
        gpus: u32,
        extra_toml: &str,
        trusted: Option<ureq::tls::Certificate<'static>>,
    ) -> Self {
        Self::start_inner_prepared(gpus, extra_toml, trusted, &|_| {})
    }

    /// Like [`Daemon::start_with_config`], listening on `listen` (e.g. `127.0.0.1:PORT`)
    /// instead of a free port, at every start: a controller that restarts (or steps down and
    /// comes back) keeps its address, as a real one does.
    pub fn start_listening(listen: &str, gpus: u32, extra_toml: &str) -> Self {
        LISTEN.with(|l| *l.borrow_mut() = Some(listen.to_string()));
        let d = Self::start_inner_prepared(gpus, extra_toml, None, &|_| {});
        LISTEN.with(|l| *l.borrow_mut() = None);
        d
    }

    /// Like [`Daemon::start_with_config`], reading the local node's GPUs through the fake
    /// NVML library with `scenario` (`crate::fake_nvml`), at every start: `extra_toml`
    /// must set `[node] nvml_library`.
    pub fn start_on_fake_nvml(scenario: &Path, extra_toml: &str) -> Self {
        FAKE_NVML.with(|f| *f.borrow_mut() = Some(scenario.to_path_buf()));
        let d = Self::start_inner_prepared(0, extra_toml, None, &|_| {});
        FAKE_NVML.with(|f| *f.borrow_mut() = None);
        d
    }

    /// Like [`Daemon::start_with_config`], running the `gantry` binary at `bin` (e.g. the
    /// previous release's) instead of this build's, at every start.
    pub fn start_with_binary(bin: &Path, extra_toml: &str) -> Self {
        BINARY.with(|b| *b.borrow_mut() = Some(bin.to_path_buf()));
        let d = Self::start_inner_prepared(0, extra_toml, None, &|_| {});
        BINARY.with(|b| *b.borrow_mut() = None);
        d
    }

    /// [`Daemon::start_listening`] and [`Daemon::start_with_binary`] at once: a controller of
    /// the previous release at a fixed address, to be upgraded in place
    /// ([`Daemon::stop_gracefully`], [`Daemon::start_again`]).
    pub fn start_listening_with_binary(listen: &str, bin: &Path, extra_toml: &str) -> Self {
        LISTEN.with(|l| *l.borrow_mut() = Some(listen.to_string()));
        let d = Self::start_with_binary(bin, extra_toml);
        LISTEN.with(|l| *l.borrow_mut() = None);
        d
    }

    /// Stops the daemon as an administrator does before an upgrade: SIGTERM, then waits
    /// (within [`WAIT`]) for it to exit. [`Daemon::start_again`] starts it.
    pub fn stop_gracefully(&mut self) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + WAIT;
        while self
            .child
            .try_wait()
            .expect("cannot wait for the daemon")
            .is_none()
        {
            assert!(
                Instant::now() < deadline,
                "the daemon did not exit on SIGTERM"
            );
            std::thread::sleep(POLL);
        }
    }

    /// Starts a stopped daemon again on the same directory, configuration and address,
    /// running `bin` (`None`: this build's): an upgrade in place.
    pub fn start_again(&mut self, bin: Option<&Path>) {
        let file = self.dir.path().join(process::BINARY_FILE);
        match bin {
            Some(b) => fs::write(&file, b.as_os_str().as_encoded_bytes()).expect("cannot write"),
            None => {
                if file.exists() {
                    fs::remove_file(&file).expect("cannot remove the binary file");
                }
            }
        }
        self.generation += 1;
        let (child, base) = process::spawn(self.dir.path(), self.gpus, self.generation);
        self.child = child;
        self.base = base;
    }

    fn start_inner_prepared(
        gpus: u32,
        extra_toml: &str,
        trusted: Option<ureq::tls::Certificate<'static>>,
        prepare: &dyn Fn(&mut Command),
    ) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gantry-e2e-")
            .tempdir()
            .expect("cannot create a temp dir");
        fs::write(
            dir.path().join("gantry.toml"),
            with_execution_defaults(&format!(
                "{CONFIG}\n{extra_toml}\n{}",
                if extra_toml.contains("[auth]") {
                    ""
                } else {
                    ANONYMOUS_ADMIN
                }
            )),
        )
        .expect("cannot write the config");
        make_private(&dir.path().join("gantry.toml"));
        if let Some(listen) = LISTEN.with(|l| l.borrow().clone()) {
            fs::write(dir.path().join(process::LISTEN_FILE), listen).expect("cannot write");
        }
        if let Some(bin) = BINARY.with(|b| b.borrow().clone()) {
            fs::write(
                dir.path().join(process::BINARY_FILE),
                bin.as_os_str().as_encoded_bytes(),
            )
            .expect("cannot write");
        }
        if let Some(scenario) = FAKE_NVML.with(|f| f.borrow().clone()) {
            fs::write(
                dir.path().join(process::FAKE_NVML_FILE),
                scenario.as_os_str().as_encoded_bytes(),
            )
            .expect("cannot write");
        }
        fs::create_dir_all(dir.path().join("out")).expect("cannot create the out dir");
        let (child, base) = process::spawn_prepared(dir.path(), gpus, 0, prepare);
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some(cert) = trusted {
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&[cert]));
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(60)))
            .tls_config(tls.build())
            .build();
        Self {
            child,
            base,
            agent: ureq::Agent::new_with_config(config),
            gpus,
            generation: 0,
            dir,
        }
    }

    /// SIGKILLs the daemon (its tasks keep running) and starts a new one on the same data
    /// directory, on a new port.
    pub fn restart_after_sigkill(&mut self) {
        self.restart_after_sigkill_with(|_| {});
    }

    /// Like [`Daemon::restart_after_sigkill`], running `between` on the data directory
    /// while no daemon holds it (e.g. to write records into its store).
    pub fn restart_after_sigkill_with(&mut self, between: impl FnOnce(&Path)) {
        self.child.kill().expect("cannot SIGKILL the daemon");
        self.child.wait().expect("cannot reap the daemon");
        between(&self.dir.path().join("data"));
        self.generation += 1;
        let (child, base) = process::spawn(self.dir.path(), self.gpus, self.generation);
        self.child = child;
        self.base = base;
    }

    /// SIGKILLs the daemon and reaps it, leaving its directory and its tasks in place (a
    /// controller's machine dying).
    pub fn sigkill(&mut self) {
        self.child.kill().expect("cannot SIGKILL the daemon");
        self.child.wait().expect("cannot reap the daemon");
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP`, `libc::SIGCONT`) to the daemon.
    pub fn signal(&self, signal: i32) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid, which we have not reaped.
        let done = unsafe { libc::kill(pid, signal) };
        assert_eq!(done, 0, "kill({pid}, {signal}) failed");
    }

    /// The addresses the daemon has printed, oldest first (a controller that stepped down
    /// and came back as a standby prints a new one).
    pub fn listening_addresses(&self) -> Vec<String> {
        let out = fs::read_to_string(
            self.dir
                .path()
                .join(format!("daemon-{}.out", self.generation)),
        )
        .unwrap_or_default();
        out.lines()
            .filter_map(|l| l.strip_prefix("gantry listening on "))
            .map(|a| a.trim().to_string())
            .collect()
    }

    /// Every line of the current daemon's stdout and stderr (its log) that contains `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        ["out", "err"]
            .iter()
            .flat_map(|ext| {
                let path = self
                    .dir
                    .path()
                    .join(format!("daemon-{}.{ext}", self.generation));
                fs::read_to_string(path)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(needle))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The current daemon's process id (e.g. to read its memory use in `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where jobs write their env files and the test puts release files.
    pub fn out_dir(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// The last lines of the current daemon's stdout and stderr, for failure messages.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        for ext in ["out", "err"] {
            let path = self
                .dir
                .path()
                .join(format!("daemon-{}.{ext}", self.generation));
            let all = fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = all.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            text += &format!("--- {} ---\n{tail}\n", path.display());
        }
        text
    }

    fn call(&self, method: &str, path: &str, body: Option<(&[u8], &str)>) -> (u16, String) {
        self.call_with(None, method, path, body)
    }

    /// One request, with `Authorization: Bearer <token>` when a token is given.
    fn call_with(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
    ) -> (u16, String) {
        let url = format!("{}{path}", self.base);
        let auth = |r| auth::bearer(r, token);
        let body_auth = |r| auth::bearer(r, token);
        let result = match (method, body) {
            ("GET", _) => auth(self.agent.get(&url)).call(),
            ("DELETE", _) => auth(self.agent.delete(&url)).call(),
            ("POST", Some((b, ct))) => body_auth(self.agent.post(&url))
                .header("content-type", ct)
                .send(b),
            ("PUT", Some((b, ct))) => body_auth(self.agent.put(&url))
                .header("content-type", ct)
                .send(b),
            _ => panic!("unsupported request {method} {path}"),
        };
        let mut resp =
            result.unwrap_or_else(|e| panic!("{method} {path} failed: {e}\n{}", self.log_tail()));
        let text = resp
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {path}: unreadable body: {e}"));
        (resp.status().as_u16(), text)
    }

    fn call_json(&self, method: &str, path: &str, body: Option<(&[u8], &str)>) -> (u16, Value) {
        let (status, text) = self.call(method, path, body);
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path} ({status}): not JSON ({e}): {text:?}"));
        (status, value)
    }

    /// GET, with a JSON answer.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call_json("GET", path, None)
    }

    /// GET, with a text answer.
    pub fn get_text(&self, path: &str) -> (u16, String) {
        self.call("GET", path, None)
    }

    /// POST a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let bytes = body.to_string().into_bytes();
        self.call_json("POST", path, Some((&bytes, "application/json")))
    }

    /// POST raw bytes (a plugin upload, or deliberately malformed JSON), with the type the
    /// route takes: `application/octet-stream` for `/v1/plugins`, else `application/json`.
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> (u16, Value) {
        self.call_json("POST", path, Some((body, bytes_type(path))))
    }

    /// POST a body with an explicit `Content-Type`.
    pub fn post_typed(&self, path: &str, body: &[u8], content_type: &str) -> (u16, Value) {
        self.call_json("POST", path, Some((body, content_type)))
    }

    /// DELETE, with a JSON answer.
    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.call_json("DELETE", path, None)
    }

    /// PUT a JSON body.
    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        let bytes = body.to_string().into_bytes();
        self.call_json("PUT", path, Some((&bytes, "application/json")))
    }

    /// Polls `probe` every 50 ms until it returns `Some`, or panics after `timeout`
    /// naming `what` and showing the daemon's log.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        probe: impl FnMut() -> Option<T>,
    ) -> T {
        poll_until(what, timeout, || self.log_tail(), probe)
    }

    /// Submits a job, asserting 201; returns its id.
    pub fn submit(&self, spec: &Value) -> u64 {
        let (status, body) = self.post("/v1/jobs", spec);
        assert_eq!(status, 201, "submit {spec} answered {body}");
        id_of(&body)
    }

    /// `GET /v1/jobs/{id}`, asserting 200.
    pub fn job(&self, id: u64) -> Value {
        let (status, body) = self.get(&format!("/v1/jobs/{id}"));
        assert_eq!(status, 200, "job {id}: {body}");
        body
    }

    /// Waits until job `id` is in `state`; panics at once if it ends in another state.
    pub fn wait_state(&self, id: u64, state: &str) -> Value {
        self.wait_for(&format!("job {id} to be {state}"), WAIT, || {
            let job = self.job(id);
            let now = job["state"].as_str().unwrap_or_default().to_string();
            if now != state && TERMINAL.contains(&now.as_str()) {
                panic!("job {id} ended {now}, not {state}: {job}");
            }
            (now == state).then_some(job)
        })
    }

    /// A job running `script` with `/bin/sh -c`, `OUTDIR` set to [`Daemon::out_dir`].
    pub fn shell_job(&self, name: &str, count: u32, gpus: u32, script: &str) -> Value {
        json!({
            "name": name,
            "argv": ["/bin/sh", "-c", script],
            "env": {"OUTDIR": self.out_dir()},
            "tasks": tasks(count, gpus),
        })
    }

    /// A job whose tasks record their environment and run until [`Daemon::release`].
    pub fn blocking_job(&self, name: &str, count: u32, gpus: u32) -> Value {
        self.shell_job(name, count, gpus, BLOCKING_SCRIPT)
    }

    /// Posts input to job `id`, again while its input is not open yet (409), until it is
    /// taken (for [`WAIT`] at most).
    pub fn send_input(&self, id: u64, body: &Value) {
        let deadline = Instant::now() + WAIT;
        loop {
            let (status, answer) = self.post(&format!("/v1/jobs/{id}/input"), body);
            if status == 200 {
                return;
            }
            assert_eq!(status, 409, "{answer}");
            assert!(Instant::now() < deadline, "input never taken: {answer}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Lets the tasks of a [`Daemon::blocking_job`] exit 0.
    pub fn release(&self, id: u64) {
        File::create(self.out_dir().join(format!("release-{id}"))).expect("cannot release");
    }

    /// The environment task `rank` of a blocking job recorded (waits for it to start), with
    /// `TASK_SHELL_PID` for the task's shell.
    pub fn task_env(&self, id: u64, rank: u32) -> BTreeMap<String, String> {
        let path = self.out_dir().join(format!("env-{id}-{rank}"));
        let text = self.wait_for(&format!("task {rank} of job {id} to start"), WAIT, || {
            fs::read_to_string(&path).ok()
        });
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Asserts the daemon's view of allocation is sound: no GPU holds more than 1000
    /// milli-GPU, no GPU is in two running jobs beyond its capacity, and every running job
    /// holds all of its tasks with the whole GPUs it asked for.
    pub fn check_allocations(&self) {
        let (_, nodes) = self.get("/v1/nodes");
        for gpu in nodes[0]["gpus"].as_array().expect("gpus") {
            let milli = gpu["allocated_milli"].as_u64().expect("allocated_milli");
            assert!(milli <= 1000, "GPU booked past capacity: {gpu}");
        }
        let (_, running) = self.get("/v1/jobs?state=running");
        let mut held: BTreeMap<u64, u64> = BTreeMap::new();
        for job in running.as_array().expect("job list") {
            let groups = job["spec"]["tasks"].as_array().expect("spec.tasks");
            let asked: Vec<u64> = groups
                .iter()
                .flat_map(|g| {
                    let n = g["count"].as_u64().expect("count") as usize;
                    std::iter::repeat_n(g["gpus"].as_u64().expect("gpus"), n)
                })
                .collect();
            let tasks = job["tasks"].as_array().expect("tasks");
            assert_eq!(tasks.len(), asked.len(), "job runs a partial gang: {job}");
            for (task, gpus) in tasks.iter().zip(asked) {
                let shares = task["gpus"].as_array().expect("task gpus");
                let mut idx: Vec<u64> = shares
                    .iter()
                    .map(|s| s["index"].as_u64().expect("index"))
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                if gpus > 0 {
                    assert_eq!(idx.len() as u64, gpus, "task holds wrong GPUs: {job}");
                }
                for s in shares {
                    *held.entry(s["index"].as_u64().expect("index")).or_default() +=
                        s["milli"].as_u64().expect("milli");
                }
            }
        }
        assert!(
            held.values().all(|m| *m <= 1000),
            "GPUs double booked: {held:?}"
        );
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        process::kill_tasks_under(self.dir.path());
        process::unmount_scratch_under(self.dir.path());
    }
}
