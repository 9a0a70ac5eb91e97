//! Where a job's files are on the controller's own node: `<data_dir>/jobs/<id>/`, with each
//! task's log (`task-N.log`), exit record (`task-N.exit`, its input FIFO beside it) and image
//! pull progress (`task-N.pull`). An agent keeps its own layout (`gantry-agent`'s `tasks.rs`).
//!
//! Owns: those paths. Does not own writing the files (the executor and its shim) nor
//! removing them (`retention.rs`).

use std::path::{Path, PathBuf};

/// The job directories under one data directory.
#[derive(Debug, Clone)]
pub(crate) struct JobPaths {
    jobs: PathBuf,
}

impl JobPaths {
    /// The layout under `data_dir`.
    pub(crate) fn under(data_dir: &Path) -> Self {
        Self {
            jobs: data_dir.join("jobs"),
        }
    }

    pub(crate) fn job_dir(&self, id: u64) -> PathBuf {
        self.jobs.join(id.to_string())
    }

    pub(crate) fn log_path(&self, id: u64, task: usize) -> PathBuf {
        self.job_dir(id).join(format!("task-{task}.log"))
    }

    pub(crate) fn exit_path(&self, id: u64, task: usize) -> PathBuf {
        self.job_dir(id).join(format!("task-{task}.exit"))
    }

    pub(crate) fn pull_path(&self, id: u64, task: usize) -> PathBuf {
        self.job_dir(id).join(format!("task-{task}.pull"))
    }
}
