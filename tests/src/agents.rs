//! Harness for multi-node tests: real `gantry agent` processes on 127.0.0.1 joining a
//! [`Daemon`] run as a controller (`[cluster]` in its config), each with its own temporary
//! data directory and fake GPUs, and a [`Relay`]: a TCP forwarder with a fixed address whose
//! target can change, so agents keep one controller URL across a controller restart (the
//! daemon harness restarts on a new port).
//!
//! An [`Agent`] is started, waited for (its "listening on" line, then its node `up` in the
//! controller's `GET /v1/nodes`), SIGKILLed and restarted on the same data directory. Tasks
//! outlive their agent by design; dropping an [`Agent`] SIGKILLs it and every task process
//! whose command line names its directory (the task shims), with their process groups.
//!
//! Owns: agent processes, their config and logs, and the relay. Does not own the controller
//! (`Daemon`) or what tests assert.

use crate::process::FAKE_NVML_FILE;
use crate::{Daemon, POLL, WAIT, gantry_bin, process, with_execution_defaults};
use serde_json::Value;
use std::fs::{self, File};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An agent's config: a short kill grace, and tasks as the agent's user without cgroups
/// (see [`with_execution_defaults`]).
const AGENT_CONFIG: &str = "kill_grace_s = 2\n";

/// A file in an agent's directory naming the `gantry` binary it runs (default: this build's).
const AGENT_BINARY_FILE: &str = "agent-binary";

/// What an agent may start with beyond its name, GPUs and token.
#[derive(Default, Clone, Copy)]
struct Extras<'a> {
    /// Appended to its config.
    extra_toml: &'a str,
    /// The CA it trusts for an `https://` controller.
    ca_cert: Option<&'a Path>,
    /// A fake NVML scenario: its GPUs come from NVML (`crate::fake_nvml`).
    scenario: Option<&'a Path>,
    /// Another `gantry` binary to run.
    bin: Option<&'a Path>,
}

/// A running (or exited) `gantry agent`.
pub struct Agent {
    child: Child,
    dir: tempfile::TempDir,
    name: String,
    gpus: u32,
    controller: String,
    token: String,
    generation: u32,
    url: Option<String>,
    http: ureq::Agent,
}

impl Agent {
    /// Starts agent `name` with `gpus` fake GPUs for the controller at `controller` (a URL:
    /// `d.url()` or a [`Relay`]'s), proving itself with `token`, and waits until it listens
    /// and its node is `up` in `d`'s `/v1/nodes`.
    pub fn start(d: &Daemon, controller: &str, name: &str, gpus: u32, token: &str) -> Self {
        let agent = Self::spawn(controller, name, gpus, token);
        agent.wait_up(d);
        agent
    }

    /// [`Agent::start`] with `extra_toml` appended to the agent's config (an `[execution]`
    /// table there takes the tests' defaults for what it does not set).
    pub fn start_with(
        d: &Daemon,
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        extra_toml: &str,
    ) -> Self {
        let agent = Self::spawn_with(controller, name, gpus, token, extra_toml, None);
        agent.wait_up(d);
        agent
    }

    /// Starts the agent process and waits until it prints its address or exits (then
    /// [`Agent::url`] panics; see [`Agent::wait_exit`]); does not wait for its node.
    pub fn spawn(controller: &str, name: &str, gpus: u32, token: &str) -> Self {
        Self::spawn_with(controller, name, gpus, token, "", None)
    }

