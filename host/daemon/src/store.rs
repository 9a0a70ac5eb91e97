//! Durable state in sled: jobs, the event log, plugin binaries by sha256, pipeline
//! versions, counters, and per-task accounting records (`store/accounting.rs`). A write
//! that acknowledges a client is flushed first.
//!
//! Owns: keys, encoding (JSON values, big-endian u64 keys) and durability. Does not
//! own what the records mean (the scheduler).

mod accounting;

pub use accounting::{AccountingFilter, AccountingRecord};

use crate::model::JobRecord;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::path::Path;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// sled failed.
    #[error("store: {0}")]
    Sled(#[from] sled::Error),
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

/// The sled database.
#[derive(Clone)]
pub struct Store {
    db: sled::Db,
    jobs: sled::Tree,
    events: sled::Tree,
    plugins: sled::Tree,
    pipelines: sled::Tree,
    meta: sled::Tree,
    accounting: sled::Tree,
    accounting_runs: sled::Tree,
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
    /// Opens (or creates) the database under `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        // The database holds every job's env and argv: the daemon's only.
        crate::private_files::dir_with_mode(&dir.join("db"), crate::private_files::DAEMON_ONLY)?;
        let db = sled::open(dir.join("db"))?;
        Ok(Self {
            jobs: db.open_tree("jobs")?,
            events: db.open_tree("events")?,
            plugins: db.open_tree("plugins")?,
            pipelines: db.open_tree("pipelines")?,
            meta: db.open_tree("meta")?,
            accounting: db.open_tree("accounting")?,
            accounting_runs: db.open_tree("accounting_runs")?,
            db,
        })
    }

    /// Makes every write so far durable.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.db.flush()?;
        Ok(())
    }

    /// Next value of a named counter (starting at 1), durable before it is returned.
    pub fn next_id(&self, counter: &str) -> Result<u64, StoreError> {
        let v = self.meta.update_and_fetch(counter, |old| {
            let n = old
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            Some((n + 1).to_be_bytes().to_vec())
        })?;
        let n = v
            .and_then(|b| b.as_ref().try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(1);
        Ok(n)
    }

    /// Writes a job.
    pub fn put_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        self.jobs.insert(job.id.to_be_bytes(), encode(job))?;
        Ok(())
    }

    /// Every job, in id order.
    pub fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.jobs
            .iter()
            .values()
            .map(|v| decode("jobs", &v?))
            .collect()
    }

    /// Appends to the event log.
    pub fn event(
        &self,
        at_ms: u64,
        job: Option<u64>,
        kind: &str,
        message: String,
    ) -> Result<(), StoreError> {
        let seq = self.db.generate_id()?;
        let e = Event {
            seq,
            at_ms,
            job,
            kind: kind.into(),
            message,
        };
        self.events.insert(seq.to_be_bytes(), encode(&e))?;
        Ok(())
    }

    /// The last `limit` events, optionally of one job, oldest first.
    pub fn events(&self, job: Option<u64>, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        for v in self.events.iter().values().rev() {
            let e: Event = decode("events", &v?)?;
            if job.is_none() || e.job == job {
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Stores plugin bytes under their sha256.
    pub fn put_plugin(&self, sha256: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.plugins.insert(sha256.as_bytes(), bytes)?;
        Ok(())
    }

    /// Plugin bytes by sha256.
    pub fn plugin(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.plugins.get(sha256.as_bytes())?.map(|v| v.to_vec()))
    }

    /// Every stored plugin's sha256.
    pub fn plugin_shas(&self) -> Result<Vec<String>, StoreError> {
        self.plugins
            .iter()
            .keys()
            .map(|k| Ok(String::from_utf8_lossy(&k?).into_owned()))
            .collect()
    }

    /// Writes a pipeline version.
    pub fn put_pipeline<T: Serialize>(&self, version: u64, value: &T) -> Result<(), StoreError> {
        self.pipelines
            .insert(version.to_be_bytes(), encode(value))?;
        Ok(())
    }

    /// Every pipeline version, oldest first.
    pub fn pipelines<T: DeserializeOwned>(&self) -> Result<Vec<T>, StoreError> {
        self.pipelines
            .iter()
            .values()
            .map(|v| decode("pipelines", &v?))
            .collect()
    }

    /// Sets a meta value.
    pub fn set_meta<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        self.meta.insert(key, encode(value))?;
        Ok(())
    }

    /// Reads a meta value.
    pub fn meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        self.meta.get(key)?.map(|v| decode("meta", &v)).transpose()
    }
}
