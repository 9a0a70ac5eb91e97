//! The agent's restart: tasks outlive the agent (their shims lead their own process groups),
//! so at start the run directories under `agent-tasks/` that were not acknowledged are read
//! back into the table. A run whose shim still runs is adopted (the executor reports its end
//! later); one with an exit record ended while the agent was down; one with neither is
//! `Lost`.
//!
//! Owns: that scan. Does not own the table (`tasks`) or adoption itself (`executor`).

use super::tasks::{ACKED, Entry, TaskTable, lock};
use gantry_api::cluster::TaskKey;
use gantry_node::executor::{TaskExit, TaskUsage};

/// What [`TaskTable::recover`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Runs still running, adopted.
    pub adopted: usize,
    /// Runs that ended (or were lost) while the agent was down, to report.
    pub ended: usize,
}

impl TaskTable {
    /// Reads the unacknowledged run directories back into the table (see the module doc).
    /// Call once at start, before serving and before `Executor::sweep_cgroups`.
    pub(crate) fn recover(&self) -> std::io::Result<Recovered> {
        let mut found = Recovered::default();
        let mut entries = lock(&self.entries);
        for dirent in std::fs::read_dir(&self.root)? {
            let dirent = dirent?;
            let Some(key) = dirent.file_name().to_str().and_then(parse_key) else {
                tracing::debug!(name = ?dirent.file_name(), "not a task run directory; skipped");
                continue;
            };
            let dir = dirent.path();
            if !dir.is_dir() || dir.join(ACKED).exists() || entries.contains_key(&key) {
                continue;
            }
            let exit_path = TaskTable::exit_path(&dir);
            if let Some(pid) = self.executor.find_running(&exit_path) {
                self.executor.adopt(key.job, key.task, pid, exit_path);
                entries.insert(key, Entry::running(pid));
                found.adopted += 1;
                tracing::info!(%key, pid, "adopted a task that outlived the last agent");
                continue;
            }
            let (exit, usage) = self
                .executor
                .recorded_exit(&exit_path)
                .unwrap_or((TaskExit::Lost, TaskUsage::default()));
            if let Err(e) = self.executor.release_workdir(&dir) {
                tracing::warn!(%key, error = %e, "cannot unmount the run's scratch directory");
            }
            let pid = TaskTable::recorded_pid(&dir).unwrap_or(0);
            entries.insert(key, Entry::ended(pid, exit, usage));
            found.ended += 1;
            tracing::info!(%key, ?exit, "a task ended while the agent was down");
        }
        // Runs neither adopted nor listed (acknowledged before a crash) keep no tmpfs.
        for dir in self.executor.scratch_mounts_under(&self.root) {
            let listed = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_key)
                .and_then(|k| entries.get(&k))
                .is_some_and(|e| e.end.is_none());
            if !listed && let Err(e) = self.executor.release_workdir(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot unmount a stale scratch directory");
            }
        }
        Ok(found)
    }
}

/// `<job>.<task>.<run>` → its key.
pub(crate) fn parse_key(name: &str) -> Option<TaskKey> {
    let mut parts = name.split('.');
    let key = TaskKey {
        job: parts.next()?.parse().ok()?,
        task: parts.next()?.parse().ok()?,
        run: parts.next()?.parse().ok()?,
    };
    parts.next().is_none().then_some(key)
}
