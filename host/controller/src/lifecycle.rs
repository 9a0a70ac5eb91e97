//! The end of tasks and jobs: a task's exit (stopping the rest of a failed gang), the job's
//! final state or its requeue, and time limits.
//!
//! Owns: deciding these transitions (`transition.rs` applies them). Does not own starting
//! jobs (`apply`, `launch`).

use super::job_edit::JobEdit;
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{JobRecord, JobState, StopCause};
use gantry_contract::ReasonCode;
use gantry_node::executor::{IMAGE_FAILED_CODE, TaskEvent, TaskExit};
use std::time::Duration;

impl Scheduler {
    /// A task ended: record it, stop the rest of a failed gang, finish the job when all ended.
    /// The record is durable at the caller's flush: the run loop flushes once per batch of
    /// ends (a crash before it loses nothing: adoption reads the task's exit record again),
    /// an agent's end is flushed before the heartbeat acknowledges it.
    pub(crate) fn task_ended(&self, ev: TaskEvent) {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(ev.job_id) else {
            return;
        };
        if job.state != JobState::Running {
            return;
        }
        let task = ev.task_index as usize;
        let Some(t) = job.tasks.get(task) else {
            return;
        };
        if t.exit.is_some() {
            // Already ended (declared lost with its node, or reported twice): applied once.
            return;
        }
        let start = t.started_ms.or(job.start_ms).unwrap_or(0);
        let ended = Transition::TaskEnded {
            task,
            exit: ev.exit,
            ended_ms: Some(self.process_end_ms(job.id, task, start)),
            usage: Some(ev.usage),
        };
        if !job.apply_or_log(ended) {
            return;
        }
        self.account_task_end(&job, ev.task_index as usize, ev.usage);
        // A service is restarted, not finished, unless the daemon stopped it (service.rs).
        if self.service_task_ended(&mut job, ev.task_index as usize) {
            drop(job);
            drop(st);
            return self.wake();
        }
        let failed = ev.exit != TaskExit::Exited(0);
        if failed && job.stopping.is_none() && job.tasks.iter().any(|t| t.exit.is_none()) {
            job.apply_or_log(Transition::StopRequested(StopCause::GangFailed));
            self.stop_tasks(&job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(&mut job);
        }
        drop(job);
        drop(st);
        self.wake();
    }

    /// The job's local tasks have all ended: the scratch tmpfs of its directory, if any, is
    /// unmounted (a requeued run gets a fresh one).
    pub(crate) fn release_scratch(&self, id: u64) {
        if let Err(e) = self.inner.executor.release_workdir(&self.job_dir(id)) {
            tracing::warn!(job = id, "cannot unmount the job's scratch directory: {e}");
        }
    }

    /// All tasks have ended: decide the job's final state, or requeue it (after an eviction
    /// or a gang that could not start, while its requeue limit allows).
    pub(crate) fn finish(&self, job: &mut JobEdit<'_>) {
        self.release_scratch(job.id);
        let code = job.tasks.iter().find_map(|t| match t.exit {
            Some(TaskExit::Exited(0)) | None => None,
            Some(TaskExit::Exited(c)) => Some(c),
            Some(TaskExit::Signaled(s)) => Some(128 + s),
            Some(TaskExit::Lost) => Some(-1),
            Some(TaskExit::ImageFailed) => Some(IMAGE_FAILED_CODE),
        });
        let exit_code = code.unwrap_or(0);
        let end_ms = last_process_end(job).unwrap_or_else(now_ms);
        let oom = job
            .tasks
            .iter()
            .enumerate()
            .find(|(_, t)| t.usage.is_some_and(|u| u.oom_killed));
        let (state, end_reason, reason) = match (job.stopping.clone(), oom) {
            (Some(StopCause::Cancel), _) => (JobState::Cancelled, "cancelled", "cancelled".into()),
            (Some(StopCause::TimeLimit), _) => (
                JobState::TimedOut,
                "time-limit",
                format!("killed at its time limit of {} s", job.spec.time_limit_s),
            ),
            (Some(StopCause::Evicted { for_job }), _) => {
                // The preemption stage's reason, set when it was evicted (`evictions.rs`).
                let why = match job.reason.as_ref().filter(|r| r.stage == "preemption") {
                    Some(r) => format!("evicted for job {for_job}, {}", r.message),
                    None => format!("evicted for job {for_job}"),
                };
                // Only a job that consented to preemption goes back to the queue: one that
                // did not was evicted as an idle interactive job (the engine allows no other,
                // `validate.rs`), and requeued it would take the GPU back, still idle.
                if job.spec.requeue
                    && job.spec.preemptible
                    && self.requeue(job, ReasonCode::Preempted, &why)
                {
                    return;
                }
                let why = if job.spec.preemptible {
                    self.not_requeued(job, why)
                } else {
                    format!("{why}; not requeued: it was idle and did not consent to preemption")
                };
                (JobState::Preempted, "preempted", why)
            }
            (Some(StopCause::Requeue), _) => {
                // Asked for by its owner: whether the job asked for requeues on eviction
                // does not matter, the requeue limit does.
                let why = "requeued on request (scontrol requeue)";
                if self.requeue(job, ReasonCode::Other, why) {
                    return;
                }
                (
                    JobState::Cancelled,
                    "requeue-refused",
                    format!(
                        "stopped to be requeued, but it was requeued {} times (limit {})",
                        job.requeues,
                        self.max_requeues(job)
                    ),
                )
            }
            (Some(StopCause::NodeDown { node }), _) => {
                let why = format!("node {node} went down while the job ran");
                if job.spec.requeue && self.requeue(job, ReasonCode::Other, &why) {
                    return;
                }
                (JobState::Failed, "node-down", self.not_requeued(job, why))
            }
            (Some(StopCause::GpuFault { node, gpu, reason }), _) => {
                // Not the job's fault: requeued whatever its requeue setting, within the
                // requeue limit (gpu_health.rs stopped it).
                let why = format!("GPU {gpu} of node {node} failed ({reason})");
                if self.requeue(job, ReasonCode::Other, &why) {
                    return;
                }
                (
                    JobState::Failed,
                    "gpu-fault",
                    format!(
                        "{why}; not requeued: it was requeued {} times (limit {})",
                        job.requeues,
                        self.max_requeues(job)
                    ),
                )
            }
            (Some(StopCause::LaunchFailed), _) => {
                let why = job
                    .reason
                    .as_ref()
                    .map_or_else(|| "a task failed to launch".into(), |r| r.message.clone());
                if job.spec.requeue && self.requeue(job, ReasonCode::Other, &why) {
                    return;
                }
                (
                    JobState::Failed,
                    "launch-failed",
                    self.not_requeued(job, why),
                )
            }
            (_, Some((i, t))) => (
                JobState::Failed,
                "out-of-memory",
                format!(
                    "out-of-memory: task {i} exceeded its memory limit of {} MiB",
                    t.memory_mib
                ),
            ),
            // The shim's code for an image it could not pull or unpack (as `docker run`'s).
            (Some(StopCause::GangFailed) | None, None)
                if job
                    .tasks
                    .iter()
                    .any(|t| t.exit == Some(TaskExit::ImageFailed)) =>
            {
                (
                    JobState::Failed,
                    "image-pull-failed",
                    format!(
                        "image {} could not be pulled or unpacked (exit code {IMAGE_FAILED_CODE}); \
                         the task's log has the registry's answer",
                        job.spec.image.as_deref().unwrap_or_default()
                    ),
                )
            }
            (Some(StopCause::GangFailed) | None, None) if code.is_some() => {
                let lost = job.tasks.iter().any(|t| t.exit == Some(TaskExit::Lost));
                (
                    JobState::Failed,
                    if lost { "lost" } else { "exit-code" },
                    format!("exit code {}", code.unwrap_or(0)),
                )
            }
            _ => (JobState::Succeeded, "completed", "exit code 0".to_string()),
        };
        // A failed task keeps the reason that explains it (e.g. which task failed first);
        // every other end gets its own.
        let keep = matches!(end_reason, "exit-code" | "lost") && job.reason.is_some();
        let finished = Transition::Finished {
            state,
            end_reason: end_reason.to_string(),
            exit_code,
            end_ms,
            reason: (!keep).then(|| host_reason(ReasonCode::Other, reason.clone())),
        };
        if !job.apply_or_log(finished) {
            return;
        }
        self.observe_runtime(job);
        super::job_trace::job_event(
            job.id,
            "finished",
            0,
            &format!("{}: {reason}", state.as_str()),
        );
        self.event(job.id, state.as_str(), reason);
    }

    /// The requeue limit of `job`.
    pub(crate) fn max_requeues(&self, job: &JobRecord) -> u32 {
        job.spec
            .max_requeues
            .unwrap_or(self.inner.config.execution.max_requeues)
    }

    /// Puts an ended run of `job` back in the queue, unless it reached its requeue limit
    /// (then returns false and changes nothing).
    fn requeue(&self, job: &mut JobEdit<'_>, code: ReasonCode, why: &str) -> bool {
        if job.requeues >= self.max_requeues(job) {
            return false;
        }
        let requeued = Transition::Requeued {
            reason: host_reason(code, format!("{why}; requeued")),
        };
        if !job.apply_or_log(requeued) {
            return false;
        }
        self.event(job.id, "requeued", why.to_string());
        super::job_trace::job_event(job.id, "requeued", 0, why);
        true
    }

    /// The end message of a job that was not requeued.
    fn not_requeued(&self, job: &JobRecord, why: String) -> String {
        if job.spec.requeue {
            format!(
                "{why}; not requeued: it was requeued {} times (limit {})",
                job.requeues,
                self.max_requeues(job)
            )
        } else {
            why
        }
    }

    /// Stops running jobs that reached their time limit.
    pub(crate) fn enforce_time_limits(&self) {
        let now = now_ms();
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        for mut job in st.jobs.edit_running() {
            let over = job.state == JobState::Running
                && job.stopping.is_none()
                && job.spec.time_limit_s > 0
                && job
                    .start_ms
                    .is_some_and(|s| now >= s + job.spec.time_limit_s * 1000);
            if let Some((pid_signal, before_ms)) = warn_due(&job, now) {
                job.apply_or_log(Transition::Warned);
                let scope = job
                    .spec
                    .signal
                    .as_ref()
                    .map(|w| w.scope)
                    .unwrap_or_default();
                self.signal_running_tasks_in(&job, pid_signal, None, scope);
                job.write_or_log();
                self.event(
                    job.id,
                    "signal",
                    format!(
                        "warning signal {pid_signal} sent {} s before its time limit",
                        before_ms / 1000
                    ),
                );
            }
            if over {
                job.apply_or_log(Transition::StopRequested(StopCause::TimeLimit));
                self.stop_tasks(&job, grace);
                job.write_or_log();
                self.event(
                    job.id,
                    "time-limit",
                    format!("reached {} s; stopping", job.spec.time_limit_s),
                );
            }
        }
    }
}

/// The warning signal of a running job and how long before its limit it is due, if it is due
/// now and was not sent yet.
fn warn_due(job: &JobRecord, now: u64) -> Option<(i32, u64)> {
    let warn = job.spec.signal.as_ref()?;
    let start = job.start_ms?;
    if job.warned || job.state != JobState::Running || job.stopping.is_some() {
        return None;
    }
    if job.spec.time_limit_s == 0 {
        return None;
    }
    let limit = start + job.spec.time_limit_s * 1000;
    let before_ms = u64::from(warn.before_s) * 1000;
    let signal = warn.number().ok()?;
    (now + before_ms >= limit).then_some((signal, before_ms))
}

/// When the last of `job`'s tasks ended, if every task's end time is known: the job's end as
/// its processes saw it, not as late as the daemon learnt of it (what accounting records use).
fn last_process_end(job: &JobRecord) -> Option<u64> {
    let ends: Option<Vec<u64>> = job.tasks.iter().map(|t| t.ended_ms).collect();
    let last = ends?.into_iter().max()?;
    Some(last.max(job.start_ms.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::last_process_end;
    use gantry_api::model::{JobRecord, JobSpec, TaskRecord};

    fn job_with_ends(ends: &[Option<u64>]) -> JobRecord {
        let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        let mut j = JobRecord::new(1, spec, 0);
        j.start_ms = Some(1_000);
        j.tasks = ends
            .iter()
            .map(|&ended_ms| TaskRecord {
                node: "n0".into(),
                gpus: Vec::new(),
                cpu_milli: 0,
                memory_mib: 0,
                pid: None,
                exit: None,
                started_ms: Some(1_000),
                ended_ms,
                usage: None,
                gpu_usage: None,
            })
            .collect();
        j
    }

    #[test]
    fn a_job_ends_when_its_last_process_did_and_only_when_every_end_is_known() {
        assert_eq!(
            last_process_end(&job_with_ends(&[Some(5_000), Some(5_040)])),
            Some(5_040)
        );
        assert_eq!(last_process_end(&job_with_ends(&[Some(5_000), None])), None);
        // A clock that put an end before the start does not make the job end before it began.
        assert_eq!(last_process_end(&job_with_ends(&[Some(900)])), Some(1_000));
    }
}
