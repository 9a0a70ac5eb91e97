//! The SLURM side of `scale_32`: the same day through SLURM's own commands, on the peer
//! cluster a site's `setup.sh` started (`BENCH_SLURM_PEER` names its directory; nodes
//! `gpu01..gpuNN`, 8 fake GPUs each). Batch items are `sbatch --wrap`, gangs run their ranks
//! with `srun`, interactive items are `srun` in the foreground of a child process (reaped at
//! the end), cancels are `scancel`, requeues `scontrol requeue`, a node is killed by SIGKILL to
//! its `slurmd` and started again as the peer starts it. Final states come from `sacct`.
//!
//! The marker file's path reaches jobs through the submitting environment (SLURM's default
//! `--export=ALL`): an explicit `--export` list made every `slurmd` run `su - root` to read a
//! login environment for each job, which is not what the stream measures.
//!
//! SLURM has no replicated services: the day's 3-replica service is Gantry's alone.
//!
//! Owns: the command lines and their parsing. Does not own the peer's installation.

use super::day::{Cluster, Kind, Res, task_script};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct SlurmPeer {
    /// The peer's run directory (its pid files, `etc/slurm.conf`).
    run: PathBuf,
    pub down_after: Duration,
    interactive: Mutex<Vec<Child>>,
    seq: AtomicUsize,
}

fn out(cmd: &mut Command) -> Res<String> {
    let o = cmd.stderr(Stdio::piped()).output()?;
    if !o.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim()).into());
    }
    Ok(String::from_utf8_lossy(&o.stdout).to_string())
}

pub fn node_name(i: usize) -> String {
    format!("gpu{:02}", i + 1)
}

impl SlurmPeer {
    /// The peer running from `run` (its `SLURM_PEER_RUN`), with `SLURM_CONF` set for children.
    pub fn new(run: &Path, down_after: Duration) -> Self {
        // SAFETY: set before any thread of the benchmark reads the environment.
        unsafe { std::env::set_var("SLURM_CONF", run.join("etc/slurm.conf")) };
        Self {
            run: run.to_path_buf(),
            down_after,
            interactive: Mutex::new(Vec::new()),
            seq: AtomicUsize::new(0),
        }
    }

    fn pid_of(&self, file: &str) -> Res<u32> {
        let text = std::fs::read_to_string(self.run.join("pids").join(file))?;
        Ok(text.trim().parse()?)
    }

    pub fn slurmctld_pid(&self) -> Res<u32> {
        self.pid_of("slurmctld.pid")
    }

