//! The end of a task, once its shim is gone (after `launch`'s wait or `adopt`'s polling): how
//! it ended (the exit record, else what the caller saw), what it used (its cgroup's counters,
//! else the shim's `wait4` figures), then killing what is left in its cgroup and removing it,
//! and finally the [`TaskEvent`].
//!
//! Owns that sequence. It does not watch the shim (`mod.rs`) nor read cgroup files itself
//! (`cgroup.rs`, `usage.rs`).

use std::path::PathBuf;

use tokio::sync::mpsc::UnboundedSender;

use super::cgroup::{CgroupVersion, TaskCgroup};
use super::{TaskEvent, TaskExit, TaskUsage, Watched, lock, record};

/// Everything needed to conclude one task.
pub(crate) struct Ending {
    pub job_id: u64,
    pub task_index: u32,
    pub exit_path: PathBuf,
    /// The task's cgroup (version and name), when tasks get cgroups.
    pub cgroup: Option<(CgroupVersion, String)>,
    pub events: UnboundedSender<TaskEvent>,
    pub watched: Watched,
}

impl Ending {
    /// Concludes the task and sends its event; `fallback` is the exit when there is no record.
    /// The cgroup work (which may wait for killed processes) runs on a blocking thread.
    pub async fn conclude(self, fallback: TaskExit) {
        let run = move || self.conclude_blocking(fallback);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                if let Err(e) = rt.spawn_blocking(run).await {
                    tracing::error!(error = %e, "concluding a task failed");
                }
            }
            Err(_) => run(),
        }
    }

    fn conclude_blocking(self, fallback: TaskExit) {
        let record = record::read_or_warn(&self.exit_path);
        let exit = record.map_or(fallback, |r| r.exit);
        let mut usage = record.and_then(|r| r.usage).unwrap_or_default();
        if let Some((version, name)) = &self.cgroup {
            let cg = TaskCgroup::open(*version, name);
            if cg.exists() {
                if !cg.kill_all() {
                    tracing::warn!(cgroup = %name, "processes survive in the task cgroup");
                }
                usage = merge(usage, cg.usage(exit));
                cg.destroy();
            }
        }
        super::container_launch::forget_container(&self.exit_path);
        lock(&self.watched).remove(&(self.job_id, self.task_index));
        let (job_id, task_index) = (self.job_id, self.task_index);
        tracing::debug!(job_id, task_index, ?exit, ?usage, "task ended");
        let event = TaskEvent {
            job_id,
            task_index,
            exit,
            usage,
        };
        if self.events.send(event).is_err() {
            tracing::warn!(job_id, task_index, "task event dropped: receiver is gone");
        }
    }
}

/// The shim's figures and the cgroup's, combined: both are lower bounds of what the task used
/// (the cgroup also sees processes the shim never reaped, the shim also sees what ran before
/// a failed cgroup read), so the larger of each, and OOM if either saw it.
pub(crate) fn merge(shim: TaskUsage, cgroup: TaskUsage) -> TaskUsage {
    TaskUsage {
        cpu_ms: shim.cpu_ms.max(cgroup.cpu_ms),
        memory_peak_mib: shim.memory_peak_mib.max(cgroup.memory_peak_mib),
        oom_killed: shim.oom_killed || cgroup.oom_killed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_takes_the_larger_and_any_oom() {
        let shim = TaskUsage {
            cpu_ms: 10,
            memory_peak_mib: 50,
            oom_killed: false,
        };
        let cg = TaskUsage {
            cpu_ms: 30,
            memory_peak_mib: 20,
            oom_killed: true,
        };
        let expect = TaskUsage {
            cpu_ms: 30,
            memory_peak_mib: 50,
            oom_killed: true,
        };
        assert_eq!(merge(shim, cg), expect);
    }
}
