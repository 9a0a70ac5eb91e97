//! The job archive: the records of jobs that left the scheduler's memory, in the history
//! database (`store/history_db.rs`) with an index per column a list filters on (user,
//! account, queue, state, array, end time). A job moves here from sled when it is evicted
//! ([`Store::archive_job`]); the reads in `store/jobs.rs` look at both places, so a job is
//! found wherever it is, also in the moment a crash left it in both.
//!
//! Owns: the rows, the move, and the archive's half of each job read. Does not own which
//! jobs leave memory (`scheduler::job_table`) or the sled half (`store/jobs.rs`).

use super::history_db::{from_sql_int, sql_int};
use super::{JobIndex, Store, StoreError, decode, encode};
use crate::model::JobRecord;
use rusqlite::{OptionalExtension, params};
use std::collections::VecDeque;

/// Ids read per query by [`ArchivedIds`].
const IDS_PER_READ: usize = 512;

fn column(index: JobIndex) -> &'static str {
    match index {
        JobIndex::User => "user",
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
    pub(super) fn put_archived(&self, jobs: &[&JobRecord]) -> Result<(), StoreError> {
        self.history.with(true, |c| {
            let tx = c.transaction()?;
            {
                let mut put = tx.prepare_cached(
                    "INSERT OR REPLACE INTO jobs \
                     (id, user, account, queue, state, array_id, end_ms, record) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for j in jobs {
                    put.execute(params![
                        sql_int(j.id),
                        j.spec.user,
                        j.spec.account,
                        j.spec.queue,
                        j.state.as_str(),
                        j.array.map(|a| sql_int(a.array_id)),
                        sql_int(j.end_ms.unwrap_or(0)),
                        encode(j),
                    ])?;
                }
            }
            tx.commit()
        })
    }

    /// Job `id` from the archive.
    pub(super) fn archived_job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        let bytes: Option<Vec<u8>> = self.history.with(false, |c| {
            c.prepare_cached("SELECT record FROM jobs WHERE id = ?1")?
                .query_row([sql_int(id)], |r| r.get(0))
                .optional()
        })?;
        bytes.map(|b| decode("archive", &b)).transpose()
    }

    /// Whether the archive holds job `id`.
    pub(super) fn is_archived(&self, id: u64) -> Result<bool, StoreError> {
        self.history.with(false, |c| {
            c.prepare_cached("SELECT 1 FROM jobs WHERE id = ?1")?
                .exists([sql_int(id)])
        })
    }

    /// How many jobs the archive holds.
    pub(super) fn archived_count(&self) -> Result<u64, StoreError> {
        self.history.with(false, |c| {
            c.query_row("SELECT count(*) FROM jobs", [], |r| r.get::<_, i64>(0))
                .map(from_sql_int)
        })
    }

    /// Deletes job `id` from the archive.
    pub(super) fn delete_archived(&self, id: u64) -> Result<(), StoreError> {
        self.history.with(true, |c| {
            c.prepare_cached("DELETE FROM jobs WHERE id = ?1")?
                .execute([sql_int(id)])
                .map(drop)
        })
    }

    /// At most `limit` (end time, id) of archived jobs that ended before `before_ms`, after
    /// (end time, id) `from` (excluded), earliest first.
    pub(super) fn archived_ended_between(
        &self,
        from: (u64, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        self.history.with(false, |c| {
            let mut q = c.prepare_cached(
                "SELECT end_ms, id FROM jobs WHERE (end_ms, id) > (?1, ?2) AND end_ms < ?3 \
                 ORDER BY end_ms, id LIMIT ?4",
            )?;
            let rows = q.query_map(
                params![
                    sql_int(from.0),
                    sql_int(from.1),
                    sql_int(before_ms),
                    sql_int(limit as u64)
                ],
                |r| {
                    Ok((
                        from_sql_int(r.get::<_, i64>(0)?),
                        from_sql_int(r.get::<_, i64>(1)?),
                    ))
                },
            )?;
            rows.collect()
        })
    }

    /// The ids of the archived members of array `array_id`, lowest first.
    pub(super) fn archived_array_members(&self, array_id: u64) -> Result<Vec<u64>, StoreError> {
        self.history.with(false, |c| {
            let mut q = c.prepare_cached("SELECT id FROM jobs WHERE array_id = ?1 ORDER BY id")?;
            let rows = q.query_map([sql_int(array_id)], |r| {
                r.get::<_, i64>(0).map(from_sql_int)
            })?;
            rows.collect()
        })
    }

    /// Archived job ids newest first, of every job or of those `index` names, below
    /// `before`; read a chunk at a time, never holding the connection between chunks.
    pub(super) fn archived_ids_newest_first(
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
pub(super) struct ArchivedIds {
    store: Store,
    index: Option<(&'static str, String)>,
    before: u64,
    buffer: VecDeque<u64>,
    done: bool,
}

impl ArchivedIds {
    fn refill(&mut self) -> Result<(), StoreError> {
        let before = sql_int(self.before);
        let limit = sql_int(IDS_PER_READ as u64);
        let index = self.index.clone();
        let ids: Vec<u64> = self.store.history.with(false, |c| {
            let id = |r: &rusqlite::Row<'_>| r.get::<_, i64>(0).map(from_sql_int);
            match &index {
                None => c
                    .prepare_cached("SELECT id FROM jobs WHERE id < ?1 ORDER BY id DESC LIMIT ?2")?
                    .query_map(params![before, limit], id)?
                    .collect(),
                Some((col, value)) => c
                    // `col` is one of `column`'s fixed names, never user input.
                    .prepare_cached(&format!(
                        "SELECT id FROM jobs WHERE {col} = ?1 AND id < ?2 \
                         ORDER BY id DESC LIMIT ?3"
                    ))?
                    .query_map(params![value, before, limit], id)?
                    .collect(),
            }
        })?;
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
