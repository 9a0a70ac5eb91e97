//! Re-attaching to tasks after a daemon restart.
//!
//! Owns: the recovery rules for jobs that were running when the daemon stopped. Does not
//! own how a node finds a run again (`Runner::recover`: `runner_local.rs`, `runner_agent.rs`)
//! nor the executor's adoption of a single shim.

use super::runner::Recovered;
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, lock};
use gantry_api::model::StopCause;
use gantry_contract::ReasonCode;
use std::time::Duration;

impl Scheduler {
    /// After adoption: unmounts the scratch tmpfs of every job directory whose job is not
    /// running any more (a daemon killed while tasks ran left them mounted).
    pub(crate) fn release_stale_scratch(&self) {
        let jobs_dir = self.inner.config.data_dir.join("jobs");
        let mounted = self.inner.executor.scratch_mounts_under(&jobs_dir);
        if mounted.is_empty() {
            return;
        }
        let st = lock(&self.inner.state);
        let stale: Vec<u64> = mounted
            .iter()
            .filter_map(|dir| dir.file_name()?.to_str()?.parse::<u64>().ok())
            .filter(|id| {
                st.jobs
                    .get(*id)
                    .is_none_or(|j| j.state != gantry_api::model::JobState::Running)
            })
            .collect();
        drop(st);
        for id in &stale {
            self.release_scratch(*id);
        }
        tracing::info!(
            jobs = stale.len(),
            "released the scratch directories of ended jobs"
        );
    }

    /// After a restart: watch the tasks that kept running; resume stops under way.
    ///
    /// A start is flushed before its tasks are launched, but their pids only reach the store
    /// with a later flush, so a SIGKILL in between leaves a running job with tasks that have no
    /// pid. Such a task may never have been launched, or its shim may be running or done: a
    /// shim is found by its exit file on its command line, an end by an exit record written
    /// since the start. A job none of whose tasks was launched goes back to the queue (it
    /// never ran, so it cannot run twice); in a gang that was partly launched, the tasks that
    /// were not are lost and the gang is stopped.
    ///
    /// Each task's node answers through its runner (`Runner::recover`): the local one looks
    /// for the shim or its exit record and watches a running shim again; an agent's leaves
    /// its tasks to its heartbeats, which say what runs and what ended (a launch that never
    /// arrived is sent again, `reconcile.rs`; a node whose agent does not come back is marked
    /// down, which ends its tasks). A task whose node is no longer in the table is lost.
    pub(crate) fn adopt_survivors(&self) {
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        let mut changed = false;
        for mut job in st.jobs.edit_running() {
            let since = job.start_ms.unwrap_or(0);
            let mut unlaunched = Vec::new();
            for task in 0..job.tasks.len() {
                let t = &job.tasks[task];
                if t.exit.is_some() {
                    continue;
                }
                let key = Self::task_key(&job, task);
                let found = match self.runner_of(&t.node) {
                    Some(runner) => runner.recover(key, t.pid, since),
                    None if t.pid.is_none() => Recovered::NotLaunched,
                    None => Recovered::Gone,
                };
                match found {
                    Recovered::Running(pid) if t.pid.is_none() => {
                        tracing::info!(
                            job = job.id,
                            task,
                            pid,
                            "found the shim of a task whose pid was not stored"
                        );
                        job.apply_or_log(Transition::TaskLaunched { task, pid });
                    }
                    Recovered::Ended(exit) => {
                        tracing::info!(
                            job = job.id,
                            task,
                            ?exit,
                            "a task whose pid was not stored ended while the daemon was down"
                        );
                        let ended = Transition::TaskEnded {
                            task,
                            exit,
                            ended_ms: None,
                            usage: None,
                        };
                        job.apply_or_log(ended);
                    }
                    Recovered::NotLaunched => unlaunched.push(task),
                    Recovered::Gone => {
                        tracing::warn!(job = job.id, task, node = %t.node, "its node is no longer known; the task is lost");
                        job.apply_or_log(Transition::task_lost(task));
                        job.apply_or_log(Transition::StopRequested(StopCause::GangFailed));
                    }
                    Recovered::Running(_) | Recovered::Reported => {}
                }
            }
            // Only a node that runs here answers `NotLaunched`: none of the job's tasks ran.
            if !unlaunched.is_empty() && unlaunched.len() == job.tasks.len() {
                let reason = host_reason(
                    ReasonCode::Other,
                    "not launched before a daemon restart; requeued".into(),
                );
                if job.apply_or_log(Transition::Unlaunched { reason }) {
                    self.event(job.id, "requeued", "not launched before a restart".into());
                    job.write_or_log();
                    changed = true;
                    continue;
                }
            }
            for task in unlaunched {
                job.apply_or_log(Transition::task_lost(task));
                job.apply_or_log(Transition::StopRequested(StopCause::GangFailed));
            }
            self.account_ended_while_down(&job);
            if job.stopping.is_some() {
                self.stop_tasks(&job, grace);
            }
            // A service whose tasks all ended waits out its back-off (service.rs).
            if job.tasks.iter().all(|t| t.exit.is_some()) && !self.service_resumes(&mut job) {
                self.finish(&mut job);
            }
            job.write_or_log();
            changed = true;
            tracing::info!(job = job.id, "re-attached to running job after restart");
        }
        drop(st);
        if changed {
            self.flush();
        }
        self.inner.executor.sweep_cgroups();
    }
}
