//! What the daemon benchmarks share (`retention_memory`, `history`, `store_backends`,
//! `submit_load`, `busy_cycle`): the binary under test, a daemon that dies with the
//! benchmark, starting `gantry serve` on 127.0.0.1 and waiting until it answers, an HTTP
//! client, knobs from the environment and the daemon's resident memory. Each benchmark
//! includes it as `mod common;` and uses what it needs.
//!
//! Owns: those helpers. Does not own any benchmark's configuration or measures.
#![allow(dead_code)]

use std::error::Error;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// A daemon, killed however the benchmark ends.
pub struct Daemon(pub Child);

impl Daemon {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `gantry` binary under test: `GANTRY_BENCH_BIN`, else this workspace's build.
pub fn gantry_bin() -> OsString {
    std::env::var_os("GANTRY_BENCH_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_gantry").into())
}

/// A number from the environment, `default` when unset or not a number.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A plain HTTP client (no proxy, statuses as answers) giving up after `timeout_s`.
pub fn agent(timeout_s: u64) -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_global(Some(Duration::from_secs(timeout_s)))
            .build(),
    )
}

/// How to start `gantry serve` in a directory.
pub struct Serve<'a> {
    /// The binary.
    pub binary: &'a OsStr,
    /// `--listen`.
    pub listen: &'a str,
    /// Arguments after `--listen` (`--gpus 4 --no-nvml`, ...).
    pub args: &'a [&'a str],
    /// `gantry.toml`, written into the directory (mode 0600: it may hold a token).
    pub config: &'a str,
    /// Keep the daemon's stderr in `daemon.err` (else it is dropped).
    pub keep_stderr: bool,
}

impl Serve<'_> {
    /// Starts the daemon with its data in `dir/data`; it and its base URL once it listens.
    pub fn start(&self, dir: &Path) -> Result<(Daemon, String)> {
        let cfg = dir.join("gantry.toml");
        std::fs::write(&cfg, self.config)?;
        std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let err_path = dir.join("daemon.err");
        let stderr = match self.keep_stderr {
            true => Stdio::from(std::fs::File::create(&err_path)?),
            false => Stdio::null(),
        };
        let mut child = Command::new(self.binary)
            .args(["serve", "--listen", self.listen])
            .args(self.args)
            .arg("--config")
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let daemon = Daemon(child);
        let mut lines = BufReader::new(stdout).lines();
        let base = loop {
            let Some(line) = lines.next() else {
                let err = std::fs::read_to_string(&err_path).unwrap_or_default();
                return Err(format!("the daemon exited before listening {err}").into());
            };
            let line = line?;
            if let Some(i) = line.find("gantry listening on ") {
                break line[i + "gantry listening on ".len()..].trim().to_string();
            }
        };
        // Keep draining stdout so the daemon never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.by_ref() {});
        Ok((daemon, base))
    }
}

/// Polls `GET base/v1/health` until it answers, for at most `limit`.
pub fn wait_healthy(base: &str, limit: Duration) -> Result<()> {
    let agent = agent(limit.as_secs().max(1));
    let deadline = Instant::now() + limit;
    while agent.get(format!("{base}/v1/health")).call().is_err() {
        if Instant::now() > deadline {
            return Err(format!("no /v1/health answer in {} s", limit.as_secs()).into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// The resident memory of process `pid`, MiB (NaN when it cannot be read).
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
