//! The optional parts of a job submission that go beyond "run this on that many GPUs":
//! arrays (`0-199%8`), dependencies (`afterok:12`), the warning signal sent before a time
//! limit or an eviction (`USR1@60`), how often a job may be requeued, and what a service
//! needs (a port, a health check, restart back-off). Parsing of the SLURM-style text forms
//! and range checks with errors naming the field.
//!
//! Owns: these types, their text forms and their validation. Does not own acting on them
//! (the scheduler holds, signals and restarts) or `#SBATCH` scripts (`sbatch`).

use crate::model::FieldError;
use crate::model::service_rollout::MAX_REPLICAS;
use serde::{Deserialize, Serialize};

/// Most members of one array.
pub const MAX_ARRAY: usize = 10_000;
/// Most dependencies of one job.
pub const MAX_DEPENDENCIES: usize = 64;

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// A job array: one job per index, at most `max_running` of them running at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ArraySpec {
    /// The indices, ascending, without duplicates.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 10000))]
    pub indices: Vec<u32>,
    /// At most this many members run at once (`%N`); none means no limit.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub max_running: Option<u32>,
}

impl ArraySpec {
    /// Parses SLURM's form: `0-199%8`, `1,3,5-9`, `0-15:4` (step), with an optional `%N`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (list, limit) = match text.split_once('%') {
            Some((l, n)) => {
                let n: u32 = n
                    .trim()
                    .parse()
                    .map_err(|_| format!("`%{n}` is not a whole number"))?;
                if n == 0 {
                    return Err("`%0` would never run anything".into());
                }
                (l, Some(n))
            }
            None => (text, None),
        };
        let mut indices = Vec::new();
        for part in list.split(',') {
            let part = part.trim();
            let (range, step) = match part.split_once(':') {
                Some((r, s)) => (
                    r,
                    s.parse::<u32>()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| format!("`{part}`: the step must be a positive number"))?,
                ),
                None => (part, 1),
            };
            let num = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{part}` is not an index or a range like 0-15"))
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(range)?, num(range)?),
            };
            if hi < lo {
                return Err(format!("`{part}`: the range ends before it starts"));
            }
            if (u64::from(hi - lo) / u64::from(step)) as usize >= MAX_ARRAY {
                return Err(format!("more than {MAX_ARRAY} members"));
            }
            indices.extend((lo..=hi).step_by(step as usize));
            if indices.len() > MAX_ARRAY {
                return Err(format!("more than {MAX_ARRAY} members"));
            }
        }
        indices.sort_unstable();
        indices.dedup();
        Ok(Self {
            indices,
            max_running: limit,
        })
    }

    fn validate(&self) -> Result<(), FieldError> {
        if self.indices.is_empty() {
            return Err(bad("array.indices", "an array needs at least one index"));
        }
        if self.indices.len() > MAX_ARRAY {
            return Err(bad(
                "array.indices",
                format!("more than {MAX_ARRAY} members"),
            ));
        }
        if self.max_running == Some(0) {
            return Err(bad("array.max_running", "must be at least 1"));
        }
        Ok(())
    }
}

/// Which outcome of the other job a dependency waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DependencyKind {
    /// The other job succeeded.
    Afterok,
    /// The other job ended, however.
    Afterany,
    /// The other job ended without succeeding.
    Afternotok,
}

impl DependencyKind {
    /// Lower-case name as in SLURM.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Afterok => "afterok",
            Self::Afterany => "afterany",
            Self::Afternotok => "afternotok",
        }
    }
}

/// Start only after `job` (or every member of the array `job`) ended as `kind` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    /// What is waited for.
    pub kind: DependencyKind,
    /// The job (or array) id.
    pub job: u64,
}

/// Parses SLURM's `--dependency` form: `afterok:12:13,afterany:14` (`?` separators are not
/// supported: all must hold).
pub fn parse_dependencies(text: &str) -> Result<Vec<Dependency>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut fields = part.split(':');
        let kind = match fields.next().unwrap_or_default() {
            "afterok" => DependencyKind::Afterok,
            "afterany" => DependencyKind::Afterany,
            "afternotok" => DependencyKind::Afternotok,
            other => {
                return Err(format!(
                    "`{other}`: use afterok, afterany or afternotok followed by :JOBID"
                ));
            }
        };
        let mut any = false;
        for id in fields {
            // `12_3` names a member of array 12 in SLURM; Gantry gives members ids of their own.
            let job = id
                .trim()
                .parse()
                .map_err(|_| format!("`{id}` in `{part}` is not a job id"))?;
            out.push(Dependency { kind, job });
            any = true;
        }
        if !any {
            return Err(format!("`{part}` names no job (e.g. afterok:12)"));
        }
    }
    Ok(out)
}

/// Which processes of a task a signal reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SignalScope {
    /// Every process of the task (its process group): a command's, or a script's shell and
    /// all it started. Records made before scopes existed, and jobs given as a command.
    #[default]
    Group,
    /// As SLURM's `--signal=SIG`: every process of a script's task except the script's own
    /// shell, so that `srun` steps (and the programs the script runs) get it and the shell
    /// goes on.
    Steps,
    /// As SLURM's `--signal=B:SIG`: the script's shell only.
    BatchShell,
}

/// A signal sent ahead of a time limit, and first on eviction, so a job can checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WarnSignal {
    /// Signal name without `SIG` (`USR1`, `TERM`, `INT`...) or number.
    #[cfg_attr(feature = "openapi", schema(max_length = 16))]
    pub signal: String,
    /// Seconds before the time limit (default 60).
    #[serde(default = "default_before_s")]
    #[cfg_attr(feature = "openapi", schema(maximum = 86400))]
    pub before_s: u32,
    /// Which of a script's processes get it: `steps` (SLURM's default: all but the script's
    /// shell), `batch_shell` (`B:`) or `group` (all; the default of the API, and of a job
    /// given as a command, whatever this says).
    #[serde(default)]
    pub scope: SignalScope,
}

fn default_before_s() -> u32 {
    60
}

/// Signals a job may ask for.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("TERM", libc::SIGTERM),
    ("CONT", libc::SIGCONT),
    ("URG", libc::SIGURG),
    ("WINCH", libc::SIGWINCH),
    ("ALRM", libc::SIGALRM),
];

impl WarnSignal {
    /// Parses `sbatch --signal`'s form: `[B:]SIG[@SECONDS]`, e.g. `USR1@90`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (scope, text) = match text.strip_prefix("B:") {
            Some(rest) => (SignalScope::BatchShell, rest),
            None => (SignalScope::Steps, text.strip_prefix("R:").unwrap_or(text)),
        };
        let (sig, before) = match text.split_once('@') {
            Some((s, t)) => (
                s,
                t.parse()
                    .map_err(|_| format!("`@{t}` is not a number of seconds"))?,
            ),
            None => (text, default_before_s()),
        };
        let w = Self {
            signal: sig.to_string(),
            before_s: before,
            scope,
        };
        w.number().map(|_| w)
    }

    /// The signal's number.
    pub fn number(&self) -> Result<i32, String> {
        let name = self.signal.trim().to_ascii_uppercase();
        let name = name.strip_prefix("SIG").unwrap_or(&name);
        if let Ok(n) = name.parse::<i32>() {
            return SIGNALS
                .iter()
                .find(|(_, v)| *v == n)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("signal {n} is not one a job may ask for"));
        }
        SIGNALS
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(k, _)| *k).collect();
                format!(
                    "unknown signal `{}` (use one of {})",
                    self.signal,
                    names.join(", ")
                )
            })
    }
}

/// A health check of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// HTTP GET of this path on the service's port (e.g. `/healthz`); 2xx is healthy.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 1024, pattern = "^/"))]
    pub http_path: Option<String>,
    /// Or a command run on the node; exit 0 is healthy.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 4096))]
    pub command: Vec<String>,
    /// Seconds between checks (default 10).
    #[serde(default = "default_interval_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub interval_s: u32,
    /// Consecutive failures before a restart (default 3).
    #[serde(default = "default_failures")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub failures: u32,
    /// Seconds after each (re)start before the first check (default 0).
    #[serde(default)]
    pub initial_delay_s: u32,
}

fn default_interval_s() -> u32 {
    10
}
fn default_failures() -> u32 {
    3
}

/// What a service needs beyond a batch job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct ServiceSpec {
    /// The port it listens on; 0 (default) lets Gantry pick a free one, given to the task
    /// in `PORT` and `GANTRY_SERVICE_PORT`.
    #[cfg_attr(feature = "openapi", schema(maximum = 65535))]
    pub port: u16,
    /// Optional health check.
    pub health: Option<HealthCheck>,
    /// Longest wait between restarts, seconds (default 60); the wait doubles from 1 s.
    #[cfg_attr(feature = "openapi", schema(maximum = 3600))]
    pub max_backoff_s: u32,
    /// Copies of the service, each a job with its own allocation (`POST /v1/services`,
    /// `gantry service create`); 0 or absent for a single service job (`POST /v1/jobs`).
    #[serde(skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub replicas: u32,
    /// How a replicated service replaces its replicas on an update (`POST /v1/services`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<crate::model::RolloutStrategy>,
    /// Scaling a replicated service on a metric its replicas expose (`POST /v1/services`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<crate::model::AutoscaleSpec>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ServiceSpec {
    /// Longest back-off, with the default applied.
    pub fn max_backoff_s(&self) -> u32 {
        if self.max_backoff_s == 0 {
            60
        } else {
            self.max_backoff_s
        }
    }
}

/// Checks the optional parts of a submission.
pub fn validate(
    array: Option<&ArraySpec>,
    dependencies: &[Dependency],
    signal: Option<&WarnSignal>,
    service: Option<&ServiceSpec>,
) -> Result<(), FieldError> {
    if let Some(a) = array {
        a.validate()?;
    }
    if dependencies.len() > MAX_DEPENDENCIES {
        return Err(bad(
            "dependencies",
            format!("more than {MAX_DEPENDENCIES} dependencies"),
        ));
    }
    if let Some(s) = signal {
        s.number().map_err(|m| bad("signal.signal", m))?;
        if s.before_s > 24 * 3600 {
            return Err(bad("signal.before_s", "more than one day"));
        }
    }
    if let Some(svc) = service {
        if svc.max_backoff_s > 3600 {
            return Err(bad("service.max_backoff_s", "more than 3600 seconds"));
        }
        if svc.replicas > MAX_REPLICAS {
            return Err(bad(
                "service.replicas",
                format!("more than {MAX_REPLICAS} replicas"),
            ));
        }
        if let Some(r) = &svc.rollout {
            r.validate("service.rollout")?;
        }
        if let Some(a) = &svc.autoscale {
            a.validate("service.autoscale")?;
            if svc.port != 0 {
                return Err(bad(
                    "service.port",
                    "replicas get a port each: leave port at 0 (given to each in PORT)",
                ));
            }
        }
        if svc.replicas > 1 && svc.port != 0 {
            return Err(bad(
                "service.port",
                "replicas get a port each: leave port at 0 (given to each in PORT)",
            ));
        }
        if let Some(h) = &svc.health {
            match (&h.http_path, h.command.is_empty()) {
                (Some(_), false) => {
                    return Err(bad("service.health", "give http_path or command, not both"));
                }
                (None, true) => {
                    return Err(bad("service.health", "give http_path or command"));
                }
                (Some(p), true) if !p.starts_with('/') || p.len() > 1024 => {
                    return Err(bad(
                        "service.health.http_path",
                        "must start with / and be at most 1024 bytes",
                    ));
                }
                _ => {}
            }
            if h.interval_s == 0 || h.interval_s > 3600 {
                return Err(bad("service.health.interval_s", "must be 1..=3600"));
            }
            if h.failures == 0 || h.failures > 100 {
                return Err(bad("service.health.failures", "must be 1..=100"));
            }
            if h.command.len() > crate::model::MAX_ARGS {
                return Err(bad("service.health.command", "more than 4096 arguments"));
            }
            let max = crate::model::MAX_ARG_LEN;
            if let Some(i) = h
                .command
                .iter()
                .position(|a| a.len() > max || a.contains('\0'))
            {
                return Err(bad(
                    format!("service.health.command[{i}]"),
                    format!("must be at most {max} bytes without NUL (execve refuses more)"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_parse_like_slurm() {
        let a = ArraySpec::parse("0-199%8").unwrap();
        assert_eq!(a.indices.len(), 200);
        assert_eq!(a.max_running, Some(8));
        assert_eq!(
            ArraySpec::parse("1,3,5-7").unwrap().indices,
            vec![1, 3, 5, 6, 7]
        );
        assert_eq!(
            ArraySpec::parse("0-15:4").unwrap().indices,
            vec![0, 4, 8, 12]
        );
        assert!(ArraySpec::parse("5-1").is_err());
        assert!(ArraySpec::parse("0-3%0").is_err());
        assert!(ArraySpec::parse("0-4294967295").is_err());
        assert!(ArraySpec::parse("a-b").is_err());
    }

    #[test]
    fn dependencies_parse_like_slurm() {
        let d = parse_dependencies("afterok:12:13,afternotok:14").unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d[2].kind, DependencyKind::Afternotok);
        assert!(parse_dependencies("after:12").is_err());
        assert!(parse_dependencies("afterok").is_err());
        assert!(parse_dependencies("afterok:x").is_err());
    }

    #[test]
    fn signals_parse_like_sbatch() {
        let s = WarnSignal::parse("B:USR1@90").unwrap();
        assert_eq!((s.number().unwrap(), s.before_s), (libc::SIGUSR1, 90));
        assert_eq!(WarnSignal::parse("SIGTERM").unwrap().before_s, 60);
        assert!(WarnSignal::parse("KILL").is_err());
        assert!(WarnSignal::parse("USR1@soon").is_err());
    }
}
