//! A job's fields as SLURM's commands print them: states (`COMPLETED`, `OUT_OF_MEMORY`,
//! `PD`), ids (`64_3` for an array member), times (`2026-12-07T04:40:00`, local), durations
//! (`1-02:03:04`), exit codes (`code:signal`), node lists (`node[01-04]`), resources
//! (`AllocTRES`) and reasons. Shared by `squeue`, `sacct` and `scontrol`.
//!
//! Owns: these spellings. Does not own which jobs are shown or the layout.

use crate::squeue_view::slurm_duration;
use gantry_api::model::{JobRecord, JobState};
use gantry_api::task::TaskExit;

/// The state as SLURM spells it in full (`sacct`, `squeue %T`).
pub(super) fn state_long(job: &JobRecord) -> &'static str {
    match job.state {
        JobState::Pending => "PENDING",
        JobState::Running if job.stopping.is_some() => "COMPLETING",
        JobState::Running => "RUNNING",
        JobState::Succeeded => "COMPLETED",
        JobState::Failed => match job.end_reason.as_deref() {
            Some("out-of-memory") => "OUT_OF_MEMORY",
            Some("node-down") => "NODE_FAIL",
            _ => "FAILED",
        },
        JobState::Cancelled => "CANCELLED",
        JobState::TimedOut => "TIMEOUT",
        JobState::Preempted => "PREEMPTED",
    }
}

/// The state as `sacct` spells it: `CANCELLED by UID` names who cancelled (their uid from
/// this machine's accounts, else their name).
pub(super) fn accounted_state(job: &JobRecord) -> String {
    match (&job.state, &job.cancelled_by) {
        (JobState::Cancelled, Some(by)) => {
            let who = uid_of(by).map_or_else(|| by.clone(), |u| u.to_string());
            format!("CANCELLED by {who}")
        }
        _ => state_long(job).to_string(),
    }
}

/// The uid of account `name` in `/etc/passwd`.
fn uid_of(name: &str) -> Option<u32> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// The state's short code (`squeue %t`).
pub(super) fn state_short(job: &JobRecord) -> &'static str {
    match state_long(job) {
        "PENDING" => "PD",
        "RUNNING" => "R",
        "COMPLETING" => "CG",
        "COMPLETED" => "CD",
        "OUT_OF_MEMORY" => "OOM",
        "NODE_FAIL" => "NF",
        "FAILED" => "F",
        "CANCELLED" => "CA",
        "TIMEOUT" => "TO",
        _ => "PR",
    }
}

/// The id as SLURM shows it: `64_3` for member 3 of array 64.
pub(super) fn job_id(job: &JobRecord) -> String {
    match job.array {
        Some(a) => format!("{}_{}", a.array_id, a.index),
        None => job.id.to_string(),
    }
}

/// A time as SLURM prints it: local, `YYYY-MM-DDTHH:MM:SS`; `Unknown` without one.
pub(super) fn time(ms: Option<u64>) -> String {
    ms.and_then(|ms| jiff::Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok())
        .map_or_else(
            || "Unknown".into(),
            |t| {
                t.to_zoned(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%dT%H:%M:%S")
                    .to_string()
            },
        )
}

/// How long the job ran (or has run), `[D-]HH:MM:SS` as `sacct`'s `Elapsed`.
pub(super) fn elapsed(job: &JobRecord, now_ms: u64) -> String {
    let secs = match (job.start_ms, job.end_ms) {
        (Some(s), Some(e)) => e.saturating_sub(s) / 1000,
        (Some(s), None) => now_ms.saturating_sub(s) / 1000,
        _ => 0,
    };
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match d {
        0 => format!("{h:02}:{m:02}:{s:02}"),
        _ => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

/// The time limit as `squeue %l` shows it (`UNLIMITED` for none).
pub(super) fn time_limit(job: &JobRecord) -> String {
    match job.spec.time_limit_s {
        0 => "UNLIMITED".into(),
        s => slurm_duration(s),
    }
}

/// `code:signal` as `sacct`'s `ExitCode`.
pub(super) fn exit_code(job: &JobRecord) -> String {
    let signal = job.tasks.iter().find_map(|t| match t.exit {
        Some(TaskExit::Signaled(s)) => Some(s),
        _ => None,
    });
    match (signal, job.exit_code) {
        (Some(s), _) => format!("0:{s}"),
        (None, Some(c)) => format!("{}:0", c.clamp(0, 255)),
        (None, None) => "0:0".into(),
    }
}

/// The nodes of the job's tasks in hostlist notation (`None` before it ran).
pub(super) fn node_list(job: &JobRecord) -> String {
    let mut nodes: Vec<String> = Vec::new();
    for t in &job.tasks {
        if !nodes.contains(&t.node) {
            nodes.push(t.node.clone());
        }
    }
    if nodes.is_empty() {
        return "None assigned".into();
    }
    gantry_api::hostlist::compress(&nodes)
}

/// Nodes the job has or asks for.
pub(super) fn node_count(job: &JobRecord) -> usize {
    let mut nodes: Vec<&str> = job.tasks.iter().map(|t| t.node.as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len().max(job.spec.nodes.map_or(1, |n| n as usize))
}

/// Tasks, CPUs (whole, rounded up), GPUs and memory in MiB the job asks for.
pub(super) fn requested(job: &JobRecord) -> (u64, u64, u64, u64) {
    let mut out = (0, 0, 0, 0);
    for g in &job.spec.tasks {
        let n = u64::from(g.count);
        out.0 += n;
        out.1 += n * u64::from(g.cpu_milli.div_ceil(1000));
        out.2 += n * u64::from(g.gpus);
        out.3 += n * g.memory_mib;
    }
    out
}

/// SLURM's TRES string: `cpu=4,mem=8G,node=1,billing=4,gres/gpu=2`.
pub(super) fn tres(job: &JobRecord) -> String {
    let (_, cpus, gpus, mem) = requested(job);
    let mut out = format!(
        "billing={cpus},cpu={cpus},mem={mem}M,node={}",
        node_count(job)
    );
    if gpus > 0 {
        out.push_str(&format!(",gres/gpu={gpus}"));
    }
    out
}

/// Why a pending job waits, or the nodes of a running one (`squeue %R`).
pub(super) fn reason_or_nodes(job: &JobRecord) -> String {
    match job.state {
        JobState::Pending => format!("({})", reason(job)),
        _ => node_list(job),
    }
}

/// The reason a job waits, as one word where SLURM has one (`Resources`, `Dependency`,
/// `JobHeldUser`), else Gantry's message.
pub(super) fn reason(job: &JobRecord) -> String {
    if job.held_by.is_some() {
        return "JobHeldUser".into();
    }
    let Some(r) = &job.reason else {
        return "None".into();
    };
    let message = r.message.to_ascii_lowercase();
    match r.code.as_str() {
        "insufficient-gpus"
        | "insufficient-cpu"
        | "insufficient-memory"
        | "gpu-model-unavailable" => "Resources".into(),
        "blocked-by-higher-priority" => "Priority".into(),
        _ if message.contains("depend") => "Dependency".into(),
        _ if message.contains("begin") => "BeginTime".into(),
        _ => r.message.replace(' ', "_"),
    }
}