    /// Pids of the live `slurmd`s.
    pub fn slurmd_pids(&self) -> Vec<u32> {
        std::fs::read_dir(self.run.join("pids"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("slurmd-"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
            .filter(|p: &u32| Path::new(&format!("/proc/{p}")).exists())
            .collect()
    }

    /// Nodes idle or mixed or allocated (not down, not drained).
    pub fn nodes_up(&self) -> Res<usize> {
        let text = out(Command::new("sinfo").args(["-h", "-N", "-o", "%N %t"]))?;
        Ok(text
            .lines()
            .filter(|l| {
                let s = l.split_whitespace().nth(1).unwrap_or("");
                !s.contains("down") && !s.contains("drain") && !s.ends_with('*')
            })
            .count())
    }

    /// Jobs pending now (array members one by one).
    pub fn pending(&self) -> Res<usize> {
        let text = out(Command::new("squeue").args(["-h", "-r", "-t", "PD", "-o", "%i"]))?;
        Ok(text.lines().count())
    }

    /// `sdiag`'s scheduler statistics, then a reset of them.
    pub fn sdiag(&self, reset: bool) -> Res<BTreeMap<String, f64>> {
        let text = out(&mut Command::new("sdiag"))?;
        let mut section = "";
        let mut found = BTreeMap::new();
        for line in text.lines() {
            if line.starts_with("Main schedule statistics") {
                section = "main";
            } else if line.starts_with("Backfilling stats") {
                section = "backfill";
            } else if line.starts_with("Latency for") || line.is_empty() {
                section = if line.is_empty() { section } else { "" };
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let key = k.trim().to_lowercase().replace(' ', "_");
            if section.is_empty() || !key.contains("cycle") {
                continue;
            }
            if let Some(n) = v
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<f64>().ok())
            {
                found.insert(format!("{section}_{key}"), n);
            }
        }
        if reset {
            out(Command::new("sdiag").arg("-r"))?;
        }
        Ok(found)
    }

    /// Every job's state since `since` (`sacct`), keyed as the day's ids: `<id>`,
    /// `<array>_<index>`, and `name:<job name>` for interactive `srun`s.
    pub fn final_states(&self, since: &str, expect: usize) -> Res<BTreeMap<String, String>> {
        let t = Instant::now();
        loop {
            let text = out(Command::new("sacct").args([
                "-n",
                "-X",
                "-P",
                "-S",
                since,
                "-o",
                "JobID,JobName,State",
            ]))?;
            let mut states = BTreeMap::new();
            for line in text.lines() {
                let f: Vec<&str> = line.split('|').collect();
                if f.len() < 3 {
                    continue;
                }
                let state = match f[2].split_whitespace().next().unwrap_or("") {
                    "COMPLETED" => "succeeded".to_string(),
                    other => other.to_lowercase(),
                };
                states.insert(f[0].to_string(), state.clone());
                if f[1].starts_with("day-i-") {
                    states.insert(format!("name:{}", f[1]), state);
                }
            }
            let settled = !states.values().any(|s| {
                matches!(
                    s.as_str(),
                    "pending" | "running" | "requeued" | "completing"
                )
            });
            let ids = states.keys().filter(|k| !k.starts_with("name:")).count();
            if (settled && ids >= expect) || t.elapsed() > Duration::from_secs(90) {
                return Ok(states);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Waits for the interactive `srun`s.
    pub fn reap(&self) {
        if let Ok(mut kids) = self.interactive.lock() {
            for mut k in kids.drain(..) {
                let _ = k.wait();
            }
        }
    }
}

impl Cluster for SlurmPeer {
    fn submit(&self, _client: usize, kind: Kind, marker: &Path) -> Res<Vec<String>> {
        let script = task_script(kind.sleep_s());
        if kind == Kind::Interactive {
            let name = format!("day-i-{}", self.seq.fetch_add(1, Ordering::Relaxed));
            let child = Command::new("srun")
                .args([
                    "-J",
                    &name,
                    "--gres=gpu:1",
                    "-c",
                    "1",
                    "--mem=256",
                    "-t",
                    "10",
                ])
                .env("M", marker)
                .args(["/bin/sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            self.interactive.lock().map_err(|_| "poisoned")?.push(child);
            return Ok(vec![format!("name:{name}")]);
        }
        let mut cmd = Command::new("sbatch");
        cmd.args(["--parsable", "-J", &format!("day-{}", kind.label())])
            .args(["-c", "1", "--mem=256", "-o", "/dev/null"])
            .args(["-t", if kind == Kind::Cancelled { "10" } else { "1" }])
            .env("M", marker);
        match kind {
            Kind::Gang { nodes } => {
                cmd.args([
                    "-N",
                    &nodes.to_string(),
                    "--ntasks-per-node=1",
                    "--gres=gpu:8",
                ])
                .arg(format!(
                    "--wrap=srun /bin/sh -c '{}'",
                    script.replace('\'', r"'\''")
                ));
            }
            Kind::Array { members } => {
                cmd.args(["--gres=gpu:1", &format!("--array=0-{}", members - 1)])
                    .arg(format!("--wrap={script}"));
            }
            _ => {
                cmd.arg("--gres=gpu:1").arg(format!("--wrap={script}"));
            }
        }
        let id = out(&mut cmd)?
            .trim()
            .split(';')
            .next()
            .unwrap_or("")
            .to_string();
        if id.is_empty() {
            return Err("sbatch printed no id".into());
        }
        Ok(match kind {
            Kind::Array { members } => (0..members).map(|i| format!("{id}_{i}")).collect(),
            _ => vec![id],
        })
    }

    fn cancel(&self, id: &str) -> Res<()> {
        out(Command::new("scancel").arg(id)).map(|_| ())
    }

    fn requeue(&self, id: &str) -> Res<bool> {
        let state = out(Command::new("squeue").args(["-h", "-j", id, "-o", "%T"]))?;
        if state.trim() != "RUNNING" {
            return Ok(false);
        }
        out(Command::new("scontrol").args(["requeue", id])).map(|_| true)
    }

    fn active(&self) -> Res<usize> {
        let text =
            out(Command::new("squeue").args(["-h", "-r", "-t", "PD,CF,R,CG,S,RQ,RS", "-o", "%i"]))?;
        Ok(text.lines().count())
    }

    fn jobs_on_node(&self, i: usize) -> Res<Vec<String>> {
        let text = out(Command::new("squeue").args([
            "-h",
            "-r",
            "-t",
            "R",
            "-w",
            &node_name(i),
            "-o",
            "%i",
        ]))?;
        Ok(text.lines().map(|l| l.trim().to_string()).collect())
    }

    fn node_down(&self, i: usize) -> Res<bool> {
        let text = out(Command::new("sinfo").args(["-h", "-n", &node_name(i), "-o", "%t"]))?;
        Ok(text.contains("down"))
    }

    fn kill_node(&self, i: usize) -> Res<()> {
        let pid = self.pid_of(&format!("slurmd-{}.pid", node_name(i)))?;
        // SAFETY: kill has no memory preconditions.
        if unsafe { libc::kill(pid as i32, libc::SIGKILL) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(())
    }

    fn restart_node(&self, i: usize) -> Res<()> {
        out(Command::new("/usr/sbin/slurmd").args(["-N", &node_name(i)]))?;
        let t = Instant::now();
        while self.node_down(i)? {
            if t.elapsed() > Duration::from_secs(120) {
                return Err("the restarted slurmd never came back".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Longer than Gantry's: slurmctld pings a node every `SlurmdTimeout / 3` and calls it
    /// down only after a ping goes unanswered past the timeout.
    fn down_for(&self) -> Duration {
        self.down_after * 2 + Duration::from_secs(5)
    }

    fn submit_wide(&self, nodes: usize, marker: &Path) -> Res<String> {
        let script = super::day::wide_script();
        let id = out(Command::new("sbatch")
            .args(["--parsable", "-J", "day-wide", "-N", &nodes.to_string()])
            .args([
                "--ntasks-per-node=1",
                "--gres=gpu:8",
                "-c",
                "1",
                "--mem=256",
                "-t",
                "1",
            ])
            .args(["-o", "/dev/null"])
            .env("M", marker)
            .arg(format!("--wrap=srun /bin/sh -c '{script}'")))?;
        Ok(id.trim().split(';').next().unwrap_or("").to_string())
    }

    /// `squeue`'s start time (one-second resolution) once the job runs.
    fn placed_at(&self, id: &str) -> Res<Option<f64>> {
        let text = out(Command::new("squeue")
            .args(["-h", "-j", id, "-t", "R", "-o", "%S"])
            .env("SLURM_TIME_FORMAT", "%s"))?;
        Ok(text.trim().parse::<f64>().ok())
    }
}
