//! The job table: the scheduler's active jobs in memory (`jobs_in_memory`: ended ones kept
//! apart, out of every cycle's and submit's walk), and every job's record in the store. A job stays in memory while it is pending or running and for
//! `retention.min_job_age_s` after it ended; then it leaves memory and is read back from
//! the store's history when asked for. Every read and change of a job goes through these
//! methods; the map is private.
//!
//! Owns: the map of jobs in memory, loading the active ones at start, evicting ended ones
//! (their archive write), opening a job to be changed (`job_edit.rs` writes it), and the queries the scheduler and the API make over jobs
//! (running, unfinished, a user's pending, one job from memory or history, a page of a
//! filtered list newest first). Does not own what a job's fields mean or when they change
//! (the scheduler's lifecycle, apply, submit), the store's layout and indexes (`store`),
//! or flushing (the caller decides when a batch of writes must be durable).

use super::job_edit::JobEdit;
use super::jobs_in_memory::JobsInMemory;
use gantry_api::model::{JobRecord, JobState};
use gantry_store::{JobIndex, Store, StoreError};
use std::borrow::Cow;

/// Most stored records one list request examines before it answers with what it found and
/// a cursor to go on from (so a filter that matches little cannot scan years of history
/// in one request).
pub(crate) const MAX_EXAMINED: usize = 100_000;

/// Which jobs a list returns; every set field must match.
#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    /// Only this state.
    pub state: Option<JobState>,
    /// Only this user.
    pub user: Option<String>,
    /// Only this account.
    pub account: Option<String>,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only jobs submitted at or after this time (ms since the Unix epoch).
    pub since_ms: Option<u64>,
    /// Only jobs submitted before this time.
    pub until_ms: Option<u64>,
    /// Only jobs with ids below this one (the cursor of the previous page).
    pub after: Option<u64>,
}

impl JobQuery {
    fn matches(&self, j: &JobRecord) -> bool {
        self.state.is_none_or(|s| j.state == s)
            && self.user.as_ref().is_none_or(|u| &j.spec.user == u)
            && self.account.as_ref().is_none_or(|a| &j.spec.account == a)
            && self.queue.as_ref().is_none_or(|q| &j.spec.queue == q)
            && self.since_ms.is_none_or(|t| j.submit_ms >= t)
            && self.until_ms.is_none_or(|t| j.submit_ms < t)
    }

    /// The most selective index the query can be served from.
    fn index(&self) -> Option<(JobIndex, &str)> {
        fn by(i: JobIndex, v: &Option<String>) -> Option<(JobIndex, &str)> {
            v.as_deref().map(|v| (i, v))
        }
        by(JobIndex::User, &self.user)
            .or_else(|| by(JobIndex::Account, &self.account))
            .or_else(|| by(JobIndex::Queue, &self.queue))
            .or_else(|| self.state.map(|s| (JobIndex::State, s.as_str())))
    }
}

/// One page of a job list.
#[derive(Debug, Default)]
pub struct JobPage {
    /// The jobs, newest first.
    pub jobs: Vec<JobRecord>,
    /// Where the next page starts (`after`), when there may be more.
    pub next_after: Option<u64>,
}

/// A list's view of memory ([`JobTable::list_snapshot`]), to merge with history.
pub(crate) struct ListSnapshot {
    memory: Vec<JobRecord>,
    in_memory: std::collections::HashSet<u64>,
    store: Store,
}

impl ListSnapshot {
    /// At most `limit` jobs that `q` selects, newest first: those of memory as they were
    /// when the snapshot was taken, those of history read from the store through the most
    /// selective index `q` has.
    pub(crate) fn page(self, q: &JobQuery, limit: usize) -> Result<JobPage, StoreError> {
        let mut memory = self.memory.into_iter().peekable();
        let in_memory = self.in_memory;
        // Every pending or running job is in memory: a list of those reads no history.
        let active_only = q.state.is_some_and(|s| !s.is_terminal());
        let mut stored = self
            .store
            .ids_newest_first(q.index(), q.after)
            .take(if active_only { 0 } else { usize::MAX })
            .filter(|id| !in_memory.contains(id))
            .peekable();
        let mut page = JobPage::default();
        let mut examined = 0usize;
        while page.jobs.len() < limit {
            let take_memory = match (memory.peek(), stored.peek()) {
                (None, None) => return Ok(page_end(page)),
                (Some(m), Some(s)) => m.id > *s,
                (m, _) => m.is_some(),
            };
            if take_memory {
                if let Some(j) = memory.next() {
                    page.next_after = Some(j.id);
                    page.jobs.push(j);
                }
                continue;
            }
            let Some(id) = stored.next() else { continue };
            page.next_after = Some(id);
            examined += 1;
            let Some(j) = self.store.job(id)? else {
                continue;
            };
            // Ids grow with submission time: below `since` nothing older can match.
            if q.since_ms.is_some_and(|t| j.submit_ms < t) && memory.peek().is_none() {
                return Ok(page_end(page));
            }
            if q.matches(&j) {
                page.jobs.push(j);
            }
            if examined >= MAX_EXAMINED {
                return Ok(page);
            }
        }
        if memory.peek().is_none() && stored.peek().is_none() {
            page.next_after = None;
        }
        Ok(page)
    }
}

