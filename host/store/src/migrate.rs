//! The one-time move of a database written before the history database existed: the event
//! log, the decisions of evicted jobs and accounting leave sled's trees for SQLite
//! (`history_sqlite.rs`), keeping their sequence numbers (the usage ledger's checkpoint
//! names one), in transactions of a few thousand rows. Only when everything is copied are
//! sled's trees dropped, and every copy replaces or ignores what is there, so a move a
//! crash cut short is simply done again at the next open. Ended jobs move later, when the
//! scheduler loads (`Store::archive_ended_before`), since which of them stay in memory is
//! its decision.
//!
//! Owns: that move. Does not own the rows' meaning (`store/history.rs`,
//! `store/accounting.rs`).

use crate::accounting::copy_accounting;
use crate::history::{copy_event, put_decisions};
use crate::sql::{HistorySql, Statement};
use crate::{AccountingRecord, Event, StoreError, decode, encode};

/// Meta key: set once sled's history trees have moved.
pub(crate) const MOVED_META: &str = "history_in_sqlite";
/// sled trees the move empties and drops.
const OLD_TREES: [&str; 6] = [
    "events",
    "job_events",
    "job_decisions",
    "accounting",
    "accounting_runs",
    "accounting_seq",
];
/// Rows per transaction.
const BATCH: usize = 5_000;

/// Moves sled's event log, decisions and accounting into `history`; returns rows moved.
pub(crate) fn move_sled_history(
    db: &sled::Db,
    history: &dyn HistorySql,
) -> Result<u64, StoreError> {
    let started = std::time::Instant::now();
    let mut moved = 0u64;
    let events = db.open_tree("events")?;
    moved += copy_in_batches(events.iter().values(), history, |v| {
        let e: Event = decode("events", &v)?;
        Ok(copy_event(&e))
    })?;
    let decisions = db.open_tree("job_decisions")?;
    moved += copy_in_batches(decisions.iter(), history, |(k, v)| {
        let job = k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
        let value: serde_json::Value = decode("job_decisions", &v)?;
        Ok(put_decisions(job, encode(&value)))
    })?;
    let accounting = db.open_tree("accounting")?;
    moved += copy_in_batches(accounting.iter(), history, |(k, v)| {
        let seq = k
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        let r: AccountingRecord = decode("accounting", &v)?;
        Ok(copy_accounting(seq, &r))
    })?;
    history.renumber_after_copy()?;
    history.sync_now()?;
    for tree in OLD_TREES {
        db.drop_tree(tree)?;
    }
    if moved > 0 {
        tracing::info!(
            rows = moved,
            ms = started.elapsed().as_millis() as u64,
            "event log, decisions and accounting moved from sled to the history database"
        );
    }
    Ok(moved)
}

/// Writes the statement `copy` makes of each of `items`, [`BATCH`] to a transaction;
/// returns how many.
pub(crate) fn copy_in_batches<T>(
    items: impl Iterator<Item = sled::Result<T>>,
    history: &dyn HistorySql,
    copy: impl Fn(T) -> Result<Statement, StoreError>,
) -> Result<u64, StoreError> {
    let mut n = 0u64;
    let mut items = items.peekable();
    while items.peek().is_some() {
        let batch: Vec<T> = items.by_ref().take(BATCH).collect::<sled::Result<_>>()?;
        let statements = batch
            .into_iter()
            .map(&copy)
            .collect::<Result<Vec<_>, _>>()?;
        n += statements.len() as u64;
        history.write(statements)?;
    }
    Ok(n)
}
