//! The job model: what a user submits ([`JobSpec`]), what the daemon keeps about each job
//! ([`JobRecord`], also the API's view of a job), and the validation of a submission with
//! errors that name the offending field. The daemon, CLI and simulator use it as `gantry_api::model`.
//!
//! Owns: field limits and defaults. Does not own scheduling (the engine), storage or the
//! daemon's `[execution]` settings.

pub mod container;
mod exec_size;
mod job_input;
pub mod job_options;
mod record;
mod service_health;
pub mod service_rollout;
pub mod service_set;

pub use container::ContainerMount;
pub use exec_size::{MAX_ARG_LEN, MAX_ARG_STRLEN, MAX_EXEC_BYTES};
pub use job_input::TtySize;
pub use service_health::{HealthState, ServiceHealth};
pub use service_rollout::{
    AutoscaleSpec, Revision, RollbackRequest, RolloutState, RolloutStatus, RolloutStrategy,
    ScaleSample, UpdateRequest,
};
pub use service_set::{ReplicaView, ScaleRequest, ServiceRecord, ServiceView};

pub use record::{
    ArrayMember, DueSignal, GpuShareView, HoldRole, JobRecord, JobState, ReasonView, StartForecast,
    StopCause, TaskRecord,
};

use gantry_contract::JobKind;
use job_options::{ArraySpec, Dependency, ServiceSpec, WarnSignal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Longest accepted time limit: one year, in seconds (also the cap of the daemon's
/// `[execution]` time limits).
pub const MAX_TIME_LIMIT_S: u64 = 365 * 24 * 3600;
/// Most tasks in one gang.
pub const MAX_TASKS: u32 = 1024;
/// Longest accepted string field.
pub const MAX_STRING: usize = 256;
/// Longest accepted script (argv elements and env entries: [`MAX_ARG_LEN`], [`MAX_ARG_STRLEN`]).
pub const MAX_SCRIPT: usize = 256 * 1024;
/// Most argv elements.
pub const MAX_ARGS: usize = 4096;
/// Longest accepted working directory.
pub const MAX_PATH: usize = 4096;
/// Highest `max_requeues` of a job (the daemon's `execution.max_requeues` has the same cap).
pub const MAX_REQUEUES: u32 = 1000;
/// Labels under this prefix are Gantry's, set from the spec (`nodes`), never by a user.
pub const RESERVED_LABEL_PREFIX: &str = "gantry.io/";
/// Latest begin time a job may ask for (2200-01-01, in ms since the epoch).
pub const MAX_BEGIN_MS: u64 = 7_258_118_400_000;

// The `#[schema(...)]` limits below (feature `openapi`) repeat these constants as literals,
// which utoipa requires; `host/server/src/api/openapi/tests.rs` checks that they agree. The
// pattern `^[^\x00-\x1f\x7f-\x9f]*$` is "no control characters" (`char::is_control`). What
// an attribute cannot say (the items of a list, the values of a map, rules between fields)
// is added to the schema by `host/server/src/api/openapi/schemas.rs: refinements`.

/// Per-task resources of one task group, as submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TaskSpec {
    /// Identical tasks in the group (default 1).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1024))]
    pub count: u32,
    /// Whole GPUs per task.
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub gpus: u32,
    /// Fraction of one GPU per task in milli-GPU (1..=999), instead of `gpus`.
    #[cfg_attr(feature = "openapi", schema(maximum = 999))]
    pub gpu_milli: u32,
    /// CPU per task in milli-cores (default 1000).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1024000))]
    pub cpu_milli: u32,
    /// Memory per task in MiB (default 1024).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16777216))]
    pub memory_mib: u64,
    /// Allowed GPU models; empty means any.
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub gpu_models: Vec<String>,
}

impl Default for TaskSpec {
    fn default() -> Self {
        Self {
            count: 1,
            gpus: 0,
            gpu_milli: 0,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_models: Vec::new(),
        }
    }
}

fn default_tasks() -> Vec<TaskSpec> {
    vec![TaskSpec::default()]
}

fn default_queue() -> String {
    "default".into()
}

fn default_true() -> bool {
    true
}

/// A job as submitted over the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Human name.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 256, pattern = r"^[^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub name: String,
    /// Command and arguments (exactly one of `argv` or `script`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 4096))]
    pub argv: Vec<String>,
    /// A shell script (run with /bin/sh, or its own `#!` line); not blank.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 262144, pattern = r"[^\s\x85]")
    )]
    pub script: Option<String>,
    /// Extra environment: at most 256 variables, each name 1..=256 bytes without `=` or NUL,
    /// each `NAME=value` at most 131,072 bytes with its NUL; argv and env at most 1 MiB together.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory, an absolute path (default: the job's directory under the data dir).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 4096,
            pattern = r"^/[^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub workdir: Option<String>,
    /// The gang's task groups.
    #[serde(default = "default_tasks")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 64))]
    pub tasks: Vec<TaskSpec>,
    /// Wall-clock limit in seconds; 0 means none.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 31536000))]
    pub time_limit_s: u64,
    /// Who submits. With a token: empty or the token's user, another is a 403 (root on the
    /// Unix socket may name any user).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 256, pattern = r"^[^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub user: String,
    /// Set by the daemon, never taken from a request: the submitter's identity was not
    /// established (no API token configured, a TCP request rather than the Unix socket), so
    /// `user` is only a label: the job's tasks run as `execution.fallback_user`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "openapi", schema(read_only))]
    pub anonymous: bool,
    /// Account charged: empty (the token's first account) or one of the token's accounts;
    /// another is a 403.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 256, pattern = r"^[^\x00-\x1f\x7f-\x9f]*$")
    )]
    pub account: String,
    /// Queue.
    #[serde(default = "default_queue")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 256,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*$"
        )
    )]
    pub queue: String,
    /// Priority tier (higher first).
    #[serde(default)]
    pub tier: i32,
    /// Labels: at most 64, keys and values at most 256 bytes without control characters.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// batch, interactive or service.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub kind: JobKind,
    /// May a preemption policy evict it.
    #[serde(default)]
    pub preemptible: bool,
    /// Back to the queue when evicted (default true); otherwise it ends as preempted.
    #[serde(default = "default_true")]
    pub requeue: bool,
    /// How many times it may go back to the queue (after eviction or node failure) before it
    /// ends instead; none means the daemon's `execution.max_requeues`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 1000))]
    pub max_requeues: Option<u32>,
    /// Submit one job per index (`--array 0-199%8`).
    #[serde(default)]
    pub array: Option<ArraySpec>,
    /// Start only after these jobs ended as asked.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 64))]
    pub dependencies: Vec<Dependency>,
    /// Signal sent ahead of the time limit and first on eviction (`--signal USR1@60`).
    #[serde(default)]
    pub signal: Option<WarnSignal>,
    /// Port, health check and restart back-off of a `service` job.
    #[serde(default)]
    pub service: Option<ServiceSpec>,
    /// Submitted held (`sbatch --hold`): it waits until released (`gantry release`).
    #[serde(default)]
    pub hold: bool,
    /// Run the tasks on exactly this many nodes, in blocks as even as they go (`sbatch
    /// --nodes`); at most the number of tasks.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1024))]
    pub nodes: Option<u32>,
    /// Every task sees all the GPUs the job holds on its node, as SLURM's `--gres=gpu:N`
    /// shared by a node's tasks (`-n 3 --gres=gpu:2`): one task of the node holds them, the
    /// others hold none, and each task's `CUDA_VISIBLE_DEVICES` and device fence are the
    /// node's set.
    #[serde(default)]
    pub share_node_gpus: bool,
    /// File the tasks' stdout (and stderr, unless `error` is set) go to instead of the log
    /// (`sbatch --output`), opened by each task as its user, relative to its working
    /// directory; `%j` job id, `%A` array id, `%a` array index, `%x` name, `%u` user,
    /// `%t` task index, `%N` node, `%%` a percent sign.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub output: Option<String>,
    /// File the tasks' stderr goes to (`sbatch --error`), as `output`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub error: Option<String>,
    /// Not to start before this time, ms since the epoch (`sbatch --begin`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 7_258_118_400_000u64))]
    pub begin_ms: Option<u64>,
    /// An interactive job's first task reads what its client sends (`gantry run`).
    #[serde(default)]
    pub stdin: bool,
    /// An interactive job's first task gets a terminal of this size (implies `stdin`).
    #[serde(default)]
    pub tty: Option<TtySize>,
    /// The container image the tasks run in (`--image`, `#SBATCH --container-image`): a
    /// registry reference (`registry.lab/team/trainer:v7`, `name@sha256:...`) or a local
    /// OCI layout under one of the node's `[containers] image_dirs` (`oci:/path:tag`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 512))]
    pub image: Option<String>,
    /// Host paths made visible inside the image (`--mount SRC:DST[:ro]`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub mounts: Vec<ContainerMount>,
}