/// A page after which nothing more matches.
fn page_end(mut page: JobPage) -> JobPage {
    page.next_after = None;
    page
}

/// The jobs the scheduler keeps in memory, by id, and the store that keeps every record.
pub(crate) struct JobTable {
    jobs: JobsInMemory,
    store: Store,
}

impl JobTable {
    /// The active jobs in `store`, and those that ended within `min_age_ms` of `now_ms`.
    pub(crate) fn load(store: &Store, now_ms: u64, min_age_ms: u64) -> Result<Self, StoreError> {
        let mut jobs = JobsInMemory::default();
        for j in store.active_jobs()? {
            jobs.insert(j);
        }
        let cutoff = now_ms.saturating_sub(min_age_ms);
        for j in store.ended_since(cutoff)? {
            jobs.insert(j);
        }
        // What sled holds beyond that (a crash between an eviction's two writes, or a
        // database older than the archive) goes to the archive now.
        store.archive_ended_before(cutoff)?;
        Ok(Self {
            jobs,
            store: store.clone(),
        })
    }

    /// A table of `records` in memory over a temporary store (tests).
    #[cfg(test)]
    pub(crate) fn in_memory(records: impl IntoIterator<Item = JobRecord>) -> Self {
        let mut jobs = JobsInMemory::default();
        for j in records {
            jobs.insert(j);
        }
        Self {
            jobs,
            store: Store::temporary().unwrap_or_else(|e| panic!("temporary store: {e}")),
        }
    }

    /// Job `id`, if it is in memory (active or recently ended).
    pub(crate) fn get(&self, id: u64) -> Option<&JobRecord> {
        self.jobs.get(id)
    }

