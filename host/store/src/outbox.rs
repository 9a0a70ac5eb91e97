//! Accounting records the history database did not take (its server was away), kept in
//! sled until it does: a record is what a bill is made of, so an outage of PostgreSQL must
//! delay it, never lose it. Keyed by job, task, run and start (the history's own
//! uniqueness), so keeping one twice keeps it once, and writing it later is at most once.
//!
//! Owns: that tree. Does not own when the queue is tried again
//! (`host/controller/src/accounting.rs`).

use crate::state::{KvOp, Scan, Table};
use crate::{AccountingRecord, Store, StoreError, decode, encode};

fn key(r: &AccountingRecord) -> Vec<u8> {
    let mut k = Vec::with_capacity(28);
    k.extend_from_slice(&r.job_id.to_be_bytes());
    k.extend_from_slice(&r.task_index.to_be_bytes());
    k.extend_from_slice(&r.run.to_be_bytes());
    k.extend_from_slice(&r.start_ms.to_be_bytes());
    k
}

impl Store {
    /// Keeps `record` to write to history later, durably (flushed before it returns).
    pub fn queue_accounting(&self, record: &AccountingRecord) -> Result<(), StoreError> {
        let op = KvOp::Put(Table::AccountingOutbox, key(record), encode(record));
        self.state.apply(None, vec![op])?;
        self.flush()
    }

    /// The records waiting for history, oldest job first (at most `limit`).
    pub fn queued_accounting(&self, limit: usize) -> Result<Vec<AccountingRecord>, StoreError> {
        self.state
            .scan(&Scan::prefix(Table::AccountingOutbox, b"", limit))?
            .iter()
            .map(|(_, v)| decode("accounting_outbox", v))
            .collect()
    }

    /// Whether any record waits for history (called after every cycle: one short read).
    pub fn has_queued_accounting(&self) -> Result<bool, StoreError> {
        Ok(!self
            .state
            .scan(&Scan::prefix(Table::AccountingOutbox, b"", 1).keys())?
            .is_empty())
    }

    /// Forgets `record` once history holds it.
    pub fn unqueue_accounting(&self, record: &AccountingRecord) -> Result<(), StoreError> {
        let op = KvOp::Delete(Table::AccountingOutbox, key(record));
        self.state.apply(None, vec![op])?;
        Ok(())
    }
}
