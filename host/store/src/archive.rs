//! The job archive: the records of jobs that left the scheduler's memory, in the history
//! database (`store/history_db.rs`) with an index per column a list filters on (user,
//! account, queue, state, array, end time). A job moves here from sled when it is evicted
//! ([`Store::archive_job`]); the reads in `store/jobs.rs` look at both places, so a job is
//! found wherever it is, also in the moment a crash left it in both.
//!
//! Owns: the rows, the move, and the archive's half of each job read. Does not own which
//! jobs leave memory (`scheduler::job_table`) or the sled half (`store/jobs.rs`).

use crate::sql::{Statement, int};
use crate::{JobIndex, Store, StoreError, decode, encode};
use gantry_api::model::JobRecord;
use std::collections::VecDeque;

/// Ids read per query by [`ArchivedIds`].
const IDS_PER_READ: usize = 512;

fn column(index: JobIndex) -> &'static str {
    match index {
        JobIndex::User => "\"user\"",
        JobIndex::Account => "account",
        JobIndex::Queue => "queue",
        JobIndex::State => "state",
    }
}

impl Store {
    /// Moves job `job` (ended, leaving memory) from sled to the archive: written there
    /// first, then deleted from sled, so a crash between the two leaves it in both (the
    /// next start archives it again) and never in neither.
    pub fn archive_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        self.archive_jobs(&[job])
    }

    /// As [`Store::archive_job`] for several jobs, written to the archive in one transaction.
    pub fn archive_jobs(&self, jobs: &[&JobRecord]) -> Result<(), StoreError> {
        self.put_archived(jobs)?;
        for j in jobs {
            self.delete_live_job(j.id)?;
        }
        Ok(())
    }

    /// Writes `jobs` to the archive in one transaction (replacing what it had of them).
    pub(crate) fn put_archived(&self, jobs: &[&JobRecord]) -> Result<(), StoreError> {
        let statements = jobs
            .iter()
            .map(|j| {
                Statement::new(
                    "INSERT INTO jobs (id, \"user\", account, queue, state, array_id, end_ms, record) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (id) DO UPDATE SET \
                     \"user\" = excluded.\"user\", account = excluded.account, \
                     queue = excluded.queue, state = excluded.state, \
                     array_id = excluded.array_id, end_ms = excluded.end_ms, \
                     record = excluded.record",
                    vec![
                        int(j.id),
                        j.spec.user.clone().into(),
                        j.spec.account.clone().into(),
                        j.spec.queue.clone().into(),
                        j.state.as_str().into(),
                        j.array.map(|a| int(a.array_id)).into(),
                        int(j.end_ms.unwrap_or(0)),
                        encode(j).into(),
                    ],
                )
            })
            .collect();
        self.history.write(statements)?;
        Ok(())
    }

    /// Job `id` from the archive.
    pub(crate) fn archived_job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        let rows = self.history.read(Statement::new(
            "SELECT record FROM jobs WHERE id = ?1",
            vec![int(id)],
        ))?;
        rows.first()
            .map(|r| decode("archive", r.bytes(0)?))
            .transpose()
    }

    /// Whether the archive holds job `id`.
    pub(crate) fn is_archived(&self, id: u64) -> Result<bool, StoreError> {
        let rows = self.history.read(Statement::new(
            "SELECT id FROM jobs WHERE id = ?1",
            vec![int(id)],
        ))?;
        Ok(!rows.is_empty())
    }

    /// How many jobs the archive holds.
    pub(crate) fn archived_count(&self) -> Result<u64, StoreError> {
        let rows = self
            .history
            .read(Statement::new("SELECT count(*) FROM jobs", vec![]))?;
        rows.first().map_or(Ok(0), |r| r.uint(0))
    }

    /// Deletes job `id` from the archive.
    pub(crate) fn delete_archived(&self, id: u64) -> Result<(), StoreError> {
        self.history.write(vec![Statement::new(
            "DELETE FROM jobs WHERE id = ?1",
            vec![int(id)],
        )])?;
        Ok(())
    }

    /// At most `limit` (end time, id) of archived jobs that ended before `before_ms`, after
    /// (end time, id) `from` (excluded), earliest first.
    pub(crate) fn archived_ended_between(
        &self,
        from: (u64, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        let rows = self.history.read(Statement::new(
            "SELECT end_ms, id FROM jobs WHERE (end_ms, id) > (?1, ?2) AND end_ms < ?3 \
             ORDER BY end_ms, id LIMIT ?4",
            vec![int(from.0), int(from.1), int(before_ms), int(limit as u64)],
        ))?;
        rows.iter().map(|r| Ok((r.uint(0)?, r.uint(1)?))).collect()
    }

    /// The ids of the archived members of array `array_id`, lowest first.
    pub(crate) fn archived_array_members(&self, array_id: u64) -> Result<Vec<u64>, StoreError> {
        let rows = self.history.read(Statement::new(
            "SELECT id FROM jobs WHERE array_id = ?1 ORDER BY id",
            vec![int(array_id)],
        ))?;
        rows.iter().map(|r| r.uint(0)).collect()
    }

    /// Archived job ids newest first, of every job or of those `index` names, below
    /// `before`; read a chunk at a time, never holding the connection between chunks.
    pub(crate) fn archived_ids_newest_first(
        &self,
        index: Option<(JobIndex, &str)>,
        before: u64,
    ) -> ArchivedIds {
        ArchivedIds {
            store: self.clone(),
            index: index.map(|(i, v)| (column(i), v.to_owned())),
            before,
            buffer: VecDeque::new(),
            done: false,
        }
    }
}

/// A lazy walk of archived ids, newest first ([`Store::archived_ids_newest_first`]). A
/// failed read ends the walk (logged): a list then shows what it had.
pub(crate) struct ArchivedIds {
    store: Store,
    index: Option<(&'static str, String)>,
    before: u64,
    buffer: VecDeque<u64>,
    done: bool,
}

impl ArchivedIds {
    fn refill(&mut self) -> Result<(), StoreError> {
        let (before, limit) = (int(self.before), int(IDS_PER_READ as u64));
        let statement = match &self.index {
            None => Statement::new(
                "SELECT id FROM jobs WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
                vec![before, limit],
            ),
            // `col` is one of `column`'s fixed names, never user input.
            Some((col, value)) => Statement::new(
                format!(
                    "SELECT id FROM jobs WHERE {col} = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
                ),
                vec![value.clone().into(), before, limit],
            ),
        };
        let ids = self
            .store
            .history
            .read(statement)?
            .iter()
            .map(|r| r.uint(0))
            .collect::<Result<Vec<u64>, _>>()?;
        self.done = ids.len() < IDS_PER_READ;
        if let Some(&last) = ids.last() {
            self.before = last;
        }
        self.buffer.extend(ids);
        Ok(())
    }
}

impl Iterator for ArchivedIds {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.buffer.is_empty()
            && !self.done
            && let Err(e) = self.refill()
        {
            tracing::error!("cannot read the job archive: {e}");
            self.done = true;
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