/// A submission error naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field, e.g. `tasks[0].gpus`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn check_string(field: &str, value: &str) -> Result<(), FieldError> {
    if value.len() > MAX_STRING {
        return Err(bad(field, format!("longer than {MAX_STRING} bytes")));
    }
    if value.chars().any(char::is_control) {
        return Err(bad(field, "contains control characters"));
    }
    Ok(())
}

/// `key` cut to 64 bytes, for naming a field without echoing a huge key.
fn short(key: &str) -> &str {
    let end = (0..=key.len().min(64))
        .rev()
        .find(|i| key.is_char_boundary(*i))
        .unwrap_or(0);
    &key[..end]
}

impl JobSpec {
    /// Checks every field's range and fills defaults (user "anonymous", account = user).
    pub fn validate(&mut self) -> Result<(), FieldError> {
        match (&self.script, self.argv.is_empty()) {
            (Some(_), false) => return Err(bad("argv", "give either argv or script, not both")),
            (None, true) => return Err(bad("argv", "a job needs argv (a command) or script")),
            (Some(s), true) if s.trim().is_empty() => return Err(bad("script", "is empty")),
            (Some(s), true) if s.len() > MAX_SCRIPT => {
                return Err(bad("script", format!("longer than {MAX_SCRIPT} bytes")));
            }
            _ => {}
        }
        if self.argv.first().is_some_and(|a| a.is_empty()) {
            return Err(bad("argv[0]", "is empty"));
        }
        if self.argv.len() > MAX_ARGS {
            return Err(bad("argv", format!("more than {MAX_ARGS} arguments")));
        }
        if let Some(dir) = &self.workdir
            && (dir.is_empty() || dir.len() > MAX_PATH || dir.chars().any(char::is_control))
        {
            return Err(bad(
                "workdir",
                format!("must be a path of 1..={MAX_PATH} bytes without control characters"),
            ));
        }
        // Relative to what? The daemon's own directory is nobody's business (it changes to
        // `/` at start); a client resolves a relative directory where its user stands.
        if let Some(dir) = &self.workdir
            && !dir.starts_with('/')
        {
            return Err(bad(
                "workdir",
                "must be an absolute path (a client resolves a relative one against its own directory)",
            ));
        }
        for (f, v) in [
            ("name", &self.name),
            ("user", &self.user),
            ("account", &self.account),
            ("queue", &self.queue),
        ] {
            check_string(f, v)?;
        }
        if self.queue.is_empty() {
            return Err(bad("queue", "is empty"));
        }
        if self.user.is_empty() {
            self.user = "anonymous".into();
        }
        if self.account.is_empty() {
            self.account = self.user.clone();
        }
        if self.env.len() > 256 {
            return Err(bad("env", "more than 256 variables"));
        }
        for k in self.env.keys() {
            if k.is_empty() || k.len() > MAX_STRING || k.contains('=') || k.contains('\0') {
                return Err(bad(
                    format!("env.{}", short(k)),
                    format!("a variable name must be 1..={MAX_STRING} bytes without `=` or NUL"),
                ));
            }
        }
        exec_size::check(&self.argv, &self.env)?;
        if let Some(n) = self.max_requeues.filter(|n| *n > MAX_REQUEUES) {
            return Err(bad(
                "max_requeues",
                format!("must be at most {MAX_REQUEUES}; asked {n}"),
            ));
        }
        if self.labels.len() > 64 {
            return Err(bad("labels", "more than 64 labels"));
        }
        for (k, v) in &self.labels {
            let field = format!("labels.{}", short(k));
            check_string(&field, k)?;
            check_string(&field, v)?;
            if k.starts_with(RESERVED_LABEL_PREFIX) {
                return Err(bad(
                    field,
                    format!(
                        "labels under {RESERVED_LABEL_PREFIX} are set by Gantry (e.g. `nodes` sets {RESERVED_LABEL_PREFIX}nodes)"
                    ),
                ));
            }
        }
        job_options::validate(
            self.array.as_ref(),
            &self.dependencies,
            self.signal.as_ref(),
            self.service.as_ref(),
        )?;
        if self.service.is_some() && self.kind != JobKind::Service {
            return Err(bad(
                "service",
                "only a job of kind `service` takes service settings",
            ));
        }
        if self.begin_ms.is_some_and(|at| at > MAX_BEGIN_MS) {
            return Err(bad("begin_ms", "later than the year 2200"));
        }
        if self.time_limit_s > MAX_TIME_LIMIT_S {
            return Err(bad(
                "time_limit_s",
                format!("more than {MAX_TIME_LIMIT_S} seconds (one year)"),
            ));
        }
        self.validate_input()?;
        for (field, file) in [("output", &self.output), ("error", &self.error)] {
            if let Some(f) = file
                && (f.is_empty() || f.len() > MAX_PATH || f.chars().any(char::is_control))
            {
                return Err(bad(
                    field,
                    format!(
                        "must be a file name of 1..={MAX_PATH} bytes without control characters"
                    ),
                ));
            }
            if file.is_some() && self.tty.is_some() {
                return Err(bad(field, "a job with a terminal shows its output there"));
            }
        }
        container::validate(self.image.as_deref(), &self.mounts)?;
        if self.image.is_some() {
            for (field, file) in [("output", &self.output), ("error", &self.error)] {
                if file.is_some() {
                    return Err(bad(
                        field,
                        "not supported with an image yet: the log has it",
                    ));
                }
            }
        }
        self.validate_tasks()?;
        if let Some(n) = self.nodes
            && (n == 0 || n as usize > self.task_count())
        {
            return Err(bad(
                "nodes",
                format!("must be 1..={} (the job's tasks)", self.task_count()),
            ));
        }
        Ok(())
    }

