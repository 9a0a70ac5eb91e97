//! One cgroup per task, through the `cgroups-rs` crate: `<parent>/job-<id>-task-<i>` with a
//! memory hard limit (and no swap beyond it), a CPU quota (`cpu_milli` per 100 ms period), a
//! process limit and GPU device fencing (the v1 devices controller, or a BPF device program on
//! v2); killing what is left in it when the task ends, removing it, and sweeping the cgroups of
//! tasks that no longer run after a restart.
//!
//! Owns the cgroup file system side. It does not decide when (the executor, `mod.rs`), what to
//! deny (`devices.rs`), nor parse usage (`usage.rs`). Joining happens in the shim's child
//! (`child.rs`), which writes the `cgroup.procs` files listed by [`TaskCgroup::procs_files`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use cgroups_rs::cgroup::Cgroup;
use cgroups_rs::cpu::CpuController;
use cgroups_rs::cpuacct::CpuAcctController;
use cgroups_rs::devices::{DevicePermissions, DeviceType, DevicesController};
use cgroups_rs::hierarchies::{V1, V2};
use cgroups_rs::memory::MemController;
use cgroups_rs::pid::PidController;
use cgroups_rs::{Controller, Hierarchy, MaxValue};

use super::devices::DeviceId;
use super::naming::{CONTAINER_CHILD, task_key};
use super::{TaskExit, TaskUsage, bpf, signals, usage};

/// The v1 controllers a task cgroup uses.
pub(crate) const V1_CONTROLLERS: [&str; 5] = ["memory", "cpu", "cpuacct", "pids", "devices"];
/// The v2 controllers a task cgroup enables (devices are a BPF program there).
pub(crate) const V2_CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];
/// The CPU quota period.
const CPU_PERIOD_US: u64 = 100_000;
/// The smallest quota the kernel accepts.
const CPU_MIN_QUOTA_US: i64 = 1000;
/// How many rounds of SIGKILL `kill_all` makes before giving up.
const KILL_ROUNDS: u32 = 200;

/// Which cgroup hierarchy tasks get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// Separate v1 hierarchies per controller.
    V1,
    /// The unified v2 hierarchy.
    V2,
}

/// Why a task cgroup could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A cgroup file could not be written or a directory created.
    #[error("cgroup {name}: cannot {what}: {source}")]
    Setup {
        /// The cgroup's path below the hierarchy root.
        name: String,
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The BPF device program could not be attached.
    #[error(transparent)]
    Bpf(#[from] bpf::BpfError),
}

/// The limits of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    pub memory_mib: u64,
    pub cpu_milli: u32,
    pub pids_max: u32,
    pub denied: Vec<DeviceId>,
}

/// The CFS quota for `cpu_milli` milli-cores per 100 ms period (`None`: unlimited).
pub(crate) fn cpu_quota_us(cpu_milli: u32) -> Option<i64> {
    (cpu_milli > 0).then(|| (i64::from(cpu_milli) * 100).max(CPU_MIN_QUOTA_US))
}

/// The name of task `task` of job `job` under `parent`.
pub(crate) fn task_name(parent: &str, job: u64, task: u32) -> String {
    format!("{parent}/job-{job}-task-{task}")
}

/// Whether a directory name is a task cgroup's (`job-<id>-task-<i>`).
pub(crate) fn is_task_name(name: &str) -> bool {
    !name.contains('/') && task_key(name).is_some()
}

fn hierarchy(version: CgroupVersion) -> Box<dyn Hierarchy> {
    match version {
        CgroupVersion::V1 => Box::new(v1_mounts().clone()),
        CgroupVersion::V2 => Box::new(V2::new()),
    }
}

/// Where the v1 controllers are mounted, read once. `V1::new` parses `/proc/self/mountinfo`,
/// which the kernel writes out mount by mount (every mount of the host, and each running
/// task's scratch tmpfs): done per task, it was a tenth of the daemon's CPU under load. The
/// controllers' mounts do not move while the daemon runs.
fn v1_mounts() -> &'static V1 {
    static MOUNTS: std::sync::OnceLock<V1> = std::sync::OnceLock::new();
    MOUNTS.get_or_init(V1::new)
}

fn controllers(version: CgroupVersion) -> Vec<String> {
    let names: &[&str] = match version {
        CgroupVersion::V1 => &V1_CONTROLLERS,
        CgroupVersion::V2 => &V2_CONTROLLERS,
    };
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// A handle on the cgroup `name` (which may not exist yet).
fn load(version: CgroupVersion, name: &str) -> Cgroup {
    Cgroup::load_with_specified_controllers(hierarchy(version), name, controllers(version))
}

/// The directories of a cgroup: one per controller on v1 (deduplicated), one on v2.
fn dirs(cg: &Cgroup, version: CgroupVersion) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = match version {
        CgroupVersion::V1 => cg
            .subsystems()
            .iter()
            .map(|s| s.to_controller().path().to_path_buf())
            .collect(),
        CgroupVersion::V2 => vec![hierarchy(version).root().join(cg.path())],
    };
    dirs.sort();
    dirs.dedup();
    dirs
}

