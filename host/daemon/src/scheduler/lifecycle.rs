//! The end of tasks and jobs: a task's exit (stopping the rest of a failed gang), the job's
//! final state or its requeue, and time limits.
//!
//! Owns: these state transitions. Does not own starting jobs (`apply`, `launch`).

use super::apply::host_reason;
use super::{Scheduler, lock, now_ms};
use crate::executor::{TaskEvent, TaskExit};
use crate::model::{JobRecord, JobState, StopCause};
use gantry_contract::ReasonCode;
use std::time::Duration;

impl Scheduler {
    /// A task ended: record it, stop the rest of a failed gang, finish the job when all ended.
    pub(crate) fn task_ended(&self, ev: TaskEvent) {
        let mut st = lock(&self.inner.state);
        let Some(job) = st.jobs.get_mut(&ev.job_id) else {
            return;
        };
        if job.state != JobState::Running {
            return;
        }
        let Some(task) = job.tasks.get_mut(ev.task_index as usize) else {
            return;
        };
        task.exit = Some(ev.exit);
        let failed = ev.exit != TaskExit::Exited(0);
        if failed && job.stopping.is_none() && job.tasks.iter().any(|t| t.exit.is_none()) {
            job.stopping = Some(StopCause::GangFailed);
            self.stop_tasks(job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
        let snapshot = job.clone();
        drop(st);
        self.persist(&snapshot);
        self.flush();
        self.wake();
    }

    /// All tasks have ended: decide the job's final state (or requeue it).
    pub(crate) fn finish(&self, job: &mut JobRecord) {
        let code = job.tasks.iter().find_map(|t| match t.exit {
            Some(TaskExit::Exited(0)) | None => None,
            Some(TaskExit::Exited(c)) => Some(c),
            Some(TaskExit::Signaled(s)) => Some(128 + s),
            Some(TaskExit::Lost) => Some(-1),
        });
        job.exit_code = Some(code.unwrap_or(0));
        job.end_ms = Some(now_ms());
        let (state, reason) = match job.stopping.take() {
            Some(StopCause::Cancel) => (JobState::Cancelled, "cancelled".to_string()),
            Some(StopCause::TimeLimit) => (
                JobState::TimedOut,
                format!("killed at its time limit of {} s", job.spec.time_limit_s),
            ),
            Some(StopCause::Evicted { for_job }) if job.spec.requeue => {
                job.state = JobState::Pending;
                job.requeues += 1;
                job.start_ms = None;
                job.end_ms = None;
                job.exit_code = None;
                job.reason = Some(host_reason(
                    ReasonCode::Preempted,
                    format!("evicted for job {for_job}; requeued"),
                ));
                self.event(job.id, "requeued", format!("evicted for job {for_job}"));
                crate::telemetry::job_event(
                    job.id,
                    "requeued",
                    0,
                    &format!("evicted for job {for_job}"),
                );
                return;
            }
            Some(StopCause::Evicted { for_job }) => {
                (JobState::Preempted, format!("evicted for job {for_job}"))
            }
            Some(StopCause::GangFailed) | None if code.is_some() => {
                (JobState::Failed, format!("exit code {}", code.unwrap_or(0)))
            }
            _ => (JobState::Succeeded, "exit code 0".to_string()),
        };
        job.state = state;
        crate::telemetry::job_event(
            job.id,
            "finished",
            0,
            &format!("{}: {reason}", state.as_str()),
        );
        if state != JobState::Failed || job.reason.is_none() {
            job.reason = Some(host_reason(ReasonCode::Other, reason.clone()));
        }
        self.event(job.id, state.as_str(), reason);
    }

    /// Stops running jobs that reached their time limit.
    pub(crate) fn enforce_time_limits(&self) {
        let now = now_ms();
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        for job in st.jobs.values_mut() {
            let over = job.state == JobState::Running
                && job.stopping.is_none()
                && job.spec.time_limit_s > 0
                && job
                    .start_ms
                    .is_some_and(|s| now >= s + job.spec.time_limit_s * 1000);
            if over {
                job.stopping = Some(StopCause::TimeLimit);
                self.stop_tasks(job, grace);
                let snapshot = job.clone();
                self.persist(&snapshot);
                self.event(
                    job.id,
                    "time-limit",
                    format!("reached {} s; stopping", job.spec.time_limit_s),
                );
            }
        }
    }
}
