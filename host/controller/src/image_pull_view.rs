//! Why a started job in an image has no process yet: its node is pulling the image. The
//! shim writes the pull's progress beside the task's files (`task-N.pull`,
//! `gantry_node::container::pull_progress`); a job's view shows it as the job's reason,
//! `pulling image X (n of m layers, a of b MiB, r MiB/s)`, as Kubernetes shows a pod that
//! pulls. Computed when a job is asked for, never stored.
//!
//! Owns: that reason. Does not own the pull (`gantry_node::container`) nor a task on an
//! agent's node (its runner answers none: its log carries the same progress lines every few seconds).

use super::Scheduler;
use super::transition::host_reason;
use gantry_api::model::{JobRecord, JobState};
use gantry_contract::ReasonCode;

impl Scheduler {
    /// `job` with the progress of its image's pull as its reason, when it runs, has an
    /// image and a task of it on this node is still pulling.
    pub(crate) fn with_pull_progress(&self, mut job: JobRecord) -> JobRecord {
        if job.state != JobState::Running || job.spec.image.is_none() {
            return job;
        }
        let pulling = (0..job.tasks.len()).find_map(|i| {
            self.runner_of(&job.tasks[i].node)?
                .pull_progress(Self::task_key(&job, i))
        });
        if let Some(progress) = pulling {
            let mut reason = host_reason(ReasonCode::Other, progress.message());
            reason.stage = "image".into();
            job.reason = Some(reason);
        }
        job
    }
}