/// A task's cgroup.
#[derive(Debug)]
pub(crate) struct TaskCgroup {
    version: CgroupVersion,
    cg: Cgroup,
}

impl TaskCgroup {
    /// Creates `name` with `limits`; a leftover of the same name (an earlier run of the task)
    /// is emptied and removed first. On failure nothing is left behind.
    pub fn create(
        version: CgroupVersion,
        name: &str,
        limits: &Limits,
    ) -> Result<Self, CgroupError> {
        let stale = Self::open(version, name);
        if stale.exists() {
            tracing::info!(cgroup = name, "removing a leftover cgroup before reuse");
            stale.destroy();
        }
        let cg = load(version, name);
        let task = Self { version, cg };
        let result = task.setup(name, limits);
        if result.is_err() {
            task.destroy();
        }
        result.map(|()| task)
    }

    /// A handle on the existing (or not) cgroup `name`.
    pub fn open(version: CgroupVersion, name: &str) -> Self {
        Self {
            version,
            cg: load(version, name),
        }
    }

    fn setup(&self, name: &str, limits: &Limits) -> Result<(), CgroupError> {
        let err = |what: &str| {
            let name = name.to_owned();
            let what = what.to_owned();
            move |e: cgroups_rs::error::Error| CgroupError::Setup {
                name,
                what,
                source: Box::new(e),
            }
        };
        self.cg.create().map_err(err("create it"))?;
        if let Some(missing) = self.dirs().into_iter().find(|d| !d.is_dir()) {
            return Err(CgroupError::Setup {
                name: name.to_owned(),
                what: format!("create {}", missing.display()),
                source: "directory missing after create".into(),
            });
        }
        if let Some(mem) = self.cg.controller_of::<MemController>() {
            let bytes =
                i64::try_from(limits.memory_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
            mem.set_limit(bytes).map_err(err("set the memory limit"))?;
            // v1: memory+swap no larger than memory (no swap); v2: no swap at all. Hosts
            // without swap accounting have neither file.
            let swap_file = match self.version {
                CgroupVersion::V1 => "memory.memsw.limit_in_bytes",
                CgroupVersion::V2 => "memory.swap.max",
            };
            if mem.path().join(swap_file).exists() {
                let swap = if self.version == CgroupVersion::V1 {
                    bytes
                } else {
                    0
                };
                mem.set_memswap_limit(swap)
                    .map_err(err("set the swap limit"))?;
            }
        }
        if let (Some(cpu), Some(quota)) = (
            self.cg.controller_of::<CpuController>(),
            cpu_quota_us(limits.cpu_milli),
        ) {
            cpu.set_cfs_quota_and_period(Some(quota), Some(CPU_PERIOD_US))
                .map_err(err("set the CPU quota"))?;
        }
        if let Some(pids) = self.cg.controller_of::<PidController>() {
            pids.set_pid_max(MaxValue::Value(i64::from(limits.pids_max)))
                .map_err(err("set the process limit"))?;
        }
        match self.version {
            CgroupVersion::V1 => {
                let devices = self.cg.controller_of::<DevicesController>();
                // Read and write only: a task cannot make device nodes anyway (no
                // CAP_MKNOD), and a parent that denied `m` on any device would refuse the
                // `c *:* m` rule an OCI runtime writes into a container's child cgroup.
                let read_write = [DevicePermissions::Read, DevicePermissions::Write];
                for id in &limits.denied {
                    if let Some(devices) = devices {
                        devices
                            .deny_device(
                                DeviceType::Char,
                                i64::from(id.major),
                                i64::from(id.minor),
                                &read_write,
                            )
                            .map_err(err(&format!("deny {id}")))?;
                    }
                }
            }
            CgroupVersion::V2 if !limits.denied.is_empty() => {
                bpf::attach_device_filter(&self.dirs()[0], &limits.denied)?;
            }
            CgroupVersion::V2 => {}
        }
        Ok(())
    }

    /// Its directories (one per v1 controller, or the v2 one).
    pub fn dirs(&self) -> Vec<PathBuf> {
        dirs(&self.cg, self.version)
    }

    /// The `cgroup.procs` files the task's command writes itself into.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Whether any of its directories exists.
    pub fn exists(&self) -> bool {
        self.dirs().iter().any(|d| d.is_dir())
    }

    /// The processes still in it, and in the cgroup of its container (`ctr`, made by the
    /// OCI runtime for a task in an image), which a runtime killed first leaves behind.
    pub fn procs(&self) -> Vec<u64> {
        let mut pids: Vec<u64> = self.cg.procs().into_iter().map(|p| p.pid).collect();
        for dir in self.dirs() {
            let procs = dir.join(CONTAINER_CHILD).join("cgroup.procs");
            if let Ok(text) = std::fs::read_to_string(procs) {
                pids.extend(text.lines().filter_map(|l| l.trim().parse::<u64>().ok()));
            }
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// What its processes used; `exit` helps decide OOM on kernels without an OOM counter.
    pub fn usage(&self, exit: TaskExit) -> TaskUsage {
        match self.version {
            CgroupVersion::V1 => {
                let path = |p: Option<&Path>| p.map(Path::to_path_buf);
                let cpuacct = path(
                    self.cg
                        .controller_of::<CpuAcctController>()
                        .map(|c| c.path()),
                );
                let memory = path(self.cg.controller_of::<MemController>().map(|c| c.path()));
                usage::read_v1(cpuacct.as_deref(), memory.as_deref(), exit)
            }
            CgroupVersion::V2 => usage::read_v2(&self.dirs()[0]),
        }
    }

    /// SIGKILLs every process in it, until none is left (bounded). Returns whether it is empty.
    pub fn kill_all(&self) -> bool {
        if self.version == CgroupVersion::V2 && self.cg.kill().is_ok() {
            tracing::debug!(cgroup = self.cg.path(), "cgroup.kill written");
        }
        for round in 0..KILL_ROUNDS {
            let procs = self.procs();
            if procs.is_empty() {
                return true;
            }
            if round == 0 {
                tracing::info!(
                    cgroup = self.cg.path(),
                    count = procs.len(),
                    "killing leftover task processes"
                );
            }
            for pid in procs {
                signals::kill_process(pid);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.procs().is_empty()
    }

    /// Kills what is left and removes it (logged, not returned, on failure).
    pub fn destroy(&self) {
        if !self.kill_all() {
            tracing::warn!(
                cgroup = self.cg.path(),
                "processes survive in the task cgroup"
            );
        }
        for dir in self.dirs() {
            // The container's cgroup, when its runtime did not remove it (killed first).
            let _ = std::fs::remove_dir(dir.join(CONTAINER_CHILD));
        }
        if let Err(e) = self.cg.delete() {
            tracing::warn!(cgroup = self.cg.path(), error = %e, "cannot remove the task cgroup");
        }
        if self.version == CgroupVersion::V1 {
            remove_runtime_leftovers(self.cg.path());
        }
    }
}

/// On cgroup v1, an OCI runtime puts a container in every mounted hierarchy, also those
/// Gantry leaves alone (blkio, cpuset, freezer, the named ones): removes the (empty)
/// directories of task cgroup `path` and its container there.
fn remove_runtime_leftovers(path: &str) {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let path = path.trim_start_matches('/');
    for h in hierarchies.flatten() {
        let task = h.path().join(path);
        if task.is_dir() {
            let _ = std::fs::remove_dir(task.join(CONTAINER_CHILD));
            let _ = std::fs::remove_dir(&task);
        }
    }
}

/// Creates the parent cgroup `parent` in every controller `version` uses, to check that this
/// host lets us (the daemon must be root, and the controllers mounted and writable).
/// Creates the parent cgroup of every task and bounds the processes of all tasks together
/// by `pids_max` (each task's own limit cannot add up past it: the kernel counts a
/// parent's limit over its whole subtree).
pub(crate) fn create_parent(
    version: CgroupVersion,
    parent: &str,
    pids_max: u32,
) -> Result<(), String> {
    let cg = load(version, parent);
    cg.create().map_err(|e| e.to_string())?;
    if let Some(missing) = dirs(&cg, version).into_iter().find(|d| !d.is_dir()) {
        return Err(format!("cannot create {}", missing.display()));
    }
    match cg.controller_of::<PidController>() {
        Some(pids) => pids
            .set_pid_max(MaxValue::Value(i64::from(pids_max)))
            .map_err(|e| format!("cannot set pids.max of {parent} to {pids_max}: {e}")),
        None => Err(format!("the parent cgroup {parent} has no pids controller")),
    }
}

/// The names (`<parent>/job-..-task-..`) of the task cgroups that exist under `parent`.
pub(crate) fn task_cgroups(version: CgroupVersion, parent: &str) -> Vec<String> {
    let mut names: Vec<String> = dirs(&load(version, parent), version)
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| is_task_name(n))
        .map(|n| format!("{parent}/{n}"))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_and_names() {
        assert_eq!(cpu_quota_us(1000), Some(100_000));
        assert_eq!(cpu_quota_us(2500), Some(250_000));
        assert_eq!(cpu_quota_us(1), Some(1000), "kernel minimum");
        assert_eq!(cpu_quota_us(0), None);
        assert_eq!(task_name("gantry", 12, 3), "gantry/job-12-task-3");
        assert!(is_task_name("job-12-task-3"));
        assert!(!is_task_name("job-12-task-"));
        assert!(!is_task_name("job-x-task-1"));
        assert!(!is_task_name("other"));
    }
}
