//! The embedded history database: SQLite in one file beside sled (`history/jobs.sqlite3` under the
//! data directory), holding what grows with time — the records of jobs that left memory
//! (`store/archive.rs`), the event log and the decisions a job leaves behind
//! (`store/history.rs`), and accounting (`store/accounting.rs`). sled keeps its bookkeeping
//! for every page it has ever written in memory, so a sled that held years of history grew
//! the daemon with it; SQLite reads through a page cache of a fixed size
//! (`retention.store_cache_mib`), so the daemon's memory does not depend on how much
//! history there is.
//!
//! Durability: the database runs in WAL mode with `synchronous = NORMAL`, so a commit is
//! one `write` to the WAL (it survives the daemon being killed). A background thread
//! fsyncs the WAL every half second when something was written ([`HistoryDb::sync`]), so
//! history survives the machine losing power but for its last half second, as sled's own
//! unflushed writes do; the records that acknowledge a client (jobs, in sled) are flushed
//! before the answer, and no fsync of history sits on that path. Freed pages are given back to the
//! file system in steps ([`HistoryDb::release_free_pages`]), so the file shrinks after a
//! collection with the daemon running.
//!
//! Owns: the connection, the schema, pragmas, sync and shrinking, and running the shared
//! statements ([`HistorySql`], `sql.rs`). Does not own what the rows mean (the modules
//! named above) or when anything is deleted (`scheduler::retention`).

use crate::StoreError;
use crate::sql::{HistorySql, Row, SqlValue, Statement, Written, from_sql_int, sql_int};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The schema; every statement is idempotent, so it runs at every open.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    user TEXT NOT NULL,
    account TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    array_id INTEGER,
    end_ms INTEGER NOT NULL,
    record BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user, id);
