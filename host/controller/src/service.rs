//! Long-running services (`kind: "service"`). A service runs until the daemon is asked to stop
//! it (cancel, time limit, eviction). When its tasks end on their own it is not finished: the
//! job stays `running`, keeps its allocation (the same GPUs), waits out a back-off and is
//! relaunched. A health check (HTTP GET on the service's port, or a command) that fails
//! `failures` times in a row stops the tasks, which restarts them the same way.
//!
//! Rules:
//! - The back-off doubles from 1 s up to `service.max_backoff_s` (default 60) with each restart,
//!   and is 1 s again after a run that lasted at least [`HEALTHY_RUN_MS`] (10 minutes).
//! - A gang restarts whole: the first task that ends makes the daemon stop the others (SIGTERM,
//!   SIGKILL after `kill_grace_s`); once all have ended, all are relaunched after the back-off.
//! - The wait is durable (`restart_at_ms`): a daemon restarted meanwhile relaunches the service;
//!   a stop asked for during the wait ends the job at once.
//! - One health checker runs per run of a service (a run: the job's start and its restart
//!   count); it gives up as soon as its run is no longer the job's current one (`checker`).
//!
//! Owns: the restart decision and timing, the health checkers and [`ServiceHealth`]. Does not
//! own launching tasks (`launch`), finishing jobs (`lifecycle`), the settings (`job_options`) or
//! the health checkers (`checker`) and probes (`probe`).

mod checker;
use gantry_node::port_owner;
pub(crate) mod port_guard;
mod port_holder;
pub(crate) mod probe;
mod remote_port;

use super::job_edit::JobEdit;
use super::transition::Transition;
use super::{Scheduler, lock, now_ms};
use gantry_api::model::job_options::ServiceSpec;
pub use gantry_api::model::{HealthState, ServiceHealth};
use gantry_api::model::{JobRecord, JobState};
use gantry_contract::JobKind;
use gantry_node::executor::TaskExit;
use std::time::Duration;

/// A run that lasted at least this long resets the back-off to 1 s.
pub const HEALTHY_RUN_MS: u64 = 10 * 60 * 1000;

/// The back-off before the next restart, seconds: 1 s for the first restart and after a run
/// of at least [`HEALTHY_RUN_MS`], else double the previous one, at most `max_s`.
pub fn next_backoff_s(previous_s: u32, ran_ms: u64, max_s: u32) -> u32 {
    let next = if previous_s == 0 || ran_ms >= HEALTHY_RUN_MS {
        1
    } else {
        previous_s.saturating_mul(2)
    };
    next.min(max_s).max(1)
}

