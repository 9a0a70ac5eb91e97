//! The isolation the executor gives tasks, decided once at daemon start from `[execution]`:
//! whether tasks get cgroups and which version (`cgroups = auto | required | off`, checked by
//! creating the parent cgroup), the limits of each task's cgroup, which GPU device nodes it is
//! denied, and who it runs as.
//!
//! Owns that decision and the one start-up log line about it. It does not create task cgroups
//! (`cgroup.rs`) nor look users up (`identity.rs`).

use crate::config_execution::{CgroupMode, ExecutionConfig};

use super::cgroup::{self, CgroupVersion, Limits, V1_CONTROLLERS, V2_CONTROLLERS};
use super::devices;
use super::identity::{self, IdentityError, TaskIdentity};

/// Why the daemon cannot start with the configured isolation.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    /// `execution.cgroups = "required"` on a host where they cannot be used.
    #[error("execution.cgroups = \"required\" but cgroups are unavailable: {0}")]
    Required(String),
    /// Another daemon of this host uses the same parent cgroup: starting would sweep (kill)
    /// its tasks as leftovers.
    #[error(
        "the parent cgroup {parent:?} is in use by another gantry daemon on this host ({holder}): give this one an execution.cgroup_parent of its own, or stop that one"
    )]
    ParentInUse {
        /// `execution.cgroup_parent`.
        parent: String,
        /// What the holder wrote into the lock (its pid and command line).
        holder: String,
    },
}

/// Where the locks on parent cgroups are kept (root's; a daemon that is not root makes no
/// cgroups of its own).
const PARENT_LOCK_DIR: &str = "/run/gantry";

/// Takes the host-wide lock on the parent cgroup `parent`, held for the daemon's life (the
/// kernel drops it when the process ends). `Ok(None)` when the daemon is not root.
fn claim_parent(parent: &str) -> Result<Option<std::sync::Arc<std::fs::File>>, IsolationError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    if gantry_private_files::daemon_uid() != 0 {
        return Ok(None);
    }
    let in_use = |holder: String| IsolationError::ParentInUse {
        parent: parent.to_owned(),
        holder,
    };
    let io = |e: std::io::Error| in_use(format!("cannot take the lock in {PARENT_LOCK_DIR}: {e}"));
    crate::trusted_dir::absolute_and_trusted(std::path::Path::new(PARENT_LOCK_DIR))
        .map_err(|e| in_use(e.to_string()))?;
    let name = parent.replace('/', "%");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(std::path::Path::new(PARENT_LOCK_DIR).join(format!("cgroup-{name}.lock")))
        .map_err(io)?;
    if file.try_lock().is_err() {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        return Err(in_use(holder.trim().to_owned()));
    }
    let me = std::process::id();
    let cmdline = std::fs::read(format!("/proc/{me}/cmdline"))
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default();
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    writeln!(file, "pid {me}: {cmdline}").map_err(io)?;
    Ok(Some(std::sync::Arc::new(file)))
}

/// What isolation is in effect (for `GET /v1/health`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IsolationSummary {
    /// `v1`, `v2` or `off`.
    pub cgroups: &'static str,
    /// Why there are no cgroups, when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroups_unavailable: Option<String>,
    /// Whether tasks run as their job's user.
    pub run_as_user: bool,
}

/// The executor's isolation settings.
#[derive(Debug, Clone)]
pub struct Isolation {
    cgroups: Result<CgroupVersion, String>,
    config: ExecutionConfig,
    node_gpus: Vec<u32>,
    /// The capability devices of the node's MIG slices (`mig_caps.rs`), replaced when the
    /// node's MIG layout changes.
    mig_caps: std::sync::Arc<std::sync::RwLock<super::mig_caps::MigCaps>>,
    /// The host-wide lock on the parent cgroup, held while tasks get cgroups.
    _parent_lock: Option<std::sync::Arc<std::fs::File>>,
}

impl Isolation {
    /// No cgroups and no change of user: tasks are isolated by their environment only.
    pub fn none() -> Self {
        Self {
            cgroups: Err("not configured".into()),
            config: ExecutionConfig {
                cgroups: CgroupMode::Off,
                run_as_user: false,
                ..ExecutionConfig::default()
            },
            node_gpus: Vec::new(),
            mig_caps: Default::default(),
            _parent_lock: None,
        }
    }