    /// Job `id` in memory, opened to be changed by transitions and annotations; written when
    /// the edit is dropped (`job_edit.rs`, the one writer).
    pub(crate) fn edit(&mut self, id: u64) -> Option<JobEdit<'_>> {
        let store = &self.store;
        self.jobs
            .slot_mut(id)
            .map(|record| JobEdit::new(record, store))
    }

    /// Job `id` from memory, else from history.
    pub(crate) fn find(&self, id: u64) -> Result<Option<Cow<'_, JobRecord>>, StoreError> {
        if let Some(j) = self.jobs.get(id) {
            return Ok(Some(Cow::Borrowed(j)));
        }
        Ok(self.store.job(id)?.map(Cow::Owned))
    }

    /// Whether `id` names a job, or an array (the id of its first member's array), in
    /// memory or in history.
    pub(crate) fn names_job_or_array(&self, id: u64) -> Result<bool, StoreError> {
        Ok(self.jobs.contains(id)
            || self
                .jobs
                .all()
                .any(|j| j.array.is_some_and(|a| a.array_id == id))
            || self.store.has_job(id)?
            || !self.store.array_member_ids(id)?.is_empty())
    }

    /// What a dependency on `id` waits for: every member of the array `id`, or job `id`,
    /// from memory or history.
    pub(crate) fn dependency_targets(
        &self,
        id: u64,
    ) -> Result<Vec<Cow<'_, JobRecord>>, StoreError> {
        let mut ids: std::collections::BTreeSet<u64> =
            self.store.array_member_ids(id)?.into_iter().collect();
        ids.extend(
            self.jobs
                .all()
                .filter(|j| j.array.is_some_and(|a| a.array_id == id))
                .map(|j| j.id),
        );
        if ids.is_empty() {
            ids.insert(id);
        }
        let mut out = Vec::with_capacity(ids.len());
        for i in ids {
            out.extend(self.find(i)?);
        }
        Ok(out)
    }

    /// Every job in memory: the active ones, then those ended not long ago (a walk that
    /// grows with `retention.min_job_age_s`: for views, not for cycles or submits).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &JobRecord> + Clone {
        self.jobs.all()
    }

    /// The active jobs (pending, held, running; and any that ended since the last
    /// eviction), oldest id first: what a cycle or a submit walks.
    pub(crate) fn active(&self) -> impl DoubleEndedIterator<Item = &JobRecord> + Clone {
        self.jobs.active()
    }

    /// The active jobs as they are now, shared (copied on write): what a cycle converts
    /// after the lock is let go, taken in time proportional to their number of pointers.
    pub(crate) fn shared_active(&self) -> Vec<std::sync::Arc<JobRecord>> {
        self.jobs.shared_active()
    }

    /// How many jobs are in memory.
    pub(crate) fn len(&self) -> usize {
        self.jobs.len()
    }

    /// The running jobs.
    pub(crate) fn running(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.active().filter(|j| j.state == JobState::Running)
    }

    /// The running jobs, each opened to be changed as [`JobTable::edit`] opens one (copied on
    /// its first change only, written when its edit is dropped).
    pub(crate) fn edit_running(&mut self) -> impl Iterator<Item = JobEdit<'_>> {
        let store = &self.store;
        self.jobs
            .running_slots_mut()
            .map(move |record| JobEdit::new(record, store))
    }

    /// The jobs not yet ended (pending, held or running).
    pub(crate) fn unfinished(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.active().filter(|j| !j.state.is_terminal())
    }

    /// How many jobs of `user` are pending.
    pub(crate) fn pending_of(&self, user: &str) -> u64 {
        self.jobs
            .active()
            .filter(|j| j.state == JobState::Pending && j.spec.user == user)
            .count() as u64
    }

    /// What a list needs from memory, taken under the scheduler's lock: the jobs in
    /// memory that `q` selects (at most `limit`) and the ids of every job in memory. The
    /// page is then read with [`ListSnapshot::page`] after the lock is released, so a list
    /// that reads history never holds up a cycle.
    pub(crate) fn list_snapshot(&self, q: &JobQuery, limit: usize) -> ListSnapshot {
        let before = q.after.unwrap_or(u64::MAX);
        ListSnapshot {
            memory: self
                .jobs
                .newest_below(before)
                .filter(|j| q.matches(j))
                // One more than a page, so the page knows whether more follow.
                .take(limit.saturating_add(1))
                .cloned()
                .collect(),
            in_memory: self.jobs.ids(),
            store: self.store.clone(),
        }
    }

    /// The store that holds the history (to read it without the scheduler's lock).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Adds jobs whose records are already durable (a submission writes and flushes them
    /// before they join the table, outside its lock).
    pub(crate) fn insert_stored(&mut self, records: &[JobRecord]) {
        for r in records {
            self.jobs.insert(r.clone());
        }
    }

    /// Takes out of memory the jobs that ended at least `min_age_ms` before `now_ms`,
    /// moving their records from sled to the store's archive; returns their ids.
    pub(crate) fn evict_ended(&mut self, now_ms: u64, min_age_ms: u64) -> Vec<u64> {
        self.jobs.settle();
        let due = self.jobs.ended_by(now_ms.saturating_sub(min_age_ms));
        if due.is_empty() {
            return Vec::new();
        }
        // One transaction for the lot: eviction runs under the scheduler's lock.
        if let Err(e) = self.store.archive_jobs(&due) {
            tracing::error!(
                jobs = due.len(),
                "cannot write ended jobs to history; kept in memory: {e}"
            );
            return Vec::new();
        }
        let gone: Vec<u64> = due.iter().map(|j| j.id).collect();
        for id in &gone {
            self.jobs.remove_ended(*id);
        }
        gone
    }
}

/// Tests read a table as they read the map it replaced (`jobs[&id]`, `jobs.values()`).
#[cfg(test)]
impl std::ops::Index<&u64> for JobTable {
    type Output = JobRecord;
    fn index(&self, id: &u64) -> &JobRecord {
        self.jobs
            .get(*id)
            .unwrap_or_else(|| panic!("job {id} is not in memory"))
    }
}

#[cfg(test)]
impl JobTable {
    pub(crate) fn values(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.all()
    }
}

#[cfg(test)]
#[path = "job_table_tests.rs"]
mod tests;
