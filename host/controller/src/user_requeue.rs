//! A user's requeue of a running job, as SLURM's `scontrol requeue`: its tasks are stopped
//! (SIGTERM, the grace, SIGKILL) and, once all have ended, the job goes back to the queue
//! with its id, counted as a requeue (`lifecycle.rs`, `StopCause::Requeue`). Checkpointing
//! launchers (submitit's USR2 handler) call it from inside the job to run again.
//!
//! Owns: the request and its check. Does not own who may ask (the API checks that the
//! caller owns the job), stopping tasks (`stop_tasks`) or the requeue itself (`lifecycle`).

use super::job_control::ControlError;
use super::transition::Transition;
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{JobRecord, JobState, StopCause};
use std::time::Duration;

impl Scheduler {
    /// Stops running job `id` so that it runs again from the start. A job already being
    /// stopped for a requeue is answered as it is; a pending or ended job is refused.
    pub(crate) fn requeue_running(&self, id: u64) -> Result<JobRecord, ControlError> {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(id) else {
            return Err(match st.jobs.find(id)? {
                Some(j) => ControlError::NotRunning {
                    id,
                    state: j.state.as_str(),
                },
                None => ControlError::NotFound(id),
            });
        };
        if job.state != JobState::Running {
            return Err(ControlError::NotRunning {
                id,
                state: job.state.as_str(),
            });
        }
        if job.stopping.is_none() {
            job.apply_or_log(Transition::StopRequested(StopCause::Requeue));
            self.stop_tasks(&job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        let snapshot = job.record().clone();
        let written = job.write();
        drop(st);
        if let Err(e) = written.and_then(|()| self.inner.store.flush()) {
            tracing::error!(job = id, "cannot persist requeue: {e}");
        }
        let _ = self
            .inner
            .store
            .event(now_ms(), Some(id), "requeue", "requested".into());
        self.wake();
        Ok(snapshot)
    }
}
