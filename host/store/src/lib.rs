//! Gantry's durable state (crate `gantry-store`, the daemon's `crate::store`), in two databases under the data directory. sled (`db/`) holds what the
//! scheduler keeps in memory — the jobs it holds, with their indexes (`store/jobs.rs`) —
//! and plugin binaries by sha256, pipeline versions, counters and meta. The history
//! database, SQLite (`history/`, `store/history_db.rs`), holds what grows with time: the
//! jobs that left memory (`store/archive.rs`), the event log and kept decisions
//! (`store/history.rs`) and accounting (`store/accounting.rs`). A write that acknowledges
//! a client is flushed first; history is fsynced in the background every half second.
//!
//! Owns: keys, encoding (JSON values, big-endian u64 keys), durability and the size of
//! both page caches. Does not own what the records mean (the scheduler) or when history is
//! deleted (`scheduler::retention`).

mod accounting;
mod archive;
mod compact;
mod copy;
pub mod election;
pub mod etcd;
mod group_commit;
mod history;
mod history_postgres;
mod history_sqlite;
mod jobs;
mod migrate;
mod outbox;
pub mod postgres_secret;
pub mod secret_file;
mod services;
pub mod sql;
pub mod state;
mod state_etcd;
mod state_sled;
pub use state_etcd::{COUNTER_BLOCK, Fence};
mod tables;
#[cfg(feature = "test-support")]
pub mod test_etcd;
#[cfg(feature = "test-support")]
pub mod test_postgres;

pub use accounting::{AccountingFilter, AccountingRecord};
pub use compact::{CompactReport, compact, dir_bytes};
pub use copy::CopyReport;
pub use jobs::JobIndex;

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::path::Path;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled failed.
    #[error("store: {0}")]
    Sled(#[from] sled::Error),
    /// The history database (SQLite) failed.
    #[error("store: history database: {0}")]
    History(#[from] rusqlite::Error),
    /// The PostgreSQL history database failed or could not be reached.
    #[error("store: history database (postgres at {server}): {message}")]
    Postgres {
        /// `host:port/database`, never the password.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// etcd failed or no member could be reached.
    #[error("store: etcd ({endpoints}): {message}")]
    Etcd {
        /// The members' client URLs.
        endpoints: String,
        /// What went wrong.
        message: String,
    },
    /// This controller no longer leads: etcd refused its write.
    #[error("store: not the leader any more (term {term} ended): the write was refused")]
    Fenced {
        /// The term this controller led in.
        term: i64,
    },
    /// A thread panicked while it held the history database.
    #[error("store: the history database's lock was poisoned by a panic")]
    Poisoned,
    /// The database directory could not be made the daemon's own.
    #[error("store: cannot prepare the database directory: {0}")]
    Directory(#[from] std::io::Error),
    /// A record did not decode.
    #[error("store: corrupt record in {tree}: {message}")]
    Corrupt {
        /// Tree.
        tree: &'static str,
        /// Decoder message.
        message: String,
    },
}

/// One entry of the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Sequence number.
    pub seq: u64,
    /// Time, ms since the Unix epoch.
    pub at_ms: u64,
    /// The job concerned, if any.
    pub job: Option<u64>,
    /// Kind (submitted, started, finished, evicted, fault, policy...).
    pub kind: String,
    /// Details.
    pub message: String,
}

/// The store: the active state (sled or etcd) and the history database (SQLite or
/// PostgreSQL).
#[derive(Clone)]
pub struct Store {
    /// Jobs in memory and their index, plugins, pipelines, meta, services (`state.rs`).
    state: std::sync::Arc<dyn state::StateKv>,
    /// sled itself when the state is in sled (the one-time move of an old database's
    /// history, tests).
    sled: Option<sled::Db>,
    /// etcd's state when the state is there (to set the fence).
    etcd: Option<std::sync::Arc<state_etcd::EtcdState>>,
    /// Archived jobs, events, decisions, accounting: SQLite or PostgreSQL (`sql.rs`).
    history: std::sync::Arc<dyn sql::HistorySql>,
}

/// Where a store keeps its active state (`[store]` in the configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StateBackend {
    /// sled, in `db/` under the data directory (the default).
    #[default]
    Sled,
    /// etcd v3, shared by several controllers.
    Etcd(etcd::EtcdConfig),
}

/// Where a store keeps its history (`[history]` in the configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HistoryBackend {
    /// SQLite, in `history/` under the data directory (the default).
    #[default]
    Sqlite,
    /// A PostgreSQL server: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
    Postgres {
        /// The connection string.
        url: String,
    },
}

/// The page cache of each database of a store opened with [`Store::open`]: sled's default
/// (1 GiB) would let the daemon's memory grow by that much.
pub const DEFAULT_CACHE_MIB: u64 = 16;

/// How long opening the database waits for its lock. The lock is an `flock` that a
/// process the previous daemon forked shares until that process executes its program
/// (the descriptor is close-on-exec): a daemon killed while it was starting a task leaves
/// the lock held for that moment, and a restart right after (a supervisor's, a test's)
/// must not fail for it. A lock held longer (another daemon on this directory) fails the
/// open with sled's error, which names the database.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether opening failed because another process holds the database's lock: sled says
/// so in an `Other` error's message ("could not acquire lock on ...: ... WouldBlock").
fn lock_held(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
        || e.to_string().starts_with("could not acquire lock")
}

