//! Health checkers of services: one background task per run of a service with a health check,
//! started by the run loop (after a launch, a restart or a daemon restart), probing every
//! `interval_s` after `initial_delay_s`, and ended when its run is over. After `failures`
//! failures in a row it stops the run's tasks, which makes `service` restart them.
//!
//! Owns: the registry of checkers, their loop and what a check's result does to the job's
//! `ServiceHealth`. Does not own restarts (`service`) or the probes (`probe`).

use super::HealthState;
use super::probe::{self, ProbeTarget};
use crate::job_table::JobTable;
use crate::{Scheduler, lock, now_ms};
use gantry_api::model::job_options::HealthCheck;
use gantry_api::model::{JobRecord, JobState};
use gantry_contract::JobKind;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::task::AbortHandle;

/// One run of one service: its job, start and restart count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunKey {
    job: u64,
    start_ms: u64,
    restarts: u32,
}

/// What a health checker needs of its run.
pub(super) struct CheckRun {
    key: RunKey,
    check: HealthCheck,
    target: ProbeTarget,
}

/// Running health checkers by (scheduler, job id): the run each checks and its task.
type Checkers = HashMap<(usize, u64), (RunKey, AbortHandle)>;

/// The health checkers of this process. Kept here, not on the scheduler, so that services need
/// no field in the scheduler's shared state; keyed by scheduler too, for tests that run several.
static CHECKERS: LazyLock<Mutex<Checkers>> = LazyLock::new(Mutex::default);

impl Scheduler {
    /// The current run of `job` if it is a service with a health check that should be checked.
    pub(super) fn check_run(&self, job: &JobRecord) -> Option<CheckRun> {
        let key = current_run(job)?;
        let check = job.spec.service.as_ref()?.health.clone()?;
        // The service runs where rank 0 runs: on an agent's node, that agent runs its checks
        // (HTTP ones against the service's port there, like the controller does here).
        let agent = self.remote_task(job, 0);
        let remote = agent.is_some();
        // There, checks begin once the agent has acknowledged the launch: one sent before
        // would find no such task on the agent and count as a failure of the new run.
        if remote && job.tasks.first().is_none_or(|t| t.pid.is_none()) {
            return None;
        }
        // On an agent's node, no directory of the controller's: the agent picks the run's.
        let default_dir = match remote {
            true => std::path::PathBuf::new(),
            false => self.job_dir(job.id),
        };
        let workdir = job
            .spec
            .workdir
            .clone()
            .map_or(default_dir, std::path::PathBuf::from);
        let mut env: Vec<(String, String)> = job.spec.env.clone().into_iter().collect();
        env.push(("GANTRY_JOB_ID".into(), job.id.to_string()));
        if let Some(port) = job.service_port {
            env.push(("PORT".into(), port.to_string()));
            env.push(("GANTRY_SERVICE_PORT".into(), port.to_string()));
        }
        Some(CheckRun {
            key,
            check,
            target: ProbeTarget {
                agent,
                port: job.service_port,
                workdir,
                env,
                user: (job.spec.user.clone(), job.spec.anonymous),
                task: (job.id, 0),
                port_owner: match remote {
                    true => None,
                    false => self
                        .inner
                        .executor
                        .identity(&job.spec.user, job.spec.anonymous)
                        .ok()
                        .flatten()
                        .map(|who| who.uid),
                },
            },
        })
    }

    /// Ends the checkers of runs that are over and starts one for each run in `wanted` that
    /// has none (after a launch, a restart or a daemon restart).
    pub(super) fn sync_checkers(&self, jobs: &mut JobTable, wanted: Vec<CheckRun>) {
        let owner = Arc::as_ptr(&self.inner) as usize;
        let mut checkers = lock(&CHECKERS);
        checkers.retain(|(o, _), (key, handle)| {
            let keep = *o != owner || wanted.iter().any(|w| w.key == *key);
            if !keep {
                handle.abort();
            }
            keep
        });
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for run in wanted {
            if checkers.contains_key(&(owner, run.key.job)) {
                continue;
            }
            if let Some(mut job) = jobs.edit(run.key.job) {
                let health = job.service_health_mut();
                health.state = HealthState::Starting;
                health.failures = 0;
            }
            let key = run.key;
            let handle = runtime.spawn(self.clone().check_health(run)).abort_handle();
            checkers.insert((owner, key.job), (key, handle));
        }
    }

    /// A health checker: waits `initial_delay_s`, then probes every `interval_s` until its run
    /// is over or it stopped the run's tasks.
    async fn check_health(self, run: CheckRun) {
        let delay = Duration::from_secs(u64::from(run.check.initial_delay_s));
        tokio::time::sleep(delay).await;
        let period = Duration::from_secs(u64::from(run.check.interval_s.max(1)));
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let result = probe::probe(&run.check, &run.target, &self.inner.executor).await;
            if !self.record_check(&run, result.map_err(|e| e.to_string())) {
                return;
            }
        }
    }

    /// Records one check's result; after `failures` failures in a row, stops the run's tasks.
    /// False when the checker should end.
    fn record_check(&self, run: &CheckRun, result: Result<(), String>) -> bool {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(run.key.job) else {
            return false;
        };
        if current_run(&job) != Some(run.key) {
            return false;
        }
        let health = job.service_health_mut();
        let before = health.clone();
        health.checked_ms = Some(now_ms());
        let stop = match result {
            Ok(()) => {
                health.state = HealthState::Healthy;
                health.failures = 0;
                None
            }
            Err(e) => {
                health.failures += 1;
                let limit_hit = health.failures >= run.check.failures;
                if limit_hit || health.state == HealthState::Healthy {
                    health.state = HealthState::Unhealthy;
                }
                health.last_error = Some(e.clone());
                limit_hit.then(|| format!("health check failed {} times: {e}", health.failures))
            }
        };
        let persist = before.state != health.state || before.last_error != health.last_error;
        if let Some(message) = &stop {
            self.event(job.id, "health-check", format!("{message}; stopping"));
            self.stop_tasks(&job, Duration::from_secs(self.inner.config.kill_grace_s));
        }
        if persist || stop.is_some() {
            // Written as the edit ends, under the lock.
            job.save();
        }
        stop.is_none()
    }
}

/// The run a health checker may act on: a running service that is not stopping or waiting.
fn current_run(job: &JobRecord) -> Option<RunKey> {
    let live = job.state == JobState::Running
        && job.spec.kind == JobKind::Service
        && job.stopping.is_none()
        && job.restart_at_ms.is_none();
    live.then_some(RunKey {
        job: job.id,
        start_ms: job.start_ms.unwrap_or(0),
        restarts: job.restarts,
    })
}
