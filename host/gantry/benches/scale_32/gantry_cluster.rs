//! The Gantry side of `scale_32`: one `gantry serve` controller that runs nothing itself and
//! N `gantry agent` processes on 127.0.0.1, each with its own data directory, port, cgroup
//! parent and 8 fake GPUs (32 CPUs, 4 GiB, as the SLURM peer's nodes), with the execution
//! defaults (a cgroup per task, tasks as their user). Agents are SIGKILLed and restarted on
//! their data directory; a killed agent's tasks live on, as on a real node.
//!
//! Owns: the processes, their configs and `/proc` readings. Does not own the API calls
//! (`gantry_api.rs`) or the stream (`day.rs`).

use super::day::Res;
use super::gantry_api::{GantryAgents, GantryApi};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TOKEN: &str = "bench-scale-32-token-0123456789abcdef";

/// A process killed however the benchmark ends.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads stdout until a line containing `marker`; returns what follows it and keeps draining.
fn wait_line(child: &mut Child, marker: &str) -> Res<String> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let found = loop {
        let line = lines.next().ok_or("exited before listening")??;
        if let Some(i) = line.find(marker) {
            break line[i + marker.len()..].to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Ok(found)
}

/// Writes a config file only its owner may read (the daemon refuses others).
fn write_private(path: &Path, text: &str) -> Res<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    std::io::Write::write_all(&mut f, text.as_bytes())?;
    Ok(())
}

pub fn binary() -> PathBuf {
    std::env::var_os("GANTRY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/gantry")
        })
}

/// The controller and its agents.
pub struct GantryCluster {
    pub api: GantryApi,
    pub controller: Proc,
    agents: Vec<Mutex<Option<Proc>>>,
    dir: PathBuf,
    tag: String,
    pub down_after: Duration,
}

impl GantryCluster {
    /// Starts the controller and `n` agents and waits until all are up.
    pub fn start(dir: &Path, n: usize, down_after_ms: u64) -> Res<Self> {
        let tag = format!("scale32-{}", std::process::id());
        let cfg = dir.join("controller.toml");
        write_private(
            &cfg,
            &format!(
                "[auth]\nanonymous_role = \"admin\"\n[limits]\nmax_pending_per_user = 100000\n[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nnode_down_after_ms = {down_after_ms}\n"
            ),
        )?;
        let mut child = Command::new(binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--no-nvml", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.join("controller"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("controller.err"))?)
            .spawn()?;
        let base = wait_line(&mut child, "gantry listening on ")?;
        let mut me = Self {
            api: GantryApi::new(base.trim()),
            controller: Proc(child),
            agents: Vec::new(),
            dir: dir.to_path_buf(),
            tag,
            down_after: Duration::from_millis(down_after_ms),
        };
        for i in 0..n {
            me.agents.push(Mutex::new(Some(me.spawn_agent(i)?)));
        }
        me.wait_up(n, Duration::from_secs(120))?;
        Ok(me)
    }

    pub fn agent_name(i: usize) -> String {
        format!("n{:02}", i + 1)
    }

    fn spawn_agent(&self, i: usize) -> Res<Proc> {
        let name = Self::agent_name(i);
        let cfg = self.dir.join(format!("{name}.toml"));
        write_private(
            &cfg,
            &format!(
                "[node]\ncpu_milli = 32000\nmemory_mib = 4096\n[execution]\ncgroup_parent = \"{}-{name}\"\n",
                self.tag
            ),
        )?;
        let mut child = Command::new(binary())
            .args([
                "agent",
                "--controller",
                &self.api.base,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--name", &name, "--gpus", "8", "--no-nvml", "--config"])
            .arg(&cfg)
            .arg("--data-dir")
            .arg(self.dir.join(&name))
            .env("GANTRY_CLUSTER_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join(format!("{name}.err")))?,
            )
            .spawn()?;
        wait_line(&mut child, "listening on ")?;
        Ok(Proc(child))
    }

    /// Waits until `n` nodes are up.
    pub fn wait_up(&self, n: usize, limit: Duration) -> Res<()> {
        let t = Instant::now();
        loop {
            let up = self.api.nodes_up()?;
            if up >= n {
                return Ok(());
            }
            if t.elapsed() > limit {
                return Err(format!("only {up} of {n} nodes up after {limit:?}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Pids of the agents running now.
    pub fn agent_pids(&self) -> Vec<u32> {
        self.agents
            .iter()
            .filter_map(|a| a.lock().ok()?.as_ref().map(|p| p.0.id()))
            .collect()
    }

    /// Stops the agents, then every task process left under this run's data directory.
    pub fn stop(self) {
        for a in &self.agents {
            if let Ok(mut a) = a.lock() {
                a.take();
            }
        }
        let dir = self.dir.to_string_lossy().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&dir) {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        unmount_under(&self.dir);
        remove_cgroups(&self.tag);
    }
}

/// Detaches the mounts (task scratch) left under `dir` by tasks killed with their agents.
fn unmount_under(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for point in mounts.lines().filter_map(|l| l.split_whitespace().nth(1)) {
        if !Path::new(point).starts_with(dir) {
            continue;
        }
        if let Ok(c) = std::ffi::CString::new(point) {
            // SAFETY: a valid C string; MNT_DETACH has no other preconditions.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Removes the (empty) cgroup directories this run left, in every v1 hierarchy.
fn remove_cgroups(tag: &str) {
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        for parent in std::fs::read_dir(h.path()).into_iter().flatten().flatten() {
            if !parent.file_name().to_string_lossy().starts_with(tag) {
                continue;
            }
            for task in std::fs::read_dir(parent.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if task.path().is_dir() {
                    let _ = std::fs::remove_dir(task.path());
                }
            }
            let _ = std::fs::remove_dir(parent.path());
        }
    }
}

impl GantryAgents for GantryCluster {
    fn api(&self) -> &GantryApi {
        &self.api
    }
    fn node_name(&self, i: usize) -> String {
        Self::agent_name(i)
    }
    fn kill_agent(&self, i: usize) -> Res<()> {
        let slot = self.agents.get(i).ok_or("no such agent")?;
        let mut slot = slot.lock().map_err(|_| "poisoned")?;
        if let Some(mut p) = slot.take() {
            p.0.kill()?;
            p.0.wait()?;
        }
        Ok(())
    }
    fn restart_agent(&self, i: usize) -> Res<()> {
        let proc = self.spawn_agent(i)?;
        if let Some(slot) = self.agents.get(i) {
            *slot.lock().map_err(|_| "poisoned")? = Some(proc);
        }
        let t = Instant::now();
        while self.api.node_down(&Self::agent_name(i))? {
            if t.elapsed() > Duration::from_secs(60) {
                return Err("the restarted agent never came up".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
    fn down_for(&self) -> Duration {
        self.down_after + Duration::from_secs(5)
    }
}
