//! The one-time move of a database written before the history database existed: the event
//! log, the decisions of evicted jobs and accounting leave sled's trees for SQLite
//! (`store/history_db.rs`), keeping their sequence numbers (the usage ledger's checkpoint
//! names one), in transactions of a few thousand rows. Only when everything is copied are
//! sled's trees dropped, and every copy replaces or ignores what is there, so a move a
//! crash cut short is simply done again at the next open. Ended jobs move later, when the
//! scheduler loads (`Store::archive_ended_before`), since which of them stay in memory is
//! its decision.
//!
//! Owns: that move. Does not own the rows' meaning (`store/history.rs`,
//! `store/accounting.rs`).

use super::history_db::{HistoryDb, sql_int};
use super::{AccountingRecord, Event, StoreError, decode, encode};
use rusqlite::params;

/// Meta key: set once sled's history trees have moved.
pub(super) const MOVED_META: &str = "history_in_sqlite";
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
pub(super) fn move_sled_history(db: &sled::Db, history: &HistoryDb) -> Result<u64, StoreError> {
    let started = std::time::Instant::now();
    let mut moved = 0u64;
    let events = db.open_tree("events")?;
    moved += copy_in_batches(events.iter().values(), history, |tx, v| {
        let e: Event = decode("events", &v)?;
        tx.prepare_cached(
            "INSERT OR REPLACE INTO events (seq, at_ms, job, kind, message) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            sql_int(e.seq),
            sql_int(e.at_ms),
            e.job.map(sql_int),
            e.kind,
            e.message
        ])?;
        Ok(())
    })?;
    let decisions = db.open_tree("job_decisions")?;
    moved += copy_in_batches(decisions.iter(), history, |tx, (k, v)| {
        let job = k.as_ref().try_into().map(u64::from_be_bytes).unwrap_or(0);
        let value: serde_json::Value = decode("job_decisions", &v)?;
        tx.prepare_cached("INSERT OR REPLACE INTO decisions (job, value) VALUES (?1, ?2)")?
            .execute(params![sql_int(job), encode(&value)])?;
        Ok(())
    })?;
    let accounting = db.open_tree("accounting")?;
    moved += copy_in_batches(accounting.iter(), history, |tx, (k, v)| {
        let seq = k
            .get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        let r: AccountingRecord = decode("accounting", &v)?;
        tx.prepare_cached(
            "INSERT OR IGNORE INTO accounting \
             (seq, job_id, task_index, run, start_ms, end_ms, user, account, record) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            sql_int(seq),
            sql_int(r.job_id),
            r.task_index,
            r.run,
            sql_int(r.start_ms),
            sql_int(r.end_ms),
            r.user,
            r.account,
            encode(&r)
        ])?;
        Ok(())
    })?;
    history.checkpoint()?;
    history.sync()?;
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

/// Copies `items` with `put`, [`BATCH`] to a transaction; returns how many.
fn copy_in_batches<T>(
    items: impl Iterator<Item = sled::Result<T>>,
    history: &HistoryDb,
    put: impl Fn(&rusqlite::Transaction<'_>, T) -> Result<(), StoreError>,
) -> Result<u64, StoreError> {
    let mut n = 0u64;
    let mut items = items.peekable();
    while items.peek().is_some() {
        let batch: Vec<T> = items.by_ref().take(BATCH).collect::<sled::Result<_>>()?;
        let mut failure = None;
        history.with(true, |c| {
            let tx = c.transaction()?;
            for item in batch {
                if let Err(e) = put(&tx, item) {
                    failure = Some(e);
                    return Ok(());
                }
                n += 1;
            }
            tx.commit()
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(n)
}
