//! The `[execution]` section of the configuration: how tasks are isolated (cgroups, GPU
//! device fencing, the user a task runs as) and the host-side rules for job kinds
//! (requeue limits, interactive time limits, signals).
//!
//! Owns: these settings, their defaults and range checks. Does not own acting on them
//! (`executor`, `scheduler`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The longest time limit any job may have: one year, in seconds (defined with the job model).
pub use gantry_api::model::MAX_TIME_LIMIT_S;

/// Whether tasks get cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CgroupMode {
    /// Use cgroups where the host has them; say so and run with env-only isolation otherwise.
    #[default]
    Auto,
    /// Refuse to start without cgroups.
    Required,
    /// Never use cgroups (env-only isolation).
    Off,
}

/// How tasks run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutionConfig {
    /// cgroups: `auto` (default), `required` or `off`.
    pub cgroups: CgroupMode,
    /// Name of the parent cgroup under which every task gets its own (default `gantry`).
    pub cgroup_parent: String,
    /// Most processes per task (cgroup pids limit; default 4096).
    pub pids_max: u32,
    /// Most processes of all tasks of the node together (the parent cgroup's pids limit;
    /// default 0: half of the kernel's `pid_max`, so tasks can never take every process
    /// number of the host).
    pub node_pids_max: u32,
    /// Device node of GPU `{index}` (default `/dev/nvidia{index}`); a task is denied the
    /// nodes of the GPUs it was not given.
    pub gpu_device_pattern: String,
    /// When the daemon runs as root, run each task as the job's user (default true).
    pub run_as_user: bool,
    /// The account anonymous jobs run as (submitted over TCP without a token; default
    /// `nobody`); empty refuses them. A user with an identity never runs as it: two API
    /// users must not share a uid (`docs/security.md`, attack U6).
    pub fallback_user: String,
    /// Accounts for API users without one of their own on the node, by user name (e.g.
    /// `{ carol = "svc-carol" }`); a token user with neither an account nor an entry here
    /// is refused (default empty).
    pub user_map: BTreeMap<String, String>,
    /// May a job run as root (default false).
    pub allow_root: bool,
    /// How many times a job may be requeued (eviction, node failure, failed gang start)
    /// unless it says otherwise (default 5).
    pub max_requeues: u32,
    /// Longest time limit of an interactive job, per queue (`"*"` for every other queue),
    /// seconds: an interactive job asking for none gets this, one asking for more is refused
    /// (400 naming `time_limit_s`; default `{"*" = 14400}`, four hours).
    pub interactive_max_time_s: BTreeMap<String, u64>,
    /// Variables of the daemon's own environment passed on to tasks and check commands, on
    /// top of `PATH`, the locale and `TZ` (e.g. `["LD_LIBRARY_PATH"]` for a CUDA install);
    /// nothing else of the daemon's environment reaches a task (default empty).
    pub env_passthrough: Vec<String>,
    /// Size of the scratch working directory of a task that runs as another user and whose
    /// job names no `workdir`: a tmpfs mounted for the run (its pages count against the
    /// task's memory limit), so a job cannot fill the file system of the daemon's state; MiB
    /// (default 1024; 0: a plain directory on that file system, unbounded).
    pub work_dir_mib: u64,
}

impl Default for ExecutionConfig {
    fn default() -> Self {
        Self {
            cgroups: CgroupMode::Auto,
            cgroup_parent: "gantry".into(),
            pids_max: 4096,
            node_pids_max: 0,
            gpu_device_pattern: "/dev/nvidia{index}".into(),
            run_as_user: true,
            fallback_user: "nobody".into(),
            user_map: BTreeMap::new(),
            allow_root: false,
            max_requeues: 5,
            interactive_max_time_s: BTreeMap::from([("*".to_string(), 4 * 3600)]),
            env_passthrough: Vec::new(),
            work_dir_mib: 1024,
        }
    }
}

impl ExecutionConfig {
    /// The pids limit of the parent cgroup: `node_pids_max`, or half of the kernel's
    /// `pid_max` when it is 0 (16,384 when that cannot be read).
    pub fn node_pids_limit(&self) -> u32 {
        if self.node_pids_max > 0 {
            return self.node_pids_max;
        }
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .map_or(16_384, |max| (max / 2).max(8))
    }

    /// Range checks, as messages naming the key.
    pub fn check(&self) -> Result<(), String> {
        if self.cgroup_parent.is_empty()
            || self.cgroup_parent.contains("..")
            || self.cgroup_parent.starts_with('/')
        {
            return Err("execution.cgroup_parent must be a relative name without `..`".into());
        }
        if self.pids_max < 8 {
            return Err("execution.pids_max must be at least 8".into());
        }
        if self.node_pids_max != 0 && self.node_pids_max < self.pids_max {
            return Err(
                "execution.node_pids_max must be 0 (half of the kernel's pid_max) or at least execution.pids_max"
                    .into(),
            );
        }
        if !self.gpu_device_pattern.contains("{index}") {
            return Err("execution.gpu_device_pattern must contain {index}".into());
        }
        if self.work_dir_mib > 1 << 20 {
            return Err("execution.work_dir_mib must be at most 1048576 (1 TiB)".into());
        }
        if self.max_requeues > 1000 {
            return Err("execution.max_requeues must be at most 1000".into());
        }
        if let Some((q, _)) = self
            .interactive_max_time_s
            .iter()
            .find(|(_, s)| **s == 0 || **s > MAX_TIME_LIMIT_S)
        {
            return Err(format!(
                "execution.interactive_max_time_s.{q} must be 1..=31536000"
            ));
        }
        Ok(())
    }

    /// The longest time an interactive job in `queue` may run, seconds.
    pub fn interactive_limit_s(&self, queue: &str) -> Option<u64> {
        self.interactive_max_time_s
            .get(queue)
            .or_else(|| self.interactive_max_time_s.get("*"))
            .copied()
    }

    /// The device node of GPU `index`.
    pub fn gpu_device_path(&self, index: u32) -> std::path::PathBuf {
        self.gpu_device_pattern
            .replace("{index}", &index.to_string())
            .into()
    }
}
