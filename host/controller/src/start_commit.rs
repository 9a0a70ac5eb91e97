//! Making a cycle's starts durable before any of their tasks is launched: every started job
//! is written and the store flushed; only then may its tasks start. A job whose write
//! failed, or every job of the cycle when the flush failed (a full disk: `ENOSPC`), is put
//! back exactly as it was before the start, pending, with a reason naming the failure and
//! the disk, and none of its tasks is launched: a task whose start a crash could forget
//! would run twice. It starts in a later cycle, once the store can record it.
//!
//! Owns: that rule ([`commit`]) and the store operations it needs ([`Durable`], so a test
//! can make them fail). Does not own deciding starts (the engine), marking a job started or
//! launching it (`apply`, `launch`).

use super::job_edit::JobEdit;
use super::job_table::JobTable;
use super::transition::{Transition, host_reason};
use gantry_api::model::JobRecord;
use gantry_contract::ReasonCode;
use gantry_store::{Store, StoreError};

/// The writes a start needs.
pub(crate) trait Durable {
    /// Writes a job's record (not yet durable).
    fn put_job(&self, job: &JobRecord) -> Result<(), StoreError>;
    /// Makes every write so far durable.
    fn flush(&self) -> Result<(), StoreError>;
}

impl Durable for Store {
    fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        Store::put_job(self, job)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Store::flush(self)
    }
}

/// A job this cycle marked started, and its record from before.
pub(crate) struct Started {
    /// The job.
    pub id: u64,
    /// Its record before the start, put back if the start cannot be made durable.
    pub before: JobRecord,
}

/// Writes every started job of `jobs` and flushes; returns the ids whose start is durable,
/// in order. The others are put back as they were before (pending), with the reason.
pub(crate) fn commit(store: &impl Durable, jobs: &mut JobTable, started: Vec<Started>) -> Vec<u64> {
    let mut written = Vec::with_capacity(started.len());
    for s in started {
        let Some(mut job) = jobs.edit(s.id) else {
            continue;
        };
        match store.put_job(job.record()) {
            Ok(()) => written.push(s),
            Err(e) => revert(store, &mut job, s.before, &e),
        }
    }
    if written.is_empty() {
        return Vec::new();
    }
    if let Err(e) = store.flush() {
        for s in written {
            if let Some(mut job) = jobs.edit(s.id) {
                revert(store, &mut job, s.before, &e);
            }
        }
        return Vec::new();
    }
    written.into_iter().map(|s| s.id).collect()
}

/// Puts `job` back as `before`, with a reason naming `e`, and tries to write that back too
/// (so a store that recovers does not keep a start that never launched).
fn revert(store: &impl Durable, job: &mut JobEdit<'_>, before: JobRecord, e: &StoreError) {
    tracing::error!(
        job = job.id,
        "not starting: the start could not be recorded: {e}"
    );
    let reason = host_reason(
        ReasonCode::Other,
        format!(
            "not started: the daemon could not record its start durably ({e}); is the \
             disk of its data_dir full? It starts once the start can be recorded"
        ),
    );
    let undo = Transition::StartUndone {
        before: Box::new(before),
        reason,
    };
    if job.apply_or_log(undo) {
        let _ = store.put_job(job.record());
    }
    // Written above, through `store` (which a test makes fail), or not at all.
    job.leave_unwritten();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::{JobSpec, JobState};
    use std::cell::RefCell;

    /// A store whose writes of some jobs, or whose flush, fail with ENOSPC.
    #[derive(Default)]
    struct Failing {
        refuse_jobs: Vec<u64>,
        refuse_flush: bool,
        written: RefCell<Vec<(u64, JobState)>>,
    }

    fn enospc() -> StoreError {
        StoreError::Sled(sled::Error::Io(std::io::Error::from_raw_os_error(
            libc::ENOSPC,
        )))
    }

    impl Durable for Failing {
        fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
            if self.refuse_jobs.contains(&job.id) {
                return Err(enospc());
            }
            self.written.borrow_mut().push((job.id, job.state));
            Ok(())
        }

        fn flush(&self) -> Result<(), StoreError> {
            if self.refuse_flush {
                return Err(enospc());
            }
            Ok(())
        }
    }

    /// Jobs 1..=n, each marked started; the `Started` entries to commit.
    fn started(n: u64) -> (JobTable, Vec<Started>) {
        let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        let mut jobs = Vec::new();
        let mut list = Vec::new();
        for id in 1..=n {
            let before = JobRecord::new(id, spec.clone(), 0);
            let mut job = before.clone();
            job.state = JobState::Running;
            job.start_ms = Some(1);
            jobs.push(job);
            list.push(Started { id, before });
        }
        (JobTable::in_memory(jobs), list)
    }

    fn assert_put_back(job: &JobRecord) {
        assert_eq!((job.state, job.start_ms), (JobState::Pending, None));
        let message = &job.reason.as_ref().unwrap().message;
        assert!(
            message.contains("No space left on device") && message.contains("disk"),
            "{message}"
        );
    }

    #[test]
    fn durable_starts_are_launched() {
        let (mut jobs, list) = started(2);
        let store = Failing::default();
        assert_eq!(commit(&store, &mut jobs, list), vec![1, 2]);
        assert!(jobs.values().all(|j| j.state == JobState::Running));
    }

    #[test]
    fn a_failed_flush_launches_nothing_and_puts_every_job_back_pending() {
        let (mut jobs, list) = started(3);
        let store = Failing {
            refuse_flush: true,
            ..Failing::default()
        };
        assert!(commit(&store, &mut jobs, list).is_empty());
        jobs.values().for_each(assert_put_back);
        // The put-back records were written after the failed starts.
        let written = store.written.borrow();
        assert_eq!(written.last(), Some(&(3, JobState::Pending)));
    }

    #[test]
    fn a_failed_write_puts_back_only_that_job() {
        let (mut jobs, list) = started(3);
        let store = Failing {
            refuse_jobs: vec![2],
            ..Failing::default()
        };
        assert_eq!(commit(&store, &mut jobs, list), vec![1, 3]);
        assert_put_back(&jobs[&2]);
        assert_eq!(jobs[&1].state, JobState::Running);
    }
}