CREATE INDEX IF NOT EXISTS jobs_account ON jobs(account, id);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(queue, id);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, id);
CREATE INDEX IF NOT EXISTS jobs_array ON jobs(array_id, id) WHERE array_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_ms, id);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    job INTEGER,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_job ON events(job, seq) WHERE job IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, seq) WHERE job IS NULL;
CREATE TABLE IF NOT EXISTS decisions (
    job INTEGER PRIMARY KEY,
    value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS accounting (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    task_index INTEGER NOT NULL,
    run INTEGER NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    user TEXT NOT NULL,
    account TEXT NOT NULL,
    record BLOB NOT NULL,
    UNIQUE (job_id, task_index, run, start_ms)
);
CREATE INDEX IF NOT EXISTS accounting_end ON accounting(end_ms, seq);
CREATE INDEX IF NOT EXISTS accounting_user ON accounting(user, end_ms);
CREATE INDEX IF NOT EXISTS accounting_account ON accounting(account, end_ms);
";

/// Pages given back to the file system per step of [`HistoryDb::release_free_pages`]
/// (4 KiB each by default), so one step holds the connection for milliseconds.
const FREE_PAGES_PER_STEP: u32 = 2048;

/// How often the background thread fsyncs written history.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The SQLite connection, shared by every clone of the store.
#[derive(Clone)]
pub(crate) struct HistoryDb {
    conn: Arc<Mutex<Connection>>,
    /// The database file (`None` in memory).
    path: Option<PathBuf>,
    /// The WAL file, to fsync (`None` for an in-memory database).
    wal: Option<PathBuf>,
    /// Whether anything was written since the last [`HistoryDb::sync`].
    dirty: Arc<AtomicBool>,
}

impl HistoryDb {
    /// Opens (or creates) the history database in `dir`, with a page cache of `cache_mib`.
    pub(crate) fn open(dir: &Path, cache_mib: u64) -> Result<Self, StoreError> {
        gantry_private_files::dir_with_mode(dir, gantry_private_files::DAEMON_ONLY)?;
        let path = dir.join("jobs.sqlite3");
        let conn = Connection::open(&path)?;
        Self::prepare(&conn, cache_mib)?;
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: Some(path),
            wal: Some(PathBuf::from(wal)),
            dirty: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Starts the thread that fsyncs the WAL every [`SYNC_EVERY`] when anything was
    /// written; it ends when the last clone of this database is dropped.
    pub(crate) fn start_background_sync(&self) {
        let conn = Arc::downgrade(&self.conn);
        let (wal, dirty) = (self.wal.clone(), Arc::clone(&self.dirty));
        let spawned = std::thread::Builder::new()
            .name("history-sync".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(SYNC_EVERY);
                    let Some(conn) = conn.upgrade() else { return };
                    let db = HistoryDb {
                        conn,
                        path: None,
                        wal: wal.clone(),
                        dirty: Arc::clone(&dirty),
                    };
                    if let Err(e) = db.sync() {
                        tracing::warn!("history database: background fsync failed: {e}");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("history database: no background fsync thread: {e}");
        }
    }

    /// A database in memory (`Store::temporary`).
    pub(crate) fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory()?;
        Self::prepare(&conn, 4)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: None,
            wal: None,
            dirty: Arc::new(AtomicBool::new(false)),
        })
    }

    fn prepare(conn: &Connection, cache_mib: u64) -> Result<(), StoreError> {
        // auto_vacuum takes effect only before the first table exists: a new database
        // gives freed pages back in steps, an old one keeps what it had.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // After a checkpoint the WAL is cut back to this size (a large collection or
        // migration would otherwise leave it as big as the most it ever held).
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        // A negative cache size is KiB: a fixed bound whatever the file's size.
        conn.pragma_update(None, "cache_size", -(sql_int(cache_mib.max(1)) * 1024))?;
        conn.pragma_update(None, "temp_store", "FILE")?;
        conn.execute_batch(SCHEMA)?;
        Ok(())
    }

    /// Runs `f` on the connection (marking the database written when `writes`).
    fn with<T>(
        &self,
        writes: bool,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().map_err(|_| StoreError::Poisoned)?;
        if writes {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(f(&mut conn)?)
    }

    /// Makes every committed write durable against a power loss: fsyncs the WAL when
    /// anything was written since the last sync (the background thread, and after a
    /// migration).
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        // The lock keeps a checkpoint from truncating the WAL while it is opened.
        let _conn = self.conn.lock().map_err(|_| StoreError::Poisoned)?;
        match std::fs::File::open(wal) {
            Ok(f) => f.sync_data()?,
            // No WAL: everything was checkpointed into the database file, which SQLite
            // synced when it did so.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    /// Bytes of the database file and its WAL.
    pub(crate) fn bytes_on_disk(&self) -> u64 {
        [&self.path, &self.wal]
            .into_iter()
            .flatten()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Gives the pages deleted rows freed back to the file system, a step at a time so
    /// writers wait at most one step; returns the bytes released.
    pub(crate) fn release_free_pages(&self) -> Result<u64, StoreError> {
        let (page_size, mode): (i64, i64) = self.with(false, |c| {
            let size = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            Ok((size, c.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?))
        })?;
        // 2 is INCREMENTAL; a database made without it keeps its free pages for reuse.
        if mode != 2 {
            return Ok(0);
        }
        let mut released = 0u64;
        loop {
            let step = self.with(true, |c| {
                let free = |c: &Connection| -> rusqlite::Result<i64> {
                    c.query_row("PRAGMA freelist_count", [], |r| r.get(0))
                };
                let before = free(c)?;
                if before == 0 {
                    return Ok(0);
                }
                let n = before.min(i64::from(FREE_PAGES_PER_STEP));
                // The pragma frees one page per step of the statement: run it to the end.
                let mut vacuum = c.prepare(&format!("PRAGMA incremental_vacuum({n})"))?;
                let mut rows = vacuum.query([])?;
                while rows.next()?.is_some() {}
                drop(rows);
                Ok(from_sql_int(before - free(c)?))
            })?;
            if step == 0 {
                break;
            }
            released += step;
        }
        // The moves went through the WAL: fold it into the file and cut it back.
        self.checkpoint()?;
        Ok(released * from_sql_int(page_size))
    }

    /// Moves the WAL's pages into the database file and truncates the WAL (after a large
    /// write such as a migration, so the WAL does not stay at that size).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        self.with(false, |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        })
    }
}

fn bind(params: &[SqlValue]) -> Vec<rusqlite::types::Value> {
    params
        .iter()
        .map(|p| match p {
            SqlValue::Null => rusqlite::types::Value::Null,
            SqlValue::Int(v) => rusqlite::types::Value::Integer(*v),
            SqlValue::Text(v) => rusqlite::types::Value::Text(v.clone()),
            SqlValue::Bytes(v) => rusqlite::types::Value::Blob(v.clone()),
        })
        .collect()
}

fn rows(stmt: &mut rusqlite::Statement<'_>, params: &[SqlValue]) -> rusqlite::Result<Vec<Row>> {
    let columns = stmt.column_count();
    let mut rows = stmt.query(rusqlite::params_from_iter(bind(params)))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut row = Vec::with_capacity(columns);
        for i in 0..columns {
            row.push(match r.get_ref(i)? {
                rusqlite::types::ValueRef::Null => SqlValue::Null,
                rusqlite::types::ValueRef::Integer(v) => SqlValue::Int(v),
                // No column here holds a real; one read as text keeps its digits.
                rusqlite::types::ValueRef::Real(v) => SqlValue::Text(v.to_string()),
                rusqlite::types::ValueRef::Text(v) => {
                    SqlValue::Text(String::from_utf8_lossy(v).into_owned())
                }
                rusqlite::types::ValueRef::Blob(v) => SqlValue::Bytes(v.to_vec()),
            });
        }
        out.push(Row(row));
    }
    Ok(out)
}

impl HistorySql for HistoryDb {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn write(&self, statements: Vec<Statement>) -> Result<Vec<Written>, StoreError> {
        self.with(true, |c| {
            let tx = c.transaction()?;
            let mut out = Vec::with_capacity(statements.len());
            for s in &statements {
                let mut stmt = tx.prepare_cached(&s.sql)?;
                if s.sql.contains("RETURNING") {
                    let returned = rows(&mut stmt, &s.params)?;
                    out.push(Written {
                        changed: returned.len() as u64,
                        returned,
                    });
                } else {
                    let changed = stmt.execute(rusqlite::params_from_iter(bind(&s.params)))?;
                    out.push(Written {
                        changed: changed as u64,
                        returned: Vec::new(),
                    });
                }
            }
            tx.commit()?;
            Ok(out)
        })
    }

    fn read(&self, statement: Statement) -> Result<Vec<Row>, StoreError> {
        self.with(false, |c| {
            let mut stmt = c.prepare_cached(&statement.sql)?;
            rows(&mut stmt, &statement.params)
        })
    }

    fn renumber_after_copy(&self) -> Result<(), StoreError> {
        // AUTOINCREMENT numbers on from the highest key ever written.
        Ok(())
    }

    fn sync_now(&self) -> Result<(), StoreError> {
        self.checkpoint()?;
        self.sync()
    }

    fn bytes_on_disk(&self) -> u64 {
        HistoryDb::bytes_on_disk(self)
    }

    fn release_free_space(&self) -> Result<u64, StoreError> {
        self.release_free_pages()
    }
}