    /// Like [`Agent::start`], serving HTTPS with the PEM `cert` and `key` and trusting only
    /// `cert` for an `https://` controller (`--ca-cert`): one self-signed certificate for
    /// 127.0.0.1 serves both sides in tests.
    pub fn start_tls(
        d: &Daemon,
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        cert: &Path,
        key: &Path,
    ) -> Self {
        let tls = format!(
            "[tls]\ncert = {:?}\nkey = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        );
        let agent = Self::spawn_with(controller, name, gpus, token, &tls, Some(cert));
        agent.wait_up(d);
        agent
    }

    /// Like [`Agent::start_with`], reading its GPUs through the fake NVML library with
    /// `scenario` (`crate::fake_nvml`): `extra_toml` must set `[node] nvml_library`.
    pub fn start_on_fake_nvml(
        d: &Daemon,
        controller: &str,
        name: &str,
        token: &str,
        extra_toml: &str,
        scenario: &Path,
    ) -> Self {
        let extras = Extras {
            extra_toml,
            scenario: Some(scenario),
            ..Extras::default()
        };
        let agent = Self::spawn_full(controller, name, 0, token, &extras);
        agent.wait_up(d);
        agent
    }

    /// Like [`Agent::start`], running the `gantry` binary at `bin` (e.g. the previous
    /// release's, for the mixed-version tests) instead of this build's.
    pub fn start_with_binary(
        d: &Daemon,
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        bin: &Path,
    ) -> Self {
        let extras = Extras {
            bin: Some(bin),
            ..Extras::default()
        };
        let agent = Self::spawn_full(controller, name, gpus, token, &extras);
        agent.wait_up(d);
        agent
    }

    /// [`Agent::spawn`] with `extra_toml` appended to the agent's config, trusting only
    /// `ca_cert` (copied into its directory as `ca.pem`) for an `https://` controller.
    fn spawn_with(
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        extra_toml: &str,
        ca_cert: Option<&Path>,
    ) -> Self {
        let extras = Extras {
            extra_toml,
            ca_cert,
            ..Extras::default()
        };
        Self::spawn_full(controller, name, gpus, token, &extras)
    }

    fn spawn_full(
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        extras: &Extras<'_>,
    ) -> Self {
        let Extras {
            extra_toml,
            ca_cert,
            scenario,
            bin,
        } = *extras;
        let dir = tempfile::Builder::new()
            .prefix("gantry-e2e-agent-")
            .tempdir()
            .expect("cannot create a temp dir");
        fs::write(
            dir.path().join("agent.toml"),
            with_execution_defaults(&format!("{AGENT_CONFIG}{extra_toml}")),
        )
        .expect("cannot write the agent config");
        crate::make_private(&dir.path().join("agent.toml"));
        if let Some(ca) = ca_cert {
            fs::copy(ca, dir.path().join("ca.pem")).expect("cannot copy the CA certificate");
        }
        if let Some(bin) = bin {
            fs::write(
                dir.path().join(AGENT_BINARY_FILE),
                bin.as_os_str().as_encoded_bytes(),
            )
            .expect("cannot name the agent's binary");
        }
        if let Some(scenario) = scenario {
            fs::write(
                dir.path().join(FAKE_NVML_FILE),
                scenario.as_os_str().as_encoded_bytes(),
            )
            .expect("cannot name the fake NVML scenario");
        }
        let child = Self::launch(dir.path(), controller, name, gpus, token, 0);
        let http = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .proxy(None)
                .timeout_global(Some(Duration::from_secs(30)))
                .build(),
        );
        let mut agent = Self {
            child,
            dir,
            name: name.to_string(),
            gpus,
            controller: controller.to_string(),
            token: token.to_string(),
            generation: 0,
            url: None,
            http,
        };
        agent.url = agent.wait_listening();
        agent
    }

