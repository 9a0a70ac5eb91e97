//! A PostgreSQL server of a test's own (feature `test-support`): the distribution's
//! server binaries (`apt-get install postgresql`), a fresh cluster in a temporary
//! directory, listening on 127.0.0.1 on a free port with a socket in that directory, stopped
//! and deleted when dropped. As root the server runs as the `postgres` user the package
//! made (PostgreSQL refuses root); as anyone else, as the caller. A machine without the
//! binaries fails the test with a message saying what to install: never a silent skip.
//!
//! Owns: that server's life. Does not own what tests do with it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A running test server.
#[derive(Debug)]
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
    /// `setpriv` arguments that run a command as the server's user (empty when not root).
    as_owner: Vec<String>,
}

/// The newest `/usr/lib/postgresql/N/bin` with `initdb` and `postgres`.
fn server_binaries() -> Result<PathBuf, String> {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .map_err(|e| {
            format!(
                "no PostgreSQL server in {} ({e}): apt-get install postgresql",
                root.display()
            )
        })?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        format!(
            "no initdb under {}: apt-get install postgresql",
            root.display()
        )
    })
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn is_root() -> bool {
    // The effective uid of this process, from the kernel's own account of it.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

impl TestPostgres {
    /// Makes a cluster and starts its server; returns once it accepts connections.
    pub fn start() -> Result<Self, String> {
        let bin = server_binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("gantry-pg-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let as_owner = if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !chown.success() {
                return Err(
                    "cannot give the test cluster's directory to the postgres user \
                            (apt-get install postgresql makes that user)"
                        .into(),
                );
            }
            [
                "--reuid=postgres",
                "--regid=postgres",
                "--clear-groups",
                "--",
            ]
            .map(String::from)
            .to_vec()
        } else {
            Vec::new()
        };
        let mut server = Self {
            dir,
            bin,
            port: free_port()?,
            child: None,
            as_owner,
        };
        let data = server.data_dir();
        let out = server
            .command("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "gantry",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .arg("-D")
            .arg(&data)
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        server.run()?;
        Ok(server)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut c = if self.as_owner.is_empty() {
            Command::new(path)
        } else {
            let mut c = Command::new("setpriv");
            c.args(&self.as_owner).arg(path);
            c
        };
        c.stdin(Stdio::null());
        c
    }

    /// Starts the server on the cluster (again, after [`TestPostgres::kill`]).
    pub fn run(&mut self) -> Result<(), String> {
        let log =
            std::fs::File::create(self.dir.path().join("server.log")).map_err(|e| e.to_string())?;
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(["-c", "fsync=off", "-c", "max_connections=40"])
            // A group of its own: `kill` ends the postmaster and every backend at once.
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("postgres: {e}"))?;
        self.child = Some(child);
        let started = Instant::now();
        loop {
            match postgres::Client::connect(&self.url("postgres"), postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(_) if started.elapsed() < READY_WITHIN => {
                    if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                        return Err(format!("postgres exited ({status}): {}", self.log()));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(format!("postgres not ready in {READY_WITHIN:?}: {e}")),
            }
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Stops the server at once: SIGKILL to the postmaster and every backend (its process
    /// group), then waits until none is left. Backends only notice their postmaster's death
    /// at their next check, so killing the postmaster alone let a busy one answer a query
    /// after `kill` returned.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.kill();
            let _ = child.wait();
            let started = Instant::now();
            while Command::new("kill")
                .args(["-0", "--", &group])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
                && started.elapsed() < READY_WITHIN
            {
                let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                std::thread::sleep(Duration::from_millis(20));
            }
            // The next start waits for the port and shared memory to be free.
            while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && started.elapsed() < READY_WITHIN
            {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Gives `user` the password `password` and makes the server ask for it on TCP
    /// (`scram-sha-256`; its Unix socket stays `trust`). Create the databases first:
    /// [`TestPostgres::database`] connects without a password.
    pub fn require_password(&self, user: &str, password: &str) -> Result<(), String> {
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .map_err(|e| e.to_string())?;
        let quoted = password.replace('\'', "''");
        admin
            .batch_execute(&format!(
                "SET password_encryption = 'scram-sha-256'; ALTER ROLE \"{}\" PASSWORD '{quoted}'",
                user.replace('"', "")
            ))
            .map_err(|e| e.to_string())?;
        // Rewritten in place: the file keeps its owner (the server's user).
        std::fs::write(
            self.data_dir().join("pg_hba.conf"),
            "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
        )
        .map_err(|e| e.to_string())?;
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .map_err(|e| e.to_string())?;
        // The reload is asynchronous: wait until a password-less connection is refused.
        let started = Instant::now();
        while postgres::Client::connect(&self.url("postgres"), postgres::NoTls).is_ok() {
            if started.elapsed() > READY_WITHIN {
                return Err("the server still accepts connections without a password".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// The 127.0.0.1 port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connection string of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://gantry@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` (a plain identifier) and returns its connection string.
    pub fn database(&self, name: &str) -> Result<String, String> {
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .map_err(|e| e.to_string())?;
        admin
            .batch_execute(&format!("CREATE DATABASE \"{}\"", name.replace('"', "")))
            .map_err(|e| e.to_string())?;
        Ok(self.url(name))
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            // A fast shutdown (SIGINT) lets the server remove its shared memory.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
