//! An etcd cluster of a test's own (feature `test-support`): the distribution's `etcd`
//! (`apt-get install etcd-server`), one or three members on 127.0.0.1 on free ports, each
//! with its data in a temporary directory, killed and deleted when dropped. A member can be
//! killed and started again on its data (a member's failure, and its return). A machine
//! without the binary fails the test with a message saying what to install.
//!
//! Owns: those processes. Does not own what tests do with them.

use crate::etcd::EtcdConfig;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to elect its raft leader and answer.
const READY_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// PEM files of a cluster that serves its clients over TLS and wants their certificates.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed the members' and clients' certificates.
    pub ca: PathBuf,
    /// The members' certificate (for 127.0.0.1) and key.
    pub server_cert: PathBuf,
    /// The members' key.
    pub server_key: PathBuf,
}

/// A running test cluster.
#[derive(Debug)]
pub struct TestEtcd {
    dir: tempfile::TempDir,
    binary: PathBuf,
    members: Vec<Member>,
    tls: Option<TlsFiles>,
    /// The client certificate and key the cluster's own checks use (with `tls`).
    client: Option<(PathBuf, PathBuf)>,
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn etcd_binary() -> Result<PathBuf, String> {
    ["/usr/bin/etcd", "/usr/local/bin/etcd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| "no etcd binary: apt-get install etcd-server".into())
}

impl TestEtcd {
    /// Starts a cluster of `size` members and waits until it answers.
    pub fn start(size: usize) -> Result<Self, String> {
        Self::start_with(size, None, None)
    }

    /// Starts a cluster of `size` members serving clients over TLS with `tls` and requiring
    /// a client certificate signed by its CA; `client` (certificate, key) is what its own
    /// readiness check presents.
    pub fn start_tls(
        size: usize,
        tls: TlsFiles,
        client: (PathBuf, PathBuf),
    ) -> Result<Self, String> {
        Self::start_with(size, Some(tls), Some(client))
    }

    fn start_with(
        size: usize,
        tls: Option<TlsFiles>,
        client: Option<(PathBuf, PathBuf)>,
    ) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("gantry-etcd-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let mut members = Vec::new();
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                child: None,
            });
        }
        let mut cluster = Self {
            dir,
            binary: etcd_binary()?,
            members,
            tls,
            client,
        };
        for i in 0..size {
            cluster.run_member(i, true)?;
        }
        cluster.wait_ready()?;
        Ok(cluster)
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn run_member(&mut self, i: usize, first: bool) -> Result<(), String> {
        let initial = self.initial_cluster();
        let m = &self.members[i];
        let data = self.dir.path().join(&m.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .map_err(|e| e.to_string())?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut command = Command::new(&self.binary);
        command
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-token", "gantry-test"])
            .args([
                "--initial-cluster-state",
                if first { "new" } else { "existing" },
            ])
            // Fast elections on one machine: a lost member is noticed within a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.server_cert)
                .arg("--key-file")
                .arg(&tls.server_key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        let child = command.spawn().map_err(|e| format!("etcd: {e}"))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// Waits until a write through every live member's endpoint succeeds.
    pub fn wait_ready(&self) -> Result<(), String> {
        let started = Instant::now();
        let client = crate::etcd::Etcd::new(&self.config("/ready/")).map_err(|e| e.to_string())?;
        loop {
            let put = client.txn(
                vec![],
                vec![crate::etcd::put_op(b"/ready", b"1", 0)],
                vec![],
            );
            match put {
                Ok(_) => return Ok(()),
                Err(_) if started.elapsed() < READY_WITHIN => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(format!(
                        "etcd not ready in {READY_WITHIN:?}: {e}\n{}",
                        self.logs()
                    ));
                }
            }
        }
    }

    /// Every member's log so far.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name)))
                    .unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                format!(
                    "--- {} ---\n{}",
                    m.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// A client configuration for every member, with key prefix `prefix` (and, with TLS,
    /// the CA and the client certificate given at start).
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        EtcdConfig {
            endpoints: self.endpoints(),
            prefix: prefix.into(),
            ca: self.tls.as_ref().map(|t| t.ca.clone()),
            cert: self.client.as_ref().map(|c| c.0.clone()),
            key: self.client.as_ref().map(|c| c.1.clone()),
            ..EtcdConfig::default()
        }
    }

    /// Turns etcd's authentication on with one user, `user` with `password`, in the
    /// `root` role (etcd needs a `root` user first: it is made too, with the same
    /// password). From then on a client must log in ([`EtcdConfig::username`]).
    pub fn enable_auth(&self, user: &str, password: &str) -> Result<(), String> {
        let client = crate::etcd::Etcd::new(&self.config("/")).map_err(|e| e.to_string())?;
        let call = |path: &str, body: serde_json::Value| {
            client
                .call(path, &body)
                .map(drop)
                .map_err(|e| format!("{path}: {e}"))
        };
        call("/v3/auth/role/add", serde_json::json!({"name": "root"}))?;
        let users = if user == "root" {
            vec!["root"]
        } else {
            vec!["root", user]
        };
        for name in users {
            call(
                "/v3/auth/user/add",
                serde_json::json!({"name": name, "password": password}),
            )?;
            call(
                "/v3/auth/user/grant",
                serde_json::json!({"user": name, "role": "root"}),
            )?;
        }
        call("/v3/auth/enable", serde_json::json!({}))
    }

    /// Kills member `i` (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.run_member(i, false)
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