    /// Decides the isolation for a node whose GPUs are `node_gpus` (indices), logging one line
    /// when cgroups are unavailable. Fails only when cgroups are required and unavailable.
    pub fn setup(config: &ExecutionConfig, node_gpus: Vec<u32>) -> Result<Self, IsolationError> {
        let cgroups = match config.cgroups {
            CgroupMode::Off => Err("execution.cgroups = \"off\"".to_owned()),
            CgroupMode::Auto | CgroupMode::Required => {
                detect(&config.cgroup_parent, config.node_pids_limit())
            }
        };
        match (&cgroups, config.cgroups) {
            (Err(why), CgroupMode::Required) => return Err(IsolationError::Required(why.clone())),
            (Err(why), CgroupMode::Off) => tracing::info!(
                "cgroups unavailable ({why}): tasks run with environment-only isolation"
            ),
            (Err(why), _) => tracing::warn!(
                "cgroups unavailable ({why}): tasks run with environment-only isolation"
            ),
            (Ok(version), _) => tracing::info!(
                version = ?version,
                parent = %config.cgroup_parent,
                "cgroups in use: each task gets its own cgroup (memory, CPU, pids, GPU devices)"
            ),
        }
        let parent_lock = match cgroups {
            Ok(_) => claim_parent(&config.cgroup_parent)?,
            Err(_) => None,
        };
        let me = Self {
            cgroups,
            config: config.clone(),
            node_gpus,
            mig_caps: Default::default(),
            _parent_lock: parent_lock,
        };
        tracing::info!(
            run_as_user = me.summary().run_as_user,
            "tasks run as {}",
            if me.summary().run_as_user {
                "their job's user"
            } else {
                "the daemon's user"
            }
        );
        Ok(me)
    }

    /// Fences MIG slices by their capability devices too (`mig_caps.rs`).
    pub fn with_mig_caps(self, caps: super::mig_caps::MigCaps) -> Self {
        self.set_mig_caps(caps);
        self
    }

    /// Replaces the MIG capability fence (a new MIG layout); tasks launched after it get it.
    pub fn set_mig_caps(&self, caps: super::mig_caps::MigCaps) {
        match self.mig_caps.write() {
            Ok(mut c) => *c = caps,
            Err(poisoned) => *poisoned.into_inner() = caps,
        }
    }

    /// The cgroup version tasks get, if any.
    pub(crate) fn cgroups(&self) -> Option<CgroupVersion> {
        self.cgroups.as_ref().ok().copied()
    }

    /// The parent cgroup of task cgroups.
    pub(crate) fn env_passthrough(&self) -> &[String] {
        &self.config.env_passthrough
    }

    /// Whether jobs may run as root (`execution.allow_root`); a container never does
    /// otherwise, even when tasks keep the daemon's user (`run_as_user = false`).
    pub(crate) fn allow_root(&self) -> bool {
        self.config.allow_root
    }

    /// The device node of GPU `index` (`execution.gpu_device_pattern`).
    pub(crate) fn gpu_device(&self, index: u32) -> std::path::PathBuf {
        super::devices::device_path(&self.config.gpu_device_pattern, index)
    }

    pub(crate) fn parent(&self) -> &str {
        &self.config.cgroup_parent
    }

    /// What is in effect.
    pub fn summary(&self) -> IsolationSummary {
        IsolationSummary {
            cgroups: match self.cgroups {
                Ok(CgroupVersion::V1) => "v1",
                Ok(CgroupVersion::V2) => "v2",
                Err(_) => "off",
            },
            cgroups_unavailable: self.cgroups.as_ref().err().cloned(),
            run_as_user: identity::switching(&self.config),
        }
    }

    /// The limits of a task's cgroup: its memory and CPU, the process limit, and the device
    /// nodes of the node's GPUs (and MIG slices' capabilities) it was not given.
    pub(crate) fn limits(&self, memory_mib: u64, cpu_milli: u32, gpus: &[u32]) -> Limits {
        Limits {
            memory_mib,
            cpu_milli,
            pids_max: self.config.pids_max,
            denied: {
                let mut d =
                    devices::denied_devices(&self.config.gpu_device_pattern, &self.node_gpus, gpus);
                let caps = match self.mig_caps.read() {
                    Ok(c) => c.denied(gpus),
                    Err(poisoned) => poisoned.into_inner().denied(gpus),
                };
                d.extend(caps);
                d.sort_unstable();
                d.dedup();
                d
            },
        }
    }

    /// Who a task of `user` runs as (`None`: the daemon's user); `anonymous`: see
    /// `identity::resolve`.
    pub(crate) fn identity(
        &self,
        user: &str,
        anonymous: bool,
    ) -> Result<Option<TaskIdentity>, IdentityError> {
        identity::resolve(&self.config, user, anonymous)
    }
}

/// The cgroup version usable under `parent`, or why none is.
fn detect(parent: &str, node_pids_max: u32) -> Result<CgroupVersion, String> {
    let (version, wanted): (_, &[&str]) = if cgroups_rs::hierarchies::is_cgroup2_unified_mode() {
        (CgroupVersion::V2, &V2_CONTROLLERS)
    } else {
        (CgroupVersion::V1, &V1_CONTROLLERS)
    };
    let available: Vec<String> = match version {
        CgroupVersion::V2 => std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        CgroupVersion::V1 => {
            use cgroups_rs::Hierarchy;
            cgroups_rs::hierarchies::V1::new()
                .subsystems()
                .iter()
                .map(cgroups_rs::Subsystem::controller_name)
                .collect()
        }
    };
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !available.iter().any(|a| a == c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "cgroup {} controllers not available: {}",
            if version == CgroupVersion::V2 {
                "v2"
            } else {
                "v1"
            },
            missing.join(", ")
        ));
    }
    cgroup::create_parent(version, parent, node_pids_max)
        .map_err(|e| format!("cannot create the parent cgroup {parent}: {e}"))?;
    Ok(version)
}
