//! The one writer of job records. Code that changes a job asks the job table for a
//! [`JobEdit`] (`JobTable::edit`, `JobTable::edit_running`), reads the record through it,
//! and changes it only by a typed [`Transition`] (`transition.rs` checks and applies it) or an
//! [`Annotation`] (what a cycle or a launch learns that is not lifecycle: a pending reason, a
//! priority, a port, a service's health). The edit writes the record to the store once, when it
//! is dropped, still under the job table's lock, if anything durable changed — so records
//! reach the store in the order their changes were made (a snapshot written after the lock
//! was let go could land after a newer one and replace it). An operation whose caller must
//! see the write fail (a cancel, an update) ends with [`JobEdit::write`] instead.
//!
//! The record is shared with cycles in flight (`jobs_in_memory.rs`: copied on write), so an
//! edit copies it on its first change only: a walk that only reads copies nothing.
//!
//! Owns: the only `&mut JobRecord` of the daemon outside tests, and the only writes of job
//! records to the store (with `start_commit.rs`, which writes a cycle's starts as one batch
//! before any is launched, and `job_table.rs`, which archives ended ones and writes new
//! submissions). Does not own deciding a transition (`apply`, `lifecycle`, `adopt`,
//! `node_down`, `launch`, `service`, `job_control`, `holds`), nor its effects outside the
//! record (signals, launches, scratch directories, events, accounting), which the deciding
//! caller performs, nor flushing (the caller decides when a batch must be durable).
//!
//! The guard test `only_the_writer_changes_or_stores_a_job` (`job_edit_tests.rs`) fails when
//! a file outside these three writes a record or reaches for one to change.

use super::transition::{self, IllegalTransition, Transition};
use gantry_api::model::{JobRecord, ReasonView, ServiceHealth};
use gantry_store::{Store, StoreError};
use std::sync::Arc;

/// What is learnt about a job that is not a change of its lifecycle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Annotation {
    /// Why a pending job waits (a cycle's, a hold's or a pull's reason). Kept in memory and
    /// written with the record's next durable change: a cycle recomputes it every time.
    Reason(ReasonView),
    /// The cycle's reason is the one the job has already: only its cycle number moves.
    ReasonCycle(u64),
    /// A pending job's effective priority, for display (not written on its own).
    Priority { tier: i32, score: f64 },
    /// The ports rank 0's node chose for a run (written).
    Ports {
        rendezvous: Option<u16>,
        service: Option<u16>,
    },
    /// A service's port, moved because its old one was taken (written).
    ServicePort(u16),
    /// Who asked for the job's cancel (written).
    CancelledBy(String),
    /// A GPU use sample of task `task` (in memory; written with the record's next durable
    /// change, `gpu_usage.rs`). `max_gap_ms` caps the time it accounts for.
    GpuSample {
        task: usize,
        sample: gantry_api::gpu_usage::TaskSample,
        max_gap_ms: u64,
    },
}

impl Annotation {
    /// Whether the record must be written for this annotation to survive a restart.
    fn durable(&self) -> bool {
        matches!(
            self,
            Annotation::Ports { .. } | Annotation::ServicePort(_) | Annotation::CancelledBy(_)
        )
    }
}

/// One job of the table, opened to be changed (see the module header).
pub(crate) struct JobEdit<'a> {
    record: &'a mut Arc<JobRecord>,
    store: &'a Store,
    /// A durable change not yet written.
    unwritten: bool,
}

impl std::ops::Deref for JobEdit<'_> {
    type Target = JobRecord;
    fn deref(&self) -> &JobRecord {
        self.record
    }
}

impl<'a> JobEdit<'a> {
    pub(super) fn new(record: &'a mut Arc<JobRecord>, store: &'a Store) -> Self {
        Self {
            record,
            store,
            unwritten: false,
        }
    }

    /// The record as it is now.
    pub(crate) fn record(&self) -> &JobRecord {
        self.record
    }

    /// Applies `t`, or refuses it (the record unchanged) when the job's state does not allow it.
    pub(crate) fn apply(&mut self, t: Transition) -> Result<(), IllegalTransition> {
        transition::apply(Arc::make_mut(self.record), t)?;
        self.unwritten = true;
        Ok(())
    }

