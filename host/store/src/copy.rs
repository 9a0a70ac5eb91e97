//! Moving a controller onto the replicated backends (`gantry store migrate`): every table
//! of a stopped controller's active state and every row of its history copied into another
//! store (etcd and PostgreSQL), keeping keys, ids and sequence numbers, so the jobs, the
//! usage ledger's checkpoint, counters and pipeline versions mean the same there. Plugins
//! are written again through [`Store::put_plugin`] (large ones in parts); the job index is
//! built anew on the target. The target must hold no state yet.
//!
//! Owns: the copy and its report. Does not own either store's layout.

use crate::accounting::copy_accounting;
use crate::history::{copy_event, put_decisions};
use crate::sql::{Statement, int};
use crate::state::{KvOp, Scan, Table};
use crate::{AccountingRecord, Event, Store, StoreError, decode};
use gantry_api::model::JobRecord;
use std::ops::Bound;

/// Entries read per range read, and rows per history transaction.
const CHUNK: usize = 500;
/// Writes per batch of the active state (below etcd's 128 operations per transaction).
const WRITES_PER_BATCH: usize = 100;

/// What a copy moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Job records in the active state.
    pub jobs: u64,
    /// Plugin components.
    pub plugins: u64,
    /// Pipeline versions.
    pub pipelines: u64,
    /// Replicated services.
    pub services: u64,
    /// Meta values and counters.
    pub meta: u64,
    /// Accounting records waiting for history.
    pub queued_accounting: u64,
    /// Jobs in the history archive.
    pub archived_jobs: u64,
    /// Event log entries.
    pub events: u64,
    /// Kept decisions.
    pub decisions: u64,
    /// Accounting records.
    pub accounting: u64,
}

impl Store {
    /// Copies everything this store holds into `to`, which must hold no state yet.
    pub fn copy_into(&self, to: &Store) -> Result<CopyReport, StoreError> {
        if to.state.count(Table::Jobs)? > 0 || to.state.count(Table::Pipelines)? > 0 {
            return Err(StoreError::Corrupt {
                tree: "target",
                message: "the target store already holds jobs or pipelines: refusing to mix \
                          two clusters' state"
                    .into(),
            });
        }
        let mut report = CopyReport::default();
        for (table, count) in [
            (Table::Jobs, &mut report.jobs),
            (Table::Pipelines, &mut report.pipelines),
            (Table::Meta, &mut report.meta),
            (Table::Services, &mut report.services),
            (Table::AccountingOutbox, &mut report.queued_accounting),
        ] {
            *count = self.copy_table(to, table)?;
        }
        for sha in self.plugin_shas()? {
            if let Some(bytes) = self.plugin(&sha)? {
                to.put_plugin(&sha, &bytes)?;
                report.plugins += 1;
            }
        }
        to.reindex_jobs()?;
        self.copy_history(to, &mut report)?;
        to.flush()?;
        Ok(report)
    }

    /// Copies one table's entries as they are; returns how many.
    fn copy_table(&self, to: &Store, table: Table) -> Result<u64, StoreError> {
        let mut from = Bound::Unbounded;
        let mut n = 0;
        loop {
            let chunk = self.state.scan(&Scan {
                table,
                from,
                to: Bound::Unbounded,
                reverse: false,
                limit: CHUNK,
                keys_only: false,
            })?;
            let Some((last, _)) = chunk.last() else {
                return Ok(n);
            };
            from = Bound::Excluded(last.clone());
            n += chunk.len() as u64;
            let ops: Vec<KvOp> = chunk
                .into_iter()
                .map(|(k, v)| KvOp::Put(table, k, v))
                .collect();
            for batch in ops.chunks(WRITES_PER_BATCH) {
                to.state.apply(None, batch.to_vec())?;
            }
        }
    }

    fn copy_history(&self, to: &Store, report: &mut CopyReport) -> Result<(), StoreError> {
        report.archived_jobs = self.copy_rows(
            "SELECT id, record FROM jobs WHERE id > ?1 ORDER BY id LIMIT ?2",
            |rows| {
                let jobs = rows
                    .iter()
                    .map(|r| decode::<JobRecord>("archive", r.bytes(1)?))
                    .collect::<Result<Vec<_>, _>>()?;
                to.put_archived(&jobs.iter().collect::<Vec<_>>())?;
                Ok(())
            },
        )?;
        report.events = self.copy_rows(
            "SELECT seq, at_ms, job, kind, message FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            |rows| {
                let statements = rows
                    .iter()
                    .map(|r| {
                        Ok(copy_event(&Event {
                            seq: r.uint(0)?,
                            at_ms: r.uint(1)?,
                            job: r.opt_uint(2)?,
                            kind: r.text(3)?,
                            message: r.text(4)?,
                        }))
                    })
                    .collect::<Result<Vec<Statement>, StoreError>>()?;
                to.history.write(statements).map(drop)
            },
        )?;
        report.decisions = self.copy_rows(
            "SELECT job, value FROM decisions WHERE job > ?1 ORDER BY job LIMIT ?2",
            |rows| {
                let statements = rows
                    .iter()
                    .map(|r| Ok(put_decisions(r.uint(0)?, r.bytes(1)?.to_vec())))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                to.history.write(statements).map(drop)
            },
        )?;
        report.accounting = self.copy_rows(
            "SELECT seq, record FROM accounting WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            |rows| {
                let statements = rows
                    .iter()
                    .map(|r| {
                        let record: AccountingRecord = decode("accounting", r.bytes(1)?)?;
                        Ok(copy_accounting(r.uint(0)?, &record))
                    })
                    .collect::<Result<Vec<_>, StoreError>>()?;
                to.history.write(statements).map(drop)
            },
        )?;
        to.history.renumber_after_copy()?;
        to.history.sync_now()
    }

    /// Reads `select` (keyed by its first column, `?1` the last key, `?2` the chunk) a chunk
    /// at a time and hands each chunk to `write`; returns the rows.
    fn copy_rows(
        &self,
        select: &str,
        mut write: impl FnMut(&[crate::sql::Row]) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        let mut after = 0u64;
        let mut n = 0;
        loop {
            let rows = self
                .history
                .read(Statement::new(select, vec![int(after), int(CHUNK as u64)]))?;
            let Some(last) = rows.last() else {
                return Ok(n);
            };
            after = last.uint(0)?;
            n += rows.len() as u64;
            write(&rows)?;
        }
    }
}
