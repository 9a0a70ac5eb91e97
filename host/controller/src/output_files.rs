//! Where a task's output goes when its job names files (`sbatch --output/--error`): the
//! patterns SLURM scripts use, expanded per task (`%j` job id, `%A` array id, `%a` array
//! index, `%x` job name, `%u` user, `%t` task index, `%N` node, `%%` a percent sign; an
//! unknown `%` letter stays as written). The file is opened by the task itself, as its user,
//! relative to its working directory (`gantry-node`'s `child.rs`), never by the daemon.
//!
//! Owns: the expansion. Does not own opening the files.

use gantry_api::model::JobRecord;

/// `pattern` expanded for task `task` of `job`.
pub(crate) fn expand(pattern: &str, job: &JobRecord, task: usize) -> String {
    let node = job.tasks.get(task).map_or("", |t| t.node.as_str());
    let (array_id, index) = job.array.map_or((job.id.to_string(), String::new()), |a| {
        (a.array_id.to_string(), a.index.to_string())
    });
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(&job.id.to_string()),
            Some('A') => out.push_str(&array_id),
            Some('a') => out.push_str(&index),
            Some('x') => out.push_str(&job.spec.name),
            Some('u') => out.push_str(&job.spec.user),
            Some('t') => out.push_str(&task.to_string()),
            Some('N') => out.push_str(node),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The files task `task` of `job` writes its stdout and stderr to (`None`: its log).
/// Without `error`, stderr goes where stdout goes, as with sbatch.
pub(crate) fn of_task(job: &JobRecord, task: usize) -> (Option<String>, Option<String>) {
    let output = job.spec.output.as_deref().map(|p| expand(p, job, task));
    let error = job
        .spec
        .error
        .as_deref()
        .map(|p| expand(p, job, task))
        .or_else(|| output.clone());
    (output, error)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::{ArrayMember, JobSpec};

    #[test]
    fn the_patterns_sbatch_scripts_use() {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "name": "train", "user": "ann", "argv": ["true"],
            "output": "out-%A_%a-%j.%t.%N.%u.%x.%%.%q", "error": "err-%j",
        }))
        .unwrap();
        let mut job = JobRecord::new(66, spec, 0);
        job.array = Some(ArrayMember {
            array_id: 64,
            index: 2,
            max_running: None,
            count: 0,
            min: 0,
            max: 0,
        });
        let (out, err) = of_task(&job, 0);
        assert_eq!(out.as_deref(), Some("out-64_2-66.0..ann.train.%.%q"));
        assert_eq!(err.as_deref(), Some("err-66"));
        job.spec.error = None;
        assert_eq!(
            of_task(&job, 0).1,
            of_task(&job, 0).0,
            "stderr follows stdout"
        );
        job.spec.output = None;
        assert_eq!(of_task(&job, 0), (None, None));
    }
}
