//! `gantry jobs` as a table shaped like `squeue`'s: the id (an array member as `64_3`, the
//! pending members of an array that wait for the same kind of reason as one line,
//! `64_[5-999]`, with the first one's message),
//! state, name, user, queue, elapsed time and limit in SLURM's `D-HH:MM:SS`, the number of
//! nodes, and the nodes a running job holds (with its GPUs) or the reason a job waits or
//! ended.
//!
//! Owns: the table's layout, as text, without printing it. Does not own which jobs are
//! listed (`history_cli`).

use gantry_api::model::{JobRecord, JobState};
use std::collections::{BTreeMap, BTreeSet};

/// A duration in SLURM's form: `MM:SS`, `H:MM:SS`, or `D-HH:MM:SS`.
pub fn slurm_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, _) => format!("{h}:{m:02}:{s:02}"),
        _ => format!("{d}-{h:02}:{m:02}:{s:02}"),
    }
}

/// `5-7,9,12-20` for a sorted list of indices.
fn ranges(indices: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let start = indices[i];
        let mut end = start;
        while i + 1 < indices.len() && indices[i + 1] == end + 1 {
            i += 1;
            end = indices[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// The id column of one job: `ID`, or `ARRAY_INDEX` for an array member.
fn id_cell(job: &JobRecord) -> String {
    match job.array {
        Some(a) => format!("{}_{}", a.array_id, a.index),
        None => job.id.to_string(),
    }
}

/// The GPU indices of each task, `0,1 | 2,3`.
pub(crate) fn gpus_per_task(job: &JobRecord) -> String {
    let per_task: Vec<String> = job
        .tasks
        .iter()
        .map(|t| {
            let list: Vec<String> = t.gpus.iter().map(|g| g.index.to_string()).collect();
            list.join(",")
        })
        .collect();
    per_task.join(" | ")
}

/// The last column: the nodes and GPUs of a running job, else the reason it waits or ended.
fn where_or_why(job: &JobRecord) -> String {
    if job.state == JobState::Running {
        let nodes: BTreeSet<&str> = job.tasks.iter().map(|t| t.node.as_str()).collect();
        let nodes: Vec<&str> = nodes.into_iter().collect();
        return format!("{}  GPUs [{}]", nodes.join(","), gpus_per_task(job));
    }
    match &job.reason {
        Some(r) => format!("({}: {})", crate::cli::wire_text(&r.code), r.message),
        None => "-".into(),
    }
}

/// One row's cells.
fn row(id: String, job: &JobRecord, now_ms: u64) -> String {
    let elapsed = match (job.start_ms, job.end_ms) {
        (Some(s), Some(e)) => slurm_duration(e.saturating_sub(s) / 1000),
        (Some(s), None) => slurm_duration(now_ms.saturating_sub(s) / 1000),
        _ => "0:00".into(),
    };
    let limit = match job.spec.time_limit_s {
        0 => "UNLIMITED".into(),
        s => slurm_duration(s),
    };
    let nodes = job
        .tasks
        .iter()
        .map(|t| t.node.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let name: String = job.spec.name.chars().take(20).collect();
    let user: String = job.spec.user.chars().take(10).collect();
    let queue: String = job.spec.queue.chars().take(9).collect();
    format!(
        "{id:>12} {:<10} {name:<20} {user:<10} {queue:<9} {elapsed:>10} {limit:>10} {:>5}  {}",
        job.state.as_str(),
        if job.state == JobState::Running {
            nodes.max(1)
        } else {
            nodes
        },
        where_or_why(job)
    )
}

/// The table: a header, then one line per job in the order given, except that pending
/// members of one array waiting for the same reason code share the line of the first.
pub fn render(jobs: &[JobRecord], now_ms: u64) -> Vec<String> {
    let mut out = vec![format!(
        "{:>12} {:<10} {:<20} {:<10} {:<9} {:>10} {:>10} {:>5}  NODELIST(REASON)",
        "JOBID", "STATE", "NAME", "USER", "QUEUE", "TIME", "LIMIT", "NODES"
    )];
    let collapsible = |j: &JobRecord| j.state == JobState::Pending && j.array.is_some();
    let key = |j: &JobRecord| {
        (
            j.array.map_or(0, |a| a.array_id),
            j.reason.as_ref().map(|r| crate::cli::wire_text(&r.code)),
        )
    };
    // Each group of collapsible members: the id of its first member here, its indices.
    let mut groups: BTreeMap<(u64, Option<String>), (u64, Vec<u32>)> = BTreeMap::new();
    for j in jobs.iter().filter(|j| collapsible(j)) {
        let group = groups.entry(key(j)).or_insert((j.id, Vec::new()));
        group.1.extend(j.array.map(|a| a.index));
    }
    for job in jobs {
        if !collapsible(job) {
            out.push(row(id_cell(job), job, now_ms));
            continue;
        }
        let Some((first, indices)) = groups.get_mut(&key(job)) else {
            continue;
        };
        if *first != job.id {
            continue;
        }
        indices.sort_unstable();
        let id = match job.array {
            Some(a) if indices.len() > 1 => format!("{}_[{}]", a.array_id, ranges(indices)),
            _ => id_cell(job),
        };
        out.push(row(id, job, now_ms));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::{ArrayMember, JobSpec};

    fn job(id: u64, state: JobState, array: Option<(u64, u32)>) -> JobRecord {
        let spec: JobSpec =
            serde_json::from_str(r#"{"name": "train", "argv": ["true"], "time_limit_s": 7200}"#)
                .unwrap();
        let mut j = JobRecord::new(id, spec, 0);
        j.state = state;
        j.array = array.map(|(array_id, index)| ArrayMember {
            array_id,
            index,
            max_running: None,
            count: 0,
            min: 0,
            max: 0,
        });
        j
    }

    #[test]
    fn durations_read_as_slurm_writes_them() {
        assert_eq!(slurm_duration(5), "0:05");
        assert_eq!(slurm_duration(3723), "1:02:03");
        assert_eq!(slurm_duration(2 * 86_400 + 3600), "2-01:00:00");
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    #[test]
    fn pending_array_members_share_a_line_and_running_ones_keep_theirs() {
        let mut jobs = vec![job(1, JobState::Running, None)];
        jobs[0].start_ms = Some(0);
        jobs.push(job(10, JobState::Running, Some((10, 0))));
        for i in 1..1000 {
            jobs.push(job(10 + u64::from(i), JobState::Pending, Some((10, i))));
        }
        let lines = render(&jobs, 3_723_000);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(lines[0].contains("JOBID") && lines[0].contains("NODELIST(REASON)"));
        assert!(
            lines[1].contains("1:02:03") && lines[1].contains("2:00:00"),
            "{}",
            lines[1]
        );
        assert!(lines[2].trim_start().starts_with("10_0 "), "{}", lines[2]);
        assert!(
            lines[3].trim_start().starts_with("10_[1-999] "),
            "{}",
            lines[3]
        );
    }
}
