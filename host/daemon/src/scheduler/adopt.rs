//! Re-attaching to tasks after a daemon restart.
//!
//! Owns: the recovery rules for jobs that were running when the daemon stopped. Does not
//! own the executor's adoption of a single shim.

use super::apply::host_reason;
use super::{Scheduler, lock};
use crate::executor::TaskExit;
use crate::model::{JobState, StopCause};
use gantry_contract::ReasonCode;
use std::time::Duration;

impl Scheduler {
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
    /// Tasks on agents' nodes are left as they are: their agents' heartbeats say what runs
    /// and what ended, and a launch that never arrived is sent again (`remote.rs`); a node
    /// whose agent does not come back is marked down, which ends its tasks.
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
                    .is_none_or(|j| j.state != crate::model::JobState::Running)
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

    pub(crate) fn adopt_survivors(&self) {
        let mut st = lock(&self.inner.state);
        let grace = Duration::from_secs(self.inner.config.kill_grace_s);
        let mut changed = false;
        let agents: Vec<String> = lock(&self.inner.members)
            .all()
            .filter(|(_, m)| m.agent().is_some())
            .map(|(_, m)| m.info.name.clone())
            .collect();
        let remote = |t: &crate::model::TaskRecord| agents.contains(&t.node);
        for job in st.jobs.running_mut() {
            let since = job.start_ms.unwrap_or(0);
            let mut unlaunched = Vec::new();
            let local_count = job.tasks.iter().filter(|t| !remote(t)).count();
            for (i, t) in job.tasks.iter_mut().enumerate() {
                if t.pid.is_none() && t.exit.is_none() && !remote(t) {
                    let exit_path = self.exit_path(job.id, i);
                    t.pid = self.inner.executor.find_running(&exit_path);
                    if t.pid.is_none() {
                        t.exit = self.inner.executor.exit_since(&exit_path, since);
                    }
                    match (t.pid, t.exit) {
                        (Some(pid), _) => tracing::info!(
                            job = job.id,
                            task = i,
                            pid,
                            "found the shim of a task whose pid was not stored"
                        ),
                        (None, Some(exit)) => tracing::info!(
                            job = job.id,
                            task = i,
                            ?exit,
                            "a task whose pid was not stored ended while the daemon was down"
                        ),
                        (None, None) => unlaunched.push(i),
                    }
                }
            }
            if !unlaunched.is_empty()
                && unlaunched.len() == job.tasks.len()
                && local_count == job.tasks.len()
            {
                job.state = JobState::Pending;
                job.start_ms = None;
                job.tasks.clear();
                job.stopping = None;
                job.reason = Some(host_reason(
                    ReasonCode::Other,
                    "not launched before a daemon restart; requeued".into(),
                ));
                self.event(job.id, "requeued", "not launched before a restart".into());
                self.persist(job);
                changed = true;
                continue;
            }
            for i in unlaunched {
                job.tasks[i].exit = Some(TaskExit::Lost);
                job.stopping.get_or_insert(StopCause::GangFailed);
            }
            self.account_ended_while_down(job);
            for (i, t) in job.tasks.iter_mut().enumerate() {
                if remote(t) {
                    continue;
                }
                if let (Some(pid), None) = (t.pid, t.exit) {
                    self.inner
                        .executor
                        .adopt(job.id, i as u32, pid, self.exit_path(job.id, i));
                }
            }
            if job.stopping.is_some() {
                self.stop_tasks(job, grace);
            }
            // A service whose tasks all ended waits out its back-off (service.rs).
            if job.tasks.iter().all(|t| t.exit.is_some()) && !self.service_resumes(job) {
                self.finish(job);
            }
            self.persist(job);
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
