//! The jobs the scheduler keeps in memory, in two maps: the active ones (pending, held,
//! running), which every cycle, submit and run-loop step walks, and those that ended less
//! than `retention.min_job_age_s` ago, which only lookups and lists read. So an ended job
//! kept for display costs nothing per cycle or per submit.
//!
//! A job is changed in place through [`JobsInMemory::slot_mut`], so this map does not see the
//! moment a job ends: [`JobsInMemory::settle`] (run before each eviction, once per cycle)
//! moves the jobs that ended since to the ended map, and `slot_mut` on an ended job brings it
//! back to the active map first (whatever the caller changes, the next settle puts it where
//! its state says).
//!
//! Each record is shared (`Arc`), copied on write: [`JobsInMemory::shared_active`] hands a
//! cycle the active jobs as they are in time proportional to their number of pointers, so
//! the cycle converts them after the job table's lock is let go; a job changed meanwhile is
//! copied once by its edit (`Arc::make_mut`), the cycle keeping the version it was given.
//!
//! A record's allocation therefore changes whenever the record does while anything else
//! shares or watches it: the snapshot builder's numbering (`job_numbers.rs`) keeps a weak
//! pointer to the version it converted and takes the same allocation as the same record.
//! Every write goes through `Arc::make_mut` (by a `JobEdit`, `job_edit.rs`, the one writer);
//! nothing writes through `Arc::get_mut`.
//!
//! Owns: the two maps and the order of the ended ones by end time. Does not own the store
//! nor the queries over jobs (`job_table`).

use gantry_api::model::{JobRecord, JobState};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct JobsInMemory {
    active: BTreeMap<u64, Arc<JobRecord>>,
    ended: BTreeMap<u64, Arc<JobRecord>>,
    /// (end time, id) of every job in `ended`, oldest end first.
    by_end: BTreeSet<(u64, u64)>,
}

fn end_key(job: &JobRecord) -> (u64, u64) {
    (job.end_ms.unwrap_or(0), job.id)
}

impl JobsInMemory {
    /// Adds or replaces job `job.id`, in the map its state says.
    pub(crate) fn insert(&mut self, job: JobRecord) {
        self.take_from_ended(job.id);
        if job.state.is_terminal() {
            self.active.remove(&job.id);
            self.by_end.insert(end_key(&job));
            self.ended.insert(job.id, Arc::new(job));
        } else {
            self.active.insert(job.id, Arc::new(job));
        }
    }

    pub(crate) fn get(&self, id: u64) -> Option<&JobRecord> {
        self.active
            .get(&id)
            .or_else(|| self.ended.get(&id))
            .map(|j| &**j)
    }

    /// Job `id`'s shared record, to change (`job_edit.rs` copies it on its first write); an
    /// ended one moves back to the active map until the next settle.
    pub(crate) fn slot_mut(&mut self, id: u64) -> Option<&mut Arc<JobRecord>> {
        if let Some(job) = self.take_from_ended(id) {
            self.active.insert(id, job);
        }
        self.active.get_mut(&id)
    }

    pub(crate) fn contains(&self, id: u64) -> bool {
        self.active.contains_key(&id) || self.ended.contains_key(&id)
    }

    /// How many jobs are in memory.
    pub(crate) fn len(&self) -> usize {
        self.active.len() + self.ended.len()
    }

    /// The active jobs, oldest id first (and any that ended since the last settle).
    pub(crate) fn active(&self) -> impl DoubleEndedIterator<Item = &JobRecord> + Clone {
        self.active.values().map(|j| &**j)
    }

    /// The active jobs as they are now, shared: a copy of pointers, not of records.
    pub(crate) fn shared_active(&self) -> Vec<Arc<JobRecord>> {
        self.active.values().cloned().collect()
    }

    /// The running jobs' shared records, to change (each copied on its first write only,
    /// by `job_edit.rs`), so a walk that only reads leaves every record as it was.
    pub(crate) fn running_slots_mut(&mut self) -> impl Iterator<Item = &mut Arc<JobRecord>> {
        self.active
            .values_mut()
            .filter(|j| j.state == JobState::Running)
    }

