//! The event log and what a job leaves behind besides its record, in the history database
//! (`store/history_db.rs`): events in the order they happened with an index by job, the
//! decisions logged about a job (kept when it leaves memory), and the deletes retention
//! makes in bounded batches (old events, a job's events and decisions, old accounting
//! records).
//!
//! Owns: these rows and deletes. Does not own when anything is deleted or how old is too
//! old (`scheduler::retention`), or the job records (`store/jobs.rs`, `store/archive.rs`).

use super::history_db::{from_sql_int, sql_int};
use super::{Event, Store, StoreError, decode, encode};
use rusqlite::{OptionalExtension, params};

fn event_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        seq: from_sql_int(r.get(0)?),
        at_ms: from_sql_int(r.get(1)?),
        job: r.get::<_, Option<i64>>(2)?.map(from_sql_int),
        kind: r.get(3)?,
        message: r.get(4)?,
    })
}

impl Store {
    /// Appends to the event log.
    pub fn event(
        &self,
        at_ms: u64,
        job: Option<u64>,
        kind: &str,
        message: String,
    ) -> Result<(), StoreError> {
        self.history.with(true, |c| {
            c.prepare_cached(
                "INSERT INTO events (at_ms, job, kind, message) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![sql_int(at_ms), job.map(sql_int), kind, message])
            .map(drop)
        })
    }

    /// The last `limit` events, of one job or of all, oldest first. A job's are read
    /// through its index, so the cost does not grow with the log.
    pub fn events(&self, job: Option<u64>, limit: usize) -> Result<Vec<Event>, StoreError> {
        let limit = sql_int(limit as u64);
        let mut out: Vec<Event> = self.history.with(false, |c| match job {
            None => c
                .prepare_cached(
                    "SELECT seq, at_ms, job, kind, message FROM events ORDER BY seq DESC LIMIT ?1",
                )?
                .query_map([limit], event_row)?
                .collect(),
            Some(job) => c
                .prepare_cached(
                    "SELECT seq, at_ms, job, kind, message FROM events WHERE job = ?1 \
                     ORDER BY seq DESC LIMIT ?2",
                )?
                .query_map([sql_int(job), limit], event_row)?
                .collect(),
        })?;
        out.reverse();
        Ok(out)
    }

    /// The last `limit` events of `kind` about no job whose message begins with `prefix`
    /// (a replicated service's: `service N: `), oldest first.
    pub fn kind_events(
        &self,
        kind: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let limit = sql_int(limit as u64);
        let pattern = format!("{}%", prefix.replace(['%', '_'], ""));
        let mut out: Vec<Event> = self.history.with(false, |c| {
            c.prepare_cached(
                "SELECT seq, at_ms, job, kind, message FROM events \
                 WHERE job IS NULL AND kind = ?1 AND message LIKE ?2 ORDER BY seq DESC LIMIT ?3",
            )?
            .query_map(params![kind, pattern, limit], event_row)?
            .collect()
        })?;
        out.reverse();
        Ok(out)
    }

    /// Deletes at most `limit` of the oldest events, stopping at the first that happened
    /// at or after `before_ms`; returns how many.
    pub fn delete_events_before(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        self.history.with(true, |c| {
            let oldest: Vec<(i64, i64)> = c
                .prepare_cached("SELECT seq, at_ms FROM events ORDER BY seq LIMIT ?1")?
                .query_map([sql_int(limit as u64)], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let due = oldest
                .iter()
                .take_while(|(_, at)| from_sql_int(*at) < before_ms)
                .count();
            let Some(&(last, _)) = due.checked_sub(1).and_then(|i| oldest.get(i)) else {
                return Ok(0);
            };
            c.prepare_cached("DELETE FROM events WHERE seq <= ?1")?
                .execute([last])
        })
    }

    /// Deletes job `job`'s events and archived decisions.
    pub fn delete_job_history(&self, job: u64) -> Result<(), StoreError> {
        self.history.with(true, |c| {
            let tx = c.transaction()?;
            tx.prepare_cached("DELETE FROM events WHERE job = ?1")?
                .execute([sql_int(job)])?;
            tx.prepare_cached("DELETE FROM decisions WHERE job = ?1")?
                .execute([sql_int(job)])?;
            tx.commit()
        })
    }

    /// Keeps the decisions logged about `job` (a JSON array) when it leaves memory.
    pub fn put_job_decisions(
        &self,
        job: u64,
        decisions: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.history.with(true, |c| {
            c.prepare_cached("INSERT OR REPLACE INTO decisions (job, value) VALUES (?1, ?2)")?
                .execute(params![sql_int(job), encode(decisions)])
                .map(drop)
        })
    }

    /// The decisions kept about `job`, if it left memory with some.
    pub fn job_decisions(&self, job: u64) -> Result<Option<serde_json::Value>, StoreError> {
        let bytes: Option<Vec<u8>> = self.history.with(false, |c| {
            c.prepare_cached("SELECT value FROM decisions WHERE job = ?1")?
                .query_row([sql_int(job)], |r| r.get(0))
                .optional()
        })?;
        bytes.map(|b| decode("decisions", &b)).transpose()
    }

    /// Deletes at most `limit` accounting records of processes that ended before
    /// `before_ms`, earliest first; returns how many.
    pub fn delete_accounting_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        self.history.with(true, |c| {
            c.prepare_cached(
                "DELETE FROM accounting WHERE seq IN (SELECT seq FROM accounting \
                 WHERE end_ms < ?1 ORDER BY end_ms, seq LIMIT ?2)",
            )?
            .execute([sql_int(before_ms), sql_int(limit as u64)])
        })
    }

    /// Gives the space deleted history freed back to the file system; returns the bytes.
    pub fn release_free_space(&self) -> Result<u64, StoreError> {
        self.history.release_free_pages()
    }
}