    fn validate_tasks(&self) -> Result<(), FieldError> {
        if self.tasks.is_empty() {
            return Err(bad("tasks", "a job needs at least one task group"));
        }
        if self.tasks.len() > 64 {
            return Err(bad("tasks", "more than 64 task groups"));
        }
        let mut total: u32 = 0;
        for (i, t) in self.tasks.iter().enumerate() {
            let f = |name: &str| format!("tasks[{i}].{name}");
            if t.count == 0 || t.count > MAX_TASKS {
                return Err(bad(f("count"), format!("must be 1..={MAX_TASKS}")));
            }
            total = total.saturating_add(t.count);
            if t.gpus > 64 {
                return Err(bad(f("gpus"), "more than 64 GPUs per task"));
            }
            if t.gpu_milli >= 1000 {
                return Err(bad(
                    f("gpu_milli"),
                    "must be 1..=999 (use gpus for whole GPUs)",
                ));
            }
            if t.gpus > 0 && t.gpu_milli > 0 {
                return Err(bad(
                    f("gpu_milli"),
                    "give whole gpus or a gpu_milli fraction, not both",
                ));
            }
            if t.cpu_milli == 0 || t.cpu_milli > 1_024_000 {
                return Err(bad(f("cpu_milli"), "must be 1..=1024000 milli-cores"));
            }
            if t.memory_mib == 0 || t.memory_mib > 16 << 20 {
                return Err(bad(f("memory_mib"), "must be 1..=16777216 MiB"));
            }
            if t.gpu_models.len() > 16 {
                return Err(bad(f("gpu_models"), "more than 16 models"));
            }
            for (j, m) in t.gpu_models.iter().enumerate() {
                check_string(&f(&format!("gpu_models[{j}]")), m)?;
            }
            if !t.gpu_models.is_empty() && t.gpus == 0 && t.gpu_milli == 0 {
                return Err(bad(f("gpu_models"), "models given for a task without GPUs"));
            }
        }
        if total > MAX_TASKS {
            return Err(bad("tasks", format!("more than {MAX_TASKS} tasks in all")));
        }
        Ok(())
    }

    /// Total tasks.
    pub fn task_count(&self) -> usize {
        self.tasks.iter().map(|t| t.count as usize).sum()
    }
}