    fn launch(
        dir: &Path,
        controller: &str,
        name: &str,
        gpus: u32,
        token: &str,
        generation: u32,
    ) -> Child {
        let file = |ext: &str| {
            File::create(dir.join(format!("agent-{generation}.{ext}")))
                .expect("cannot create the agent's output file")
        };
        // Another build of gantry (an earlier release) when the directory names one.
        let bin = fs::read_to_string(dir.join(AGENT_BINARY_FILE))
            .map_or_else(|_| gantry_bin().to_path_buf(), PathBuf::from);
        let mut cmd = Command::new(bin);
        let ca = dir.join("ca.pem");
        if ca.exists() {
            cmd.env("GANTRY_CA_CERT", ca);
        } else {
            cmd.env_remove("GANTRY_CA_CERT");
        }
        cmd.arg("agent")
            .args(["--controller", controller, "--listen", "127.0.0.1:0"])
            .args(["--name", name]);
        match fs::read_to_string(dir.join(FAKE_NVML_FILE)) {
            Ok(scenario) => cmd.env(crate::fake_nvml::SCENARIO_ENV, scenario.trim()),
            Err(_) => cmd.args(["--gpus", &gpus.to_string(), "--no-nvml"]),
        };
        cmd.arg("--config")
            .arg(dir.join("agent.toml"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("GANTRY_CLUSTER_TOKEN", token)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file("out"))
            .stderr(file("err"))
            .spawn()
            .expect("cannot start gantry agent")
    }

    /// Polls for the "listening on" line: its URL, or `None` once the agent exited.
    fn wait_listening(&mut self) -> Option<String> {
        let prefix = format!("gantry agent {} listening on ", self.name);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let url = self
                .stdout()
                .split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .map(|u| u.trim().to_string());
            if url.is_some() {
                return url;
            }
            if self.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if Instant::now() >= deadline {
                panic!(
                    "agent {} neither listened nor exited within 60 s\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits (bounded) until the agent's node is `up` in `d`'s `/v1/nodes` with this agent's
    /// URL; returns the node's view.
    pub fn wait_up(&self, d: &Daemon) -> Value {
        let url = self.url().to_string();
        self.poll(
            &format!("node {} to be up with agent {url}", self.name),
            WAIT,
            d,
            || node(d, &self.name).filter(|n| n["state"] == "up" && n["agent"] == url.as_str()),
        )
    }

    /// Polls `probe` until `Some`, or panics after `timeout` with the agent's and the
    /// controller's logs.
    pub fn poll<T>(
        &self,
        what: &str,
        timeout: Duration,
        d: &Daemon,
        probe: impl FnMut() -> Option<T>,
    ) -> T {
        let logs = || format!("{}\n{}", self.log_tail(), d.log_tail());
        crate::poll_until(what, timeout, logs, probe)
    }

    /// Waits up to `timeout` for the agent to exit; its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("cannot poll the agent") {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "agent {} did not exit within {timeout:?}\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// SIGKILLs the agent (its tasks keep running) and reaps it.
    pub fn sigkill(&mut self) {
        self.child.kill().expect("cannot SIGKILL the agent");
        self.child.wait().expect("cannot reap the agent");
    }

    /// Starts the agent again on the same data directory (after [`Agent::sigkill`]), on a
    /// new port, and waits until its node is `up` with the new URL.
    pub fn restart(&mut self, d: &Daemon) {
        assert!(
            self.child.try_wait().ok().flatten().is_some(),
            "restart of agent {} while it still runs",
            self.name
        );
        self.generation += 1;
        self.child = Self::launch(
            self.dir.path(),
            &self.controller,
            &self.name,
            self.gpus,
            &self.token,
            self.generation,
        );
        self.url = self.wait_listening();
        self.wait_up(d);
    }

    /// The agent's node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current agent process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The agent's URL (`http://127.0.0.1:<port>`); panics if it never listened.
    pub fn url(&self) -> &str {
        self.url.as_deref().unwrap_or_else(|| {
            panic!(
                "agent {} exited before listening\n{}",
                self.name,
                self.log_tail()
            )
        })
    }

    /// The agent's data directory (task runs are in `agent-tasks/<job>.<task>.<run>/`).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn read(&self, ext: &str) -> String {
        let path = self
            .dir
            .path()
            .join(format!("agent-{}.{ext}", self.generation));
        fs::read_to_string(path).unwrap_or_default()
    }

    /// Everything the current agent process printed on stdout (its address and its log).
    pub fn stdout(&self) -> String {
        self.read("out")
    }

    /// Everything the current agent process printed on stderr (its fatal error).
    pub fn stderr(&self) -> String {
        self.read("err")
    }

    /// The last 40 lines of the current agent process's stdout and stderr.
    pub fn log_tail(&self) -> String {
        let tail = |all: String| {
            let lines: Vec<&str> = all.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- agent {} (generation {}) stdout ---\n{}\n--- stderr ---\n{}\n",
            self.name,
            self.generation,
            tail(self.stdout()),
            tail(self.stderr())
        )
    }

    /// POSTs `body` to the agent's `path` with `Authorization: Bearer <token>` when a token
    /// is given; the status and the JSON answer.
    pub fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut request = self.http.post(format!("{}{path}", self.url()));
        if let Some(t) = token {
            request = request.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = request
            .header("content-type", "application/json")
            .send(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("POST {path} to agent {}: {e}", self.name));
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("POST {path}: unreadable body: {e}"));
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("POST {path} ({status}): not JSON ({e}): {text:?}"));
        (status, value)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        process::kill_tasks_under(self.dir.path());
        process::unmount_scratch_under(self.dir.path());
    }
}

/// The view of node `name` in `d`'s `GET /v1/nodes`, if listed.
pub fn node(d: &Daemon, name: &str) -> Option<Value> {
    let (status, nodes) = d.get("/v1/nodes");
    assert_eq!(status, 200, "GET /v1/nodes: {nodes}");
    nodes
        .as_array()
        .expect("a node list")
        .iter()
        .find(|n| n["name"] == name)
        .cloned()
}

/// A TCP forwarder on a fixed 127.0.0.1 port to a controller whose address may change: each
/// connection is forwarded to the target of the moment (and refused, by closing it, while the
/// target does not answer). Dropping it stops accepting.
pub struct Relay {
    addr: SocketAddr,
    target: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
}

impl Relay {
    /// Forwards to `target` (`http://127.0.0.1:<port>`).
    pub fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind the relay");
        let addr = listener.local_addr().expect("the relay's address");
        listener
            .set_nonblocking(true)
            .expect("cannot make the relay non-blocking");
        let relay = Self {
            addr,
            target: Arc::new(Mutex::new(String::new())),
            stop: Arc::new(AtomicBool::new(false)),
        };
        relay.retarget(target);
        let (target, stop) = (relay.target.clone(), relay.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let to = target.lock().map(|t| t.clone()).unwrap_or_default();
                        std::thread::spawn(move || forward(client, &to));
                    }
                    // WouldBlock: nothing to accept yet; anything else: try again.
                    Err(_) => std::thread::sleep(POLL),
                }
            }
        });
        relay
    }

    /// The URL agents are given: `http://127.0.0.1:<relay port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Forwards new connections to `target` (`http://host:port`) from now on.
    pub fn retarget(&self, target: &str) {
        let hostport = target
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("the relay forwards plain http:// only, not {target}"))
            .trim_end_matches('/');
        if let Ok(mut t) = self.target.lock() {
            *t = hostport.to_string();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies bytes both ways between `client` and a new connection to `target` until either
/// side closes; closes `client` at once when `target` cannot be reached.
fn forward(client: TcpStream, target: &str) {
    let Ok(to) = target.parse::<SocketAddr>() else {
        return;
    };
    let Ok(upstream) = TcpStream::connect_timeout(&to, Duration::from_secs(2)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nonblocking(false);
    let (Ok(mut client_r), Ok(mut upstream_w)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut client_r, &mut upstream_w);
        let _ = upstream_w.shutdown(Shutdown::Write);
    });
    let (mut upstream_r, mut client_w) = (upstream, client);
    let _ = io::copy(&mut upstream_r, &mut client_w);
    // The controller closed (or died): close both ends, which also ends the other copy.
    let _ = client_w.shutdown(Shutdown::Both);
    let _ = upstream_r.shutdown(Shutdown::Both);
    let _ = up.join();
}

/// Rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1 connects and they exchange a
/// message: the rendezvous shape torchrun uses, standard library only.
pub const RENDEZVOUS: &str = r#"
import os, socket, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
node = os.environ["GANTRY_NODE"]
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port)); s.listen(world); s.settimeout(30)
    c, _ = s.accept(); peer = c.recv(128).decode(); c.sendall(f"welcome from {node}".encode()); c.close()
    print("rank0 on", node, "heard:", peer, flush=True)
else:
    deadline = time.time() + 30
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(0.1)
    c.sendall(f"rank {rank} of {world} on {node}".encode()); reply = c.recv(128).decode()
    print("rank1 on", node, "heard:", reply, flush=True)
"#;