    /// Every job in memory: the active ones, then the ended ones, each by id.
    pub(crate) fn all(&self) -> impl Iterator<Item = &JobRecord> + Clone {
        self.active
            .values()
            .chain(self.ended.values())
            .map(|j| &**j)
    }

    /// Every job in memory with an id below `before`, newest first.
    pub(crate) fn newest_below(&self, before: u64) -> impl Iterator<Item = &JobRecord> {
        let mut a = self.active.range(..before).rev().peekable();
        let mut e = self.ended.range(..before).rev().peekable();
        std::iter::from_fn(move || match (a.peek(), e.peek()) {
            (Some((ia, _)), Some((ie, _))) if ia > ie => a.next().map(|(_, j)| &**j),
            (Some(_), Some(_)) | (None, Some(_)) => e.next().map(|(_, j)| &**j),
            (Some(_), None) => a.next().map(|(_, j)| &**j),
            (None, None) => None,
        })
    }

    /// The ids of every job in memory.
    pub(crate) fn ids(&self) -> std::collections::HashSet<u64> {
        self.active
            .keys()
            .chain(self.ended.keys())
            .copied()
            .collect()
    }

    /// Moves the jobs that ended since the last settle to the ended map (a walk of the
    /// active jobs).
    pub(crate) fn settle(&mut self) {
        let done: Vec<u64> = self
            .active
            .values()
            .filter(|j| j.state.is_terminal())
            .map(|j| j.id)
            .collect();
        for id in done {
            if let Some(job) = self.active.remove(&id) {
                self.by_end.insert(end_key(&job));
                self.ended.insert(id, job);
            }
        }
    }

    /// The ended jobs whose end is at or before `cutoff_ms`, oldest end first (after a
    /// settle: what ended since is not seen).
    pub(crate) fn ended_by(&self, cutoff_ms: u64) -> Vec<&JobRecord> {
        self.by_end
            .range(..=(cutoff_ms, u64::MAX))
            .filter_map(|(_, id)| self.ended.get(id))
            .map(|j| &**j)
            .collect()
    }

    /// Forgets ended job `id`.
    pub(crate) fn remove_ended(&mut self, id: u64) {
        self.take_from_ended(id);
    }

    fn take_from_ended(&mut self, id: u64) -> Option<Arc<JobRecord>> {
        let job = self.ended.remove(&id)?;
        self.by_end.remove(&end_key(&job));
        Some(job)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_api::model::{JobSpec, JobState};

    fn job(id: u64, state: JobState, end_ms: Option<u64>) -> JobRecord {
        let spec: JobSpec = serde_json::from_str(r#"{"argv": ["true"]}"#).unwrap();
        let mut j = JobRecord::new(id, spec, id);
        j.state = state;
        j.end_ms = end_ms;
        j
    }

    #[test]
    fn ended_jobs_leave_the_active_walk_at_settle_and_come_back_when_changed() {
        let mut m = JobsInMemory::default();
        m.insert(job(1, JobState::Pending, None));
        m.insert(job(2, JobState::Running, None));
        m.insert(job(3, JobState::Succeeded, Some(50)));
        assert_eq!(m.active().map(|j| j.id).collect::<Vec<_>>(), [1, 2]);
        Arc::make_mut(m.slot_mut(2).unwrap()).state = JobState::Failed;
        Arc::make_mut(m.slot_mut(2).unwrap()).end_ms = Some(40);
        assert_eq!(m.active().count(), 2, "not moved before a settle");
        m.settle();
        assert_eq!(m.active().map(|j| j.id).collect::<Vec<_>>(), [1]);
        assert_eq!(m.ended_by(45).iter().map(|j| j.id).collect::<Vec<_>>(), [2]);
        assert_eq!(m.ended_by(60).len(), 2);
        // A change to an ended job (a requeue) brings it back to the walk.
        Arc::make_mut(m.slot_mut(3).unwrap()).state = JobState::Pending;
        m.settle();
        assert_eq!(m.active().map(|j| j.id).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(m.ended_by(u64::MAX).len(), 1);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m.newest_below(u64::MAX).map(|j| j.id).collect::<Vec<_>>(),
            [3, 2, 1]
        );
        assert_eq!(m.newest_below(3).map(|j| j.id).collect::<Vec<_>>(), [2, 1]);
    }
}
