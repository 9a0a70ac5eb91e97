//! Signalling a running job on a user's request (`scancel --signal`, and the Ctrl-C that
//! `gantry run` forwards), and what an attached client needs to follow a job.
//!
//! Owns: these operations. Does not own HTTP (`api::attach`) or processes (`executor`).

use super::{Scheduler, lock};
use gantry_api::model::JobState;
use std::path::PathBuf;

/// Why a signal was not sent.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// No such job.
    #[error("job {0} does not exist")]
    NotFound(u64),
    /// The job is not running.
    #[error("job {0} is {1}, not running")]
    NotRunning(u64, &'static str),
}

impl Scheduler {
    /// Sends `signal` to every running task of job `id` (their whole process groups);
    /// returns how many tasks were signalled.
    pub(crate) fn signal_job(&self, id: u64, signal: i32) -> Result<usize, SignalError> {
        let st = lock(&self.inner.state);
        let job = st.jobs.get(id).ok_or(SignalError::NotFound(id))?;
        if job.state != JobState::Running {
            return Err(SignalError::NotRunning(id, job.state.as_str()));
        }
        let sent = self.signal_running_tasks(job, signal, None);
        drop(st);
        self.event(
            id,
            "signal",
            format!("signal {signal} sent to {sent} task(s) on request"),
        );
        Ok(sent)
    }

    /// The log file of task `task` of job `id` (it may not exist yet).
    pub(crate) fn task_log_path(&self, id: u64, task: usize) -> PathBuf {
        self.log_path(id, task)
    }
}
