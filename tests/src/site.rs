//! Harness for a site set up as the administrator's guide says (`docs/admin/install.md`):
//! `gantry init` writes a controller's configuration, CA and certificates into a directory of
//! the test's, `gantry serve --config` runs on it, and nodes join with `gantry agent join`
//! on distinct ports and data directories, all on 127.0.0.1, as real processes.
//!
//! The site's directory is 0711 (so that `nobody` reaches the daemon's socket); tasks of the
//! controller's node and of `--no-start` agents get no cgroups (several daemons share the
//! host), and an agent started by `join` itself gets a cgroup parent of its own.
//!
//! Owns: those processes and files. Does not own what tests assert.

use crate::{gantry_bin, poll_until, with_execution_defaults};
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A controller made by `gantry init`, serving, and the agents that joined it.
pub struct Site {
    /// The site's directory (`etc/`, `ctl/`, one directory per node).
    pub dir: tempfile::TempDir,
    /// The controller's port on 127.0.0.1.
    pub port: u16,
    /// `gantry init`'s join command, split: (URL, token, CA hash).
    pub join: (String, String, String),
    serve: Option<Child>,
    agents: Vec<(String, Child)>,
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind");
    listener.local_addr().expect("no address").port()
}

/// Runs `gantry ARGS` to its end.
pub fn gantry(args: &[&str]) -> Output {
    Command::new(gantry_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("GANTRY_SERVER")
        .stdin(Stdio::null())
        .output()
        .expect("cannot run gantry")
}

/// Its stdout and stderr, for messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Site {
    /// `gantry init` for `nodes` joins (controller config: no cgroups, `local_gpus` fake GPUs
    /// on its own node), then `gantry serve` on it, waited for.
    pub fn init(nodes: u32, local_gpus: u32) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("gantry-e2e-site-")
            .tempdir()
            .expect("temp dir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o711)).expect("chmod");
        let port = free_port();
        let etc = dir.path().join("etc");
        let out = gantry(&[
            "init",
            "--config-dir",
            &etc.display().to_string(),
            "--data-dir",
            &dir.path().join("ctl").display().to_string(),
            "--advertise",
            // A name of the controller's besides loopback (joins may not claim it).
            "127.0.0.1,gpu-head.test",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--nodes",
            &nodes.to_string(),
        ]);
        assert!(out.status.success(), "gantry init failed: {}", text(&out));
        let printed = text(&out);
        let line = printed
            .lines()
            .find_map(|l| l.trim().strip_prefix("gantry agent join "))
            .unwrap_or_else(|| panic!("gantry init printed no join command:\n{printed}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.len(), 5, "{line}");
        let join = (
            words[0].to_string(),
            words[2].to_string(),
            words[4].to_string(),
        );
        let config = etc.join("gantry.toml");
        let written = fs::read_to_string(&config).expect("gantry init wrote no gantry.toml");
        let local = format!("\n[node]\ngpus = {local_gpus}\nuse_nvml = false\n");
        fs::write(
            &config,
            with_execution_defaults(&format!("{written}{local}")),
        )
        .expect("cannot extend the config");
        let mut site = Self {
            dir,
            port,
            join,
            serve: None,
            agents: Vec::new(),
        };
        site.serve = Some(site.spawn(
            &["serve", "--config", &config.display().to_string()],
            "serve",
        ));
        let socket = site.socket();
        poll_until(
            "the controller's socket",
            Duration::from_secs(60),
            || site.logs(),
            || {
                gantry(&["--server", &format!("unix:{}", socket.display()), "nodes"])
                    .status
                    .success()
                    .then_some(())
            },
        );
        site
    }

    fn spawn(&self, args: &[&str], name: &str) -> Child {
        let file = |ext: &str| {
            fs::File::create(self.dir.path().join(format!("{name}.{ext}"))).expect("log file")
        };
        Command::new(gantry_bin())
            .args(args)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file("out"))
            .stderr(file("err"))
            .spawn()
            .expect("cannot start gantry")
    }

    /// The controller's Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("ctl").join("gantry.sock")
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("etc").join("pki").join("ca.pem")
    }

    /// `gantry --server unix:SOCKET ARGS` as root.
    pub fn cli(&self, args: &[&str]) -> Output {
        let server = format!("unix:{}", self.socket().display());
        let mut all = vec!["--server", server.as_str()];
        all.extend_from_slice(args);
        gantry(&all)
    }

    /// `gantry agent join` for node `name` listening on `port`, writing
    /// `<site>/<dir>/agent.toml`, with `token` (default: init's) and `hash` (default: init's).
    pub fn join_args(
        &self,
        dir: &str,
        name: &str,
        port: u16,
        token: Option<&str>,
        hash: Option<&str>,
    ) -> Vec<String> {
        let node_dir = self.dir.path().join(dir);
        [
            "agent",
            "join",
            &self.join.0,
            "--token",
            token.unwrap_or(&self.join.1),
            "--ca-hash",
            hash.unwrap_or(&self.join.2),
            "--config",
            &node_dir.join("agent.toml").display().to_string(),
            "--data-dir",
            &node_dir.join("data").display().to_string(),
            "--name",
            name,
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--gpus",
            "2",
            "--no-nvml",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Joins `name` with `--no-start`, adds the tests' execution defaults to the written
    /// configuration and starts `gantry agent --config` on it with `binary` (default: the
    /// build's).
    pub fn join_then_start(&mut self, name: &str, binary: Option<&Path>) -> PathBuf {
        let mut args = self.join_args(name, name, free_port(), None, None);
        args.push("--no-start".into());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = gantry(&refs);
        assert!(
            out.status.success(),
            "join of {name} failed: {}",
            text(&out)
        );
        let config = self.dir.path().join(name).join("agent.toml");
        let written = fs::read_to_string(&config).expect("join wrote no agent.toml");
        fs::write(&config, with_execution_defaults(&written)).expect("cannot extend");
        self.start_agent(name, binary);
        config
    }

    /// Starts (again) `gantry agent --config <site>/<name>/agent.toml` with `binary`.
    pub fn start_agent(&mut self, name: &str, binary: Option<&Path>) {
        let config = self.dir.path().join(name).join("agent.toml");
        let generation = self.agents.iter().filter(|(n, _)| n == name).count();
        let log = |ext: &str| {
            fs::File::create(self.dir.path().join(format!("{name}-{generation}.{ext}")))
                .expect("log file")
        };
        let child = Command::new(binary.unwrap_or(gantry_bin()))
            .args(["agent", "--config", &config.display().to_string()])
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log("out"))
            .stderr(log("err"))
            .spawn()
            .expect("cannot start the agent");
        self.agents.push((name.to_string(), child));
    }

    /// Keeps `child` (an agent `gantry agent join` runs) to be killed with the site.
    pub fn adopt(&mut self, name: &str, child: Child) {
        self.agents.push((name.to_string(), child));
    }

    /// SIGTERMs node `name`'s newest agent and waits for it to exit.
    pub fn stop_agent(&mut self, name: &str) {
        let (_, child) = self
            .agents
            .iter_mut()
            .rev()
            .find(|(n, _)| n == name)
            .expect("no such agent");
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let exited = poll_until(
            "the agent to exit",
            Duration::from_secs(30),
            String::new,
            || child.try_wait().ok().flatten(),
        );
        assert!(exited.success() || exited.code().is_some(), "{exited:?}");
    }

    /// The nodes as the API shows them.
    pub fn nodes(&self) -> Vec<Value> {
        let out = self.cli(&["nodes", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// Waits until the nodes named are `up`.
    pub fn wait_up(&self, names: &[&str]) {
        poll_until(
            &format!("nodes {names:?} up"),
            Duration::from_secs(60),
            || self.logs(),
            || {
                let nodes = self.nodes();
                names
                    .iter()
                    .all(|n| {
                        nodes.iter().any(|v| {
                            v["name"] == *n && v["state"].as_str().is_some_and(|s| s == "up")
                        })
                    })
                    .then_some(())
            },
        );
    }

    /// A job's record.
    pub fn job(&self, id: u64) -> Value {
        let out = self.cli(&["job", &id.to_string(), "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Waits until job `id` has ended; its record.
    pub fn wait_ended(&self, id: u64, timeout: Duration) -> Value {
        poll_until(
            &format!("job {id} to end"),
            timeout,
            || self.logs(),
            || {
                let job = self.job(id);
                matches!(
                    job["state"].as_str(),
                    Some("succeeded" | "failed" | "cancelled" | "timeout")
                )
                .then_some(job)
            },
        )
    }

    /// The tails of every process's logs.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        let mut files: Vec<PathBuf> = fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "err" || e == "out"))
            .collect();
        files.sort();
        for f in files {
            let t = fs::read_to_string(&f).unwrap_or_default();
            let tail: String = t
                .chars()
                .rev()
                .take(3000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            all += &format!("--- {}\n{tail}\n", f.display());
        }
        all
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        for (_, child) in &mut self.agents {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(mut serve) = self.serve.take() {
            let _ = serve.kill();
            let _ = serve.wait();
        }
        // Tasks outlive their daemons by design: stop those of this site's directories.
        crate::process::kill_tasks_under(self.dir.path());
        crate::process::unmount_scratch_under(self.dir.path());
    }
}
