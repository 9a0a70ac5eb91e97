//! Applying a cycle's outcome: committing its starts (then launching them off the lock),
//! asking evicted jobs to stop (`evictions.rs`), recording pending reasons, priorities and faults; and the
//! job directory's paths (from `job_paths.rs`), writing a record, events.
//!
//! Owns: turning a cycle's decisions into transitions (`transition.rs` applies them).
//! Does not own the decisions (the engine), the launch (`launch`) nor task ends
//! (`lifecycle`).

use super::job_edit::{Annotation, JobEdit};
use super::start_commit::{self, Started};
use super::task_env::gpu_list;
use super::transition::{StartedRun, Transition};
use super::{Scheduler, lock, now_ms};
use gantry_api::model::{GpuShareView, JobRecord, JobState, ReasonView, TaskRecord};
use gantry_engine::{CycleOutcome, StartDecision};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

impl Scheduler {
    /// Job `id`'s directory on the controller's own node (`job_paths.rs`).
    pub(crate) fn job_dir(&self, id: u64) -> PathBuf {
        self.inner.paths.job_dir(id)
    }

    pub(crate) fn log_path(&self, id: u64, task: usize) -> PathBuf {
        self.inner.paths.log_path(id, task)
    }

    pub(crate) fn exit_path(&self, id: u64, task: usize) -> PathBuf {
        self.inner.paths.exit_path(id, task)
    }

    /// Makes state changes durable before acting on more of them (a started job must
    /// not be forgotten by a crash and started twice).
    pub(crate) fn flush(&self) {
        if let Err(e) = self.inner.store.flush() {
            tracing::error!("cannot flush the store: {e}");
        }
    }

    pub(crate) fn event(&self, job: u64, kind: &str, message: String) {
        tracing::info!(job, kind, "{message}");
        if let Err(e) = self.inner.store.event(now_ms(), Some(job), kind, message) {
            tracing::error!(job, "cannot write event: {e}");
        }
    }

    pub(crate) fn apply(&self, outcome: CycleOutcome) {
        lock(&self.inner.faults).record(outcome.cycle_id, &outcome.faults, &self.inner.store);
        let mut st = lock(&self.inner.state);
        // Record every start durably first, then launch (after the lock is let go): a crash
        // in between leaves a job marked running without processes (re-attach marks it
        // lost), never a job that runs twice. A start that cannot be recorded (a full disk)
        // is undone.
        let mut started = Vec::new();
        let mut placed_by = BTreeMap::new();
        for start in &outcome.starts {
            let Some(mut job) = st.jobs.edit(start.job) else {
                continue;
            };
            if job.state != JobState::Pending {
                continue;
            }
            let before = job.record().clone();
            if !self.mark_started(&mut job, start) {
                continue;
            }
            // Written with the cycle's other starts, in one batch (`start_commit.rs`).
            job.leave_unwritten();
            placed_by.insert(start.job, &start.placed_by);
            started.push(Started {
                id: start.job,
                before,
            });
        }
        let mut to_launch = Vec::new();
        for id in start_commit::commit(&self.inner.store, &mut st.jobs, started) {
            if let Some(job) = st.jobs.get(id) {
                let by = placed_by.get(&id).map_or("", |p| p.as_str());
                super::job_trace::job_event(id, "started", outcome.cycle_id, &format!("by {by}"));
                to_launch.push(job.clone());
            }
        }
        for ev in &outcome.evictions {
            self.evict(&mut st, ev, outcome.cycle_id);
        }
        if !outcome.evictions.is_empty() {
            self.flush();
        }
        // Effective priority of every admitted job, for display (not persisted each cycle).
        for (id, (tier, score)) in outcome.order.iter().zip(&outcome.priorities) {
            if let Some(mut job) = st.jobs.edit(*id).filter(|j| j.state == JobState::Pending) {
                job.annotate(Annotation::Priority {
                    tier: *tier,
                    score: *score,
                });
            }
        }
        for (id, reason) in &outcome.pending {
            let Some(mut job) = st.jobs.edit(*id) else {
                continue;
            };
            if job.state != JobState::Pending {
                continue;
            }
            // Most reasons are the last cycle's again: only the cycle number changes then
            // (no allocation per pending job under the lock).
            if job.reason.as_ref().is_some_and(|r| {
                r.code == reason.code
                    && r.stage == reason.stage.as_str()
                    && r.message == reason.message
                    && r.plugin == reason.plugin
                    && r.priority_note == reason.priority_note
            }) {
                if job
                    .reason
                    .as_ref()
                    .is_some_and(|r| r.cycle != outcome.cycle_id)
                {
                    job.annotate(Annotation::ReasonCycle(outcome.cycle_id));
                }
                continue;
            }
            let view = ReasonView {
                stage: reason.stage.as_str().to_string(),
                code: reason.code,
                message: reason.message.clone(),
                plugin: reason.plugin.clone(),
                cycle: outcome.cycle_id,
                priority_note: reason.priority_note.clone(),
            };
            // A pending job's reason is recomputed every cycle: kept in memory, written with
            // the record's next transition, never alone. Writing each new reason under the
            // lock made the first cycle over a burst of submits write the whole burst.
            job.annotate(Annotation::Reason(view));
        }
        drop(st);
        // The starts are durable (committed above): launch them off the lock.
        let launched = !to_launch.is_empty();
        for job in to_launch {
            self.launch_started(job);
        }
        if launched {
            self.flush();
        }
    }