    /// [`JobEdit::apply`], logging a refusal (a bug: callers check the state first);
    /// whether `t` was applied.
    pub(crate) fn apply_or_log(&mut self, t: Transition) -> bool {
        match self.apply(t) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("{e}");
                false
            }
        }
    }

    /// Records `a` (see [`Annotation`] for which are written).
    pub(crate) fn annotate(&mut self, a: Annotation) {
        if a.durable() {
            self.unwritten = true;
        }
        let job = Arc::make_mut(self.record);
        match a {
            Annotation::Reason(reason) => job.reason = Some(reason),
            Annotation::ReasonCycle(cycle) => {
                if let Some(r) = job.reason.as_mut() {
                    r.cycle = cycle;
                }
            }
            Annotation::Priority { tier, score } => {
                job.tier = tier;
                job.score = score;
            }
            Annotation::Ports {
                rendezvous,
                service,
            } => {
                job.rendezvous_port = rendezvous;
                job.service_port = service;
            }
            Annotation::ServicePort(port) => job.service_port = Some(port),
            Annotation::CancelledBy(by) => job.cancelled_by = Some(by),
            Annotation::GpuSample {
                task,
                sample,
                max_gap_ms,
            } => {
                if let Some(t) = job.tasks.get_mut(task) {
                    t.gpu_usage
                        .get_or_insert_with(Default::default)
                        .add(&sample, max_gap_ms);
                }
            }
        }
    }

    /// A service's health, created when missing: what its checker and its restarts learn
    /// (not lifecycle). Written with the edit's next durable change, or by
    /// [`JobEdit::save`] when the caller says the change must last.
    pub(crate) fn service_health_mut(&mut self) -> &mut ServiceHealth {
        let job = Arc::make_mut(self.record);
        let checked = job
            .spec
            .service
            .as_ref()
            .is_some_and(|s| s.health.is_some());
        job.health
            .get_or_insert_with(|| ServiceHealth::new(checked))
    }

    /// Writes the record when this edit ends even if nothing durable changed through it (a
    /// service's health that moved, `service/checker.rs`).
    pub(crate) fn save(&mut self) {
        self.unwritten = true;
    }

    /// Leaves what changed unwritten by this edit: the caller writes it with others in one
    /// batch (a cycle's starts, `start_commit.rs`).
    pub(super) fn leave_unwritten(&mut self) {
        self.unwritten = false;
    }

    /// Writes the record now and says whether the store took it (the caller answers with the
    /// error); nothing is written again on drop.
    pub(crate) fn write(mut self) -> Result<(), StoreError> {
        self.unwritten = false;
        self.store.put_job(self.record)
    }

    /// Writes the record now, as the drop would, and keeps the edit open.
    pub(super) fn write_or_log(&mut self) {
        if std::mem::take(&mut self.unwritten) {
            write_record(self.store, self.record);
        }
    }
}

impl Drop for JobEdit<'_> {
    fn drop(&mut self) {
        self.write_or_log();
    }
}

/// Writes `job`'s record to `store` (durable at the next flush); a failure is logged and
/// the job stays as it is in memory.
pub(super) fn write_record(store: &Store, job: &JobRecord) {
    if let Err(e) = store.put_job(job) {
        tracing::error!(job = job.id, "cannot persist job: {e}");
    }
}

/// Applies `t` to a record not yet in the table nor in the store (a submission's hold);
/// whether it was applied. Its first write is [`write_new`].
pub(crate) fn apply_to_new(record: &mut JobRecord, t: Transition) -> bool {
    transition::apply_or_log(record, t)
}

/// Writes a new job's record (a submission, before it joins the table and outside its
/// lock); the caller answers with the error and adds nothing when it fails.
pub(crate) fn write_new(store: &Store, record: &JobRecord) -> Result<(), StoreError> {
    store.put_new_job(record)
}

#[cfg(test)]
#[path = "job_edit_tests.rs"]
mod tests;
