//! The event log and what a job leaves behind besides its record, in the history database
//! (`store/history_db.rs`): events in the order they happened with an index by job, the
//! decisions logged about a job (kept when it leaves memory), and the deletes retention
//! makes in bounded batches (old events, a job's events and decisions, old accounting
//! records).
//!
//! Owns: these rows and deletes. Does not own when anything is deleted or how old is too
//! old (`scheduler::retention`), or the job records (`store/jobs.rs`, `store/archive.rs`).

use crate::sql::{Row, SqlValue, Statement, int};
use crate::{Event, Store, StoreError, decode, encode};

const EVENT_COLUMNS: &str = "SELECT seq, at_ms, job, kind, message FROM events";

fn event_row(r: &Row) -> Result<Event, StoreError> {
    Ok(Event {
        seq: r.uint(0)?,
        at_ms: r.uint(1)?,
        job: r.opt_uint(2)?,
        kind: r.text(3)?,
        message: r.text(4)?,
    })
}

fn events_oldest_first(rows: Vec<Row>) -> Result<Vec<Event>, StoreError> {
    let mut out = rows.iter().map(event_row).collect::<Result<Vec<_>, _>>()?;
    out.reverse();
    Ok(out)
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
        self.history.write(vec![Statement::new(
            "INSERT INTO events (at_ms, job, kind, message) VALUES (?1, ?2, ?3, ?4)",
            vec![int(at_ms), job.map(int).into(), kind.into(), message.into()],
        )])?;
        Ok(())
    }

    /// The last `limit` events, of one job or of all, oldest first. A job's are read
    /// through its index, so the cost does not grow with the log.
    pub fn events(&self, job: Option<u64>, limit: usize) -> Result<Vec<Event>, StoreError> {
        let limit = int(limit as u64);
        let statement = match job {
            None => Statement::new(
                format!("{EVENT_COLUMNS} ORDER BY seq DESC LIMIT ?1"),
                vec![limit],
            ),
            Some(job) => Statement::new(
                format!("{EVENT_COLUMNS} WHERE job = ?1 ORDER BY seq DESC LIMIT ?2"),
                vec![int(job), limit],
            ),
        };
        events_oldest_first(self.history.read(statement)?)
    }

    /// The last `limit` events of `kind` about no job whose message begins with `prefix`
    /// (a replicated service's: `service N: `), oldest first.
    pub fn kind_events(
        &self,
        kind: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let pattern = format!("{}%", prefix.replace(['%', '_'], ""));
        events_oldest_first(self.history.read(Statement::new(
            format!(
                "{EVENT_COLUMNS} WHERE job IS NULL AND kind = ?1 AND message LIKE ?2 \
                 ORDER BY seq DESC LIMIT ?3"
            ),
            vec![kind.into(), pattern.into(), int(limit as u64)],
        ))?)
    }

    /// Deletes at most `limit` of the oldest events, stopping at the first that happened
    /// at or after `before_ms`; returns how many.
    pub fn delete_events_before(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let oldest = self.history.read(Statement::new(
            "SELECT seq, at_ms FROM events ORDER BY seq LIMIT ?1",
            vec![int(limit as u64)],
        ))?;
        let mut last = None;
        for r in &oldest {
            if r.uint(1)? >= before_ms {
                break;
            }
            last = Some(r.uint(0)?);
        }
        let Some(last) = last else { return Ok(0) };
        let done = self.history.write(vec![Statement::new(
            "DELETE FROM events WHERE seq <= ?1",
            vec![int(last)],
        )])?;
        Ok(done.first().map_or(0, |w| w.changed as usize))
    }

    /// Deletes job `job`'s events and archived decisions.
    pub fn delete_job_history(&self, job: u64) -> Result<(), StoreError> {
        self.history.write(vec![
            Statement::new("DELETE FROM events WHERE job = ?1", vec![int(job)]),
            Statement::new("DELETE FROM decisions WHERE job = ?1", vec![int(job)]),
        ])?;
        Ok(())
    }

    /// Keeps the decisions logged about `job` (a JSON array) when it leaves memory.
    pub fn put_job_decisions(
        &self,
        job: u64,
        decisions: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.history
            .write(vec![put_decisions(job, encode(decisions))])?;
        Ok(())
    }

    /// The decisions kept about `job`, if it left memory with some.
    pub fn job_decisions(&self, job: u64) -> Result<Option<serde_json::Value>, StoreError> {
        let rows = self.history.read(Statement::new(
            "SELECT value FROM decisions WHERE job = ?1",
            vec![int(job)],
        ))?;
        rows.first()
            .map(|r| decode("decisions", r.bytes(0)?))
            .transpose()
    }

    /// Deletes at most `limit` accounting records of processes that ended before
    /// `before_ms`, earliest first; returns how many.
    pub fn delete_accounting_before(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let done = self.history.write(vec![Statement::new(
            "DELETE FROM accounting WHERE seq IN (SELECT seq FROM accounting \
             WHERE end_ms < ?1 ORDER BY end_ms, seq LIMIT ?2)",
            vec![int(before_ms), int(limit as u64)],
        )])?;
        Ok(done.first().map_or(0, |w| w.changed as usize))
    }

    /// Gives the space deleted history freed back to the file system; returns the bytes.
    pub fn release_free_space(&self) -> Result<u64, StoreError> {
        self.history.release_free_space()
    }
}

/// The statement that keeps (or replaces) `job`'s decisions.
pub(crate) fn put_decisions(job: u64, value: Vec<u8>) -> Statement {
    Statement::new(
        "INSERT INTO decisions (job, value) VALUES (?1, ?2) \
         ON CONFLICT (job) DO UPDATE SET value = excluded.value",
        vec![int(job), SqlValue::Bytes(value)],
    )
}

/// The statement that copies `event` in with its own sequence number (a migration).
pub(crate) fn copy_event(e: &Event) -> Statement {
    Statement::new(
        "INSERT INTO events (seq, at_ms, job, kind, message) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (seq) DO UPDATE SET at_ms = excluded.at_ms, job = excluded.job, \
         kind = excluded.kind, message = excluded.message",
        vec![
            int(e.seq),
            int(e.at_ms),
            e.job.map(int).into(),
            e.kind.clone().into(),
            e.message.clone().into(),
        ],
    )
}
