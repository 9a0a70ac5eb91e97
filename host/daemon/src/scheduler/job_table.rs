//! The job table: the scheduler's jobs in memory and their records in the store. Every
//! read and change of a job goes through its methods; the map itself is private, so how
//! jobs are kept (which stay in memory, which are read back from the store, the indexes)
//! can change behind this one type.
//!
//! Owns: the map of jobs by id, loading it at start, writing a job's record, the queries
//! the scheduler and the API make over jobs (running, unfinished, a user's pending, a
//! list newest first). Does not own what a job's fields mean or when they change (the
//! scheduler's lifecycle, apply, submit), the store's layout (`store`), or flushing (the
//! caller decides when a batch of writes must be durable).

use crate::model::{JobRecord, JobState};
use crate::store::{Store, StoreError};
use std::collections::BTreeMap;

/// The jobs the scheduler knows, by id, with the store that keeps their records.
pub(crate) struct JobTable {
    jobs: BTreeMap<u64, JobRecord>,
}

impl JobTable {
    /// Every job recorded in `store`.
    pub(crate) fn load(store: &Store) -> Result<Self, StoreError> {
        let jobs = store.jobs()?.into_iter().map(|j| (j.id, j)).collect();
        Ok(Self { jobs })
    }

    /// A table of `records`, not read from a store (tests).
    #[cfg(test)]
    pub(crate) fn in_memory(records: impl IntoIterator<Item = JobRecord>) -> Self {
        Self {
            jobs: records.into_iter().map(|j| (j.id, j)).collect(),
        }
    }

    /// Job `id`.
    pub(crate) fn get(&self, id: u64) -> Option<&JobRecord> {
        self.jobs.get(&id)
    }

    /// Job `id`, to change (the caller persists it with [`JobTable::persist`]).
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut JobRecord> {
        self.jobs.get_mut(&id)
    }

    /// Whether `id` names a job, or an array (the id of its first member's array).
    pub(crate) fn names_job_or_array(&self, id: u64) -> bool {
        self.jobs.contains_key(&id)
            || self
                .jobs
                .values()
                .any(|j| j.array.is_some_and(|a| a.array_id == id))
    }

    /// Every job, oldest id first.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &JobRecord> + Clone {
        self.jobs.values()
    }

    /// Every job, to change, oldest id first.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut JobRecord> {
        self.jobs.values_mut()
    }

    /// The running jobs.
    pub(crate) fn running(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values().filter(|j| j.state == JobState::Running)
    }

    /// The running jobs, to change.
    pub(crate) fn running_mut(&mut self) -> impl Iterator<Item = &mut JobRecord> {
        self.jobs
            .values_mut()
            .filter(|j| j.state == JobState::Running)
    }

    /// The jobs not yet ended (pending, held or running).
    pub(crate) fn unfinished(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values().filter(|j| !j.state.is_terminal())
    }

    /// How many jobs of `user` are pending.
    pub(crate) fn pending_of(&self, user: &str) -> u64 {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Pending && j.spec.user == user)
            .count() as u64
    }

    /// At most `limit` jobs that `keep` accepts, newest first.
    pub(crate) fn newest(&self, keep: impl Fn(&JobRecord) -> bool, limit: usize) -> Vec<JobRecord> {
        self.jobs
            .values()
            .rev()
            .filter(|j| keep(j))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Adds jobs whose records are already durable (a submission writes and flushes them
    /// before they join the table, outside its lock).
    pub(crate) fn insert_stored(&mut self, records: &[JobRecord]) {
        for r in records {
            self.jobs.insert(r.id, r.clone());
        }
    }
}

/// Writes `job`'s record to `store` (durable at the next flush); a failure is logged and
/// the job stays as it is in memory. Changes of a job in the table are written through
/// here (`Scheduler::persist`), except where the write's failure must reach the caller:
/// a submission and a cancel (`jobs.rs`) and a start (`start_commit.rs`).
pub(crate) fn write_record(store: &Store, job: &JobRecord) {
    if let Err(e) = store.put_job(job) {
        tracing::error!(job = job.id, "cannot persist job: {e}");
    }
}

/// Tests read a table as they read the map it replaced (`jobs[&id]`, `jobs.values()`).
#[cfg(test)]
impl std::ops::Index<&u64> for JobTable {
    type Output = JobRecord;
    fn index(&self, id: &u64) -> &JobRecord {
        &self.jobs[id]
    }
}

#[cfg(test)]
impl JobTable {
    pub(crate) fn values(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::JobSpec;

    fn job(id: u64, user: &str, state: JobState) -> JobRecord {
        let mut spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        spec.user = user.into();
        let mut j = JobRecord::new(id, spec, id);
        j.state = state;
        j
    }

    #[test]
    fn queries_see_the_jobs_they_name_and_lists_are_newest_first() {
        let t = JobTable::in_memory([
            job(1, "ann", JobState::Pending),
            job(2, "bob", JobState::Running),
            job(3, "ann", JobState::Succeeded),
            job(4, "ann", JobState::Pending),
        ]);
        assert_eq!(t.pending_of("ann"), 2);
        assert_eq!(t.running().map(|j| j.id).collect::<Vec<_>>(), vec![2]);
        assert_eq!(t.unfinished().count(), 3);
        let ann = t.newest(|j| j.spec.user == "ann", 2);
        assert_eq!(ann.iter().map(|j| j.id).collect::<Vec<_>>(), vec![4, 3]);
        assert!(t.names_job_or_array(3) && !t.names_job_or_array(9));
    }

    #[test]
    fn a_persisted_job_is_read_back_by_the_next_load() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut t = JobTable::load(&store).unwrap();
        let j = job(7, "ann", JobState::Pending);
        store.put_job(&j).unwrap();
        t.insert_stored(std::slice::from_ref(&j));
        t.get_mut(7).unwrap().state = JobState::Running;
        write_record(&store, t.get(7).unwrap());
        store.flush().unwrap();
        let again = JobTable::load(&store).unwrap();
        assert_eq!(again.get(7).unwrap().state, JobState::Running);
    }
}