    /// Applies a cycle's start to `job` (pending); false if the start was refused.
    fn mark_started(&self, job: &mut JobEdit<'_>, start: &StartDecision) -> bool {
        let now = now_ms();
        let names: Vec<String> = {
            let members = lock(&self.inner.members);
            start
                .tasks
                .iter()
                .map(|a| {
                    members
                        .get(a.node)
                        .map_or_else(String::new, |m| m.info.name.clone())
                })
                .collect()
        };
        let service_port = if job.spec.kind == gantry_contract::JobKind::Service {
            match job.spec.service.as_ref().map_or(0, |s| s.port) {
                0 => job.service_port.or_else(super::task_env::free_port),
                port => Some(port),
            }
        } else {
            job.service_port
        };
        let tasks = start
            .tasks
            .iter()
            .zip(names)
            .map(|(a, node)| TaskRecord {
                node,
                gpus: a
                    .gpus
                    .iter()
                    .map(|g| GpuShareView {
                        index: g.index,
                        milli: g.milli,
                    })
                    .collect(),
                cpu_milli: a.cpu_milli,
                memory_mib: a.memory_mib,
                pid: None,
                exit: None,
                started_ms: Some(now),
                ended_ms: None,
                usage: None,
                gpu_usage: None,
            })
            .collect();
        let run = StartedRun {
            at_ms: now,
            tier: start.tier,
            score: start.score,
            tasks,
            // The rendezvous port is free on this host; a gang whose rank 0 runs on an agent
            // gets one free on that node before launch (`runner_agent.rs`).
            rendezvous_port: super::task_env::free_port(),
            service_port,
        };
        if !job.apply_or_log(Transition::Started(Box::new(run))) {
            return false;
        }
        let placed: Vec<String> = job
            .tasks
            .iter()
            .map(|t| format!("{}:[{}]", t.node, gpu_list(&t.gpus)))
            .collect();
        self.event(
            job.id,
            "started",
            format!(
                "by {} on {} (node:[GPUs] per task)",
                start.placed_by,
                placed.join(" ")
            ),
        );
        true
    }

    /// Signals every launched task of `job` to stop (SIGTERM, then SIGKILL after `grace`).
    pub(crate) fn stop_tasks(&self, job: &JobRecord, grace: Duration) {
        self.stop_tasks_with(job, libc::SIGTERM, grace);
    }

    /// Like [`Scheduler::stop_tasks`], with `first` instead of SIGTERM.
    pub(crate) fn stop_tasks_with(&self, job: &JobRecord, first: i32, grace: Duration) {
        self.signal_running_tasks(job, first, Some(grace));
    }
}