impl Scheduler {
    /// `task_ended` hook, after the task's exit and usage were recorded: true when the job is
    /// a service that the daemon did not ask to stop, which is then restarted, not finished.
    pub(crate) fn service_task_ended(&self, job: &mut JobEdit<'_>, task: usize) -> bool {
        if job.spec.kind != JobKind::Service || job.stopping.is_some() {
            return false;
        }
        let ended = job.tasks.iter().filter(|t| t.exit.is_some()).count();
        if ended == 1 {
            let cause = end_cause(job, task);
            job.service_health_mut().last_exit = Some(cause);
            self.stop_tasks(job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        if ended == job.tasks.len() {
            self.schedule_restart(job);
        }
        true
    }

    /// Adoption hook for a running job whose tasks all ended: true when it is a service that
    /// waits out (or now starts) its back-off rather than finishing.
    pub(crate) fn service_resumes(&self, job: &mut JobEdit<'_>) -> bool {
        if job.spec.kind != JobKind::Service || job.stopping.is_some() {
            return false;
        }
        if job.restart_at_ms.is_none() {
            job.service_health_mut().last_exit =
                Some("its tasks ended while the daemon was down".into());
            self.schedule_restart(job);
        }
        true
    }

    /// Run-loop step: relaunches services whose back-off is over, ends those whose stop was
    /// asked for during the back-off, and starts or ends health checkers to match.
    pub(crate) fn restart_due_services(&self) {
        let now = now_ms();
        let mut st = lock(&self.inner.state);
        let mut changed = false;
        let mut wanted = Vec::new();
        let mut to_launch = Vec::new();
        for mut job in st.jobs.edit_running() {
            if job.state != JobState::Running || job.spec.kind != JobKind::Service {
                continue;
            }
            let all_ended = job.tasks.iter().all(|t| t.exit.is_some());
            let restart_at = job.restart_at_ms;
            match restart_at {
                Some(_) if all_ended && job.stopping.is_some() => {
                    self.finish(&mut job);
                    job.write_or_log();
                    changed = true;
                }
                Some(at) if all_ended && now >= at && self.relaunch(&mut job, now) => {
                    to_launch.push(job.record().clone());
                    changed = true;
                }
                _ => {}
            }
            if job.health.is_none() && job.state == JobState::Running {
                job.service_health_mut();
            }
            if let Some(run) = self.check_run(&job) {
                wanted.push(run);
            }
        }
        self.sync_checkers(&mut st.jobs, wanted);
        drop(st);
        if changed {
            self.flush();
        }
        for job in to_launch {
            self.launch_started(job);
        }
    }

    /// Sets the back-off of a service whose tasks all ended.
    fn schedule_restart(&self, job: &mut JobEdit<'_>) {
        let now = now_ms();
        let run_start = job.tasks.iter().filter_map(|t| t.started_ms).min();
        let ran_ms = now.saturating_sub(run_start.unwrap_or(now));
        let max_s = job
            .spec
            .service
            .as_ref()
            .map_or(60, ServiceSpec::max_backoff_s);
        let restart = job.restarts + 1;
        let health = job.service_health_mut();
        let backoff_s = next_backoff_s(health.backoff_s, ran_ms, max_s);
        health.backoff_s = backoff_s;
        let cause = health.last_exit.clone().unwrap_or_default();
        let until_ms = now + u64::from(backoff_s) * 1000;
        job.apply_or_log(Transition::ServiceBackOff { until_ms });
        // Wake the run loop when the back-off is over rather than at its next tick.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let me = self.clone();
            runtime.spawn(async move {
                tokio::time::sleep(Duration::from_secs(u64::from(backoff_s))).await;
                me.wake();
            });
        }
        self.event(
            job.id,
            "restarting",
            format!("{cause}; restart {restart} in {backoff_s} s"),
        );
    }

    /// Makes every task of a service a new run on its allocation, durably; the caller
    /// launches it once the job table's lock is let go.
    fn relaunch(&self, job: &mut JobEdit<'_>, now: u64) -> bool {
        if !job.apply_or_log(Transition::ServiceRelaunched { at_ms: now }) {
            return false;
        }
        self.fresh_port_if_taken(job);
        for i in 0..job.tasks.len() {
            // Without the old exit record a crash before the launch is seen as "never
            // launched" by adoption, not as this run's end.
            let _ = std::fs::remove_file(self.exit_path(job.id, i));
        }
        let checked = job
            .spec
            .service
            .as_ref()
            .is_some_and(|s| s.health.is_some());
        let restart = job.restarts;
        let health = job.service_health_mut();
        health.state = ServiceHealth::new(checked).state;
        health.failures = 0;
        let message = format!(
            "restart {restart} after a {} s back-off ({})",
            health.backoff_s,
            health.last_exit.as_deref().unwrap_or("ended")
        );
        job.write_or_log();
        self.event(job.id, "restarted", message);
        true
    }
}

/// Whether a running service's health lets it be sent requests: its last check passed, or
/// it has no check. A run not yet looked at by the service tick (no health yet) counts as
/// starting when it has a check: a new replica is not sent requests before it listens.
pub(super) fn may_serve(job: &JobRecord) -> bool {
    let has_check = job
        .spec
        .service
        .as_ref()
        .is_some_and(|s| s.health.is_some());
    health_lets_serve(has_check, job.health.as_ref())
}

fn health_lets_serve(has_check: bool, health: Option<&ServiceHealth>) -> bool {
    match health {
        Some(h) => matches!(h.state, HealthState::Healthy | HealthState::Unchecked),
        None => !has_check,
    }
}

/// How task `task` of a service ended, e.g. `task 0 exited with code 1 after 0.3 s`, naming the
/// health check when it stopped the task.
fn end_cause(job: &JobRecord, task: usize) -> String {
    let Some(t) = job.tasks.get(task) else {
        return format!("task {task} ended");
    };
    let how = match t.exit {
        Some(TaskExit::Exited(code)) => format!("exited with code {code}"),
        Some(TaskExit::Signaled(sig)) => format!("was killed by signal {sig}"),
        Some(TaskExit::ImageFailed) => "could not pull or unpack its image".to_string(),
        Some(TaskExit::Lost) | None => "was lost".to_string(),
    };
    let ran_ms = now_ms().saturating_sub(t.started_ms.unwrap_or_else(now_ms));
    let mut cause = format!("task {task} {how} after {:.1} s", ran_ms as f64 / 1000.0);
    if t.usage.is_some_and(|u| u.oom_killed) {
        cause.push_str(" (out of memory)");
    }
    let check_limit = job
        .spec
        .service
        .as_ref()
        .and_then(|s| s.health.as_ref())
        .map(|h| h.failures);
    if let (Some(limit), Some(h)) = (check_limit, &job.health)
        && h.failures >= limit
    {
        let error = h.last_error.as_deref().unwrap_or("failed");
        cause.push_str(&format!(", stopped by its health check ({error})"));
    }
    cause
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_passed_check_or_no_check_lets_a_replica_serve() {
        let with = |state| {
            let mut h = ServiceHealth::new(true);
            h.state = state;
            h
        };
        assert!(
            !health_lets_serve(true, None),
            "not yet looked at, has a check"
        );
        assert!(
            health_lets_serve(false, None),
            "not yet looked at, no check"
        );
        assert!(!health_lets_serve(true, Some(&with(HealthState::Starting))));
        assert!(!health_lets_serve(
            true,
            Some(&with(HealthState::Unhealthy))
        ));
        assert!(health_lets_serve(true, Some(&with(HealthState::Healthy))));
        assert!(health_lets_serve(false, Some(&ServiceHealth::new(false))));
    }

    #[test]
    fn backoff_doubles_up_to_the_limit_and_resets_after_a_long_run() {
        let mut b = 0;
        let mut seen = Vec::new();
        for _ in 0..8 {
            b = next_backoff_s(b, 500, 30);
            seen.push(b);
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(next_backoff_s(30, HEALTHY_RUN_MS, 30), 1);
        assert_eq!(next_backoff_s(30, HEALTHY_RUN_MS - 1, 30), 30);
        assert_eq!(next_backoff_s(1, 0, 1), 1);
    }
}