/// sled's database at `path`, retrying while another process holds its lock, up to
/// [`LOCK_WAIT`].
fn open_sled_waiting_for_its_lock(path: &Path, cache_mib: u64) -> Result<sled::Db, sled::Error> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        let opened = sled::Config::new()
            .path(path)
            .cache_capacity(cache_mib.max(1) * 1024 * 1024)
            .open();
        match opened {
            Err(sled::Error::Io(e)) if lock_held(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

fn decode<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        tree,
        message: e.to_string(),
    })
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain data types cannot fail (no maps with non-string keys).
    serde_json::to_vec(value).unwrap_or_default()
}

impl Store {
    /// Opens (or creates) the database under `dir`, with the default page cache and
    /// history in SQLite beside it.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(dir, DEFAULT_CACHE_MIB)
    }

    /// Opens (or creates) the database under `dir`, with a page cache of `cache_mib` and
    /// history in SQLite beside it.
    pub fn open_with_cache(dir: &Path, cache_mib: u64) -> Result<Self, StoreError> {
        Self::open_with(dir, cache_mib, &StateBackend::Sled, &HistoryBackend::Sqlite)
    }

    /// Opens (or creates) the store: its active state where `state` says (sled under
    /// `dir` with a page cache of `cache_mib`, or etcd), its history where `history` says.
    pub fn open_with(
        dir: &Path,
        cache_mib: u64,
        state: &StateBackend,
        history: &HistoryBackend,
    ) -> Result<Self, StoreError> {
        // History first: a server that cannot be reached fails the open before sled is
        // locked.
        let history: std::sync::Arc<dyn sql::HistorySql> = match history {
            HistoryBackend::Sqlite => {
                let sqlite = history_sqlite::HistoryDb::open(&dir.join("history"), cache_mib)?;
                sqlite.start_background_sync();
                std::sync::Arc::new(sqlite)
            }
            HistoryBackend::Postgres { url } => {
                std::sync::Arc::new(history_postgres::PostgresHistory::connect(url)?)
            }
        };
        if let StateBackend::Etcd(config) = state {
            let etcd = std::sync::Arc::new(state_etcd::EtcdState::new(
                etcd::Etcd::new(config)?,
                &config.prefix,
            ));
            let store = Self {
                state: etcd.clone(),
                sled: None,
                etcd: Some(etcd),
                history,
            };
            store.ensure_job_index()?;
            return Ok(store);
        }
        compact::recover_interrupted(dir)?;
        // The database holds every job's env and argv: the daemon's only.
        gantry_private_files::dir_with_mode(&dir.join("db"), gantry_private_files::DAEMON_ONLY)?;
        let db = open_sled_waiting_for_its_lock(&dir.join("db"), cache_mib)?;
        Self::over(db, history)
    }

    /// Makes every later write of the active state require that this controller still
    /// leads (`None`: no longer); only etcd's state has a fence.
    pub fn set_fence(&self, fence: Option<Fence>) {
        if let Some(etcd) = &self.etcd {
            etcd.set_fence(fence);
        }
    }

    /// A store that lives in a temporary file and in memory, gone when it is dropped (tests
    /// here and in the crates above).
    pub fn temporary() -> Result<Self, StoreError> {
        Self::over(
            sled::Config::new().temporary(true).open()?,
            std::sync::Arc::new(history_sqlite::HistoryDb::in_memory()?),
        )
    }

    fn over(
        db: sled::Db,
        history: std::sync::Arc<dyn sql::HistorySql>,
    ) -> Result<Self, StoreError> {
        let store = Self {
            state: std::sync::Arc::new(state_sled::SledState::over(db.clone())?),
            sled: Some(db),
            etcd: None,
            history,
        };
        store.ensure_job_index()?;
        if store.meta::<u64>(migrate::MOVED_META)? != Some(1) {
            if let Some(db) = &store.sled {
                migrate::move_sled_history(db, store.history.as_ref())?;
            }
            store.set_meta(migrate::MOVED_META, &1u64)?;
            store.flush()?;
        }
        Ok(store)
    }

    /// Which database holds the active state (`sled`, `etcd`).
    pub fn state_backend(&self) -> &'static str {
        self.state.backend()
    }

    /// Which database holds history (`sqlite`, `postgres`).
    pub fn history_backend(&self) -> &'static str {
        self.history.backend()
    }

    /// Bytes the store's two databases take on this machine's disk.
    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        Ok(self.state.bytes_on_disk()? + self.history.bytes_on_disk())
    }

    /// Makes every write to the active state so far durable (history is fsynced in the
    /// background every half second: `history_sqlite.rs`; PostgreSQL's and etcd's writes
    /// are durable when they return).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.state.flush()
    }
}

#[cfg(test)]
mod lock_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_lock_let_go_while_the_open_waits_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let first = open_sled_waiting_for_its_lock(&dir.path().join("db"), 1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let holder = std::thread::spawn(move || {
            // Let the open below start waiting, then let go of the lock.
            rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            drop(first);
        });
        tx.send(()).unwrap();
        let started = std::time::Instant::now();
        let second = open_sled_waiting_for_its_lock(&dir.path().join("db"), 1);
        holder.join().unwrap();
        assert!(second.is_ok(), "{:?}", second.err());
        assert!(started.elapsed() < LOCK_WAIT);
    }
}
