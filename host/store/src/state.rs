//! The one interface both active-state backends implement: ordered key-value tables,
//! changed by atomic batches that may be guarded by one key's expected value, read by key
//! and by ranges in either direction, with named counters. What the state means — jobs and
//! their index (`jobs.rs`), plugins, pipelines, meta and counters (`lib.rs`), services
//! (`services.rs`), the accounting outbox (`outbox.rs`) — is written once against
//! [`StateKv`]; the backends (`state_sled.rs`: sled on the controller's disk, the default;
//! `state_etcd.rs`: etcd v3, shared by several controllers) own their keys' layout,
//! durability and limits.
//!
//! Owns: these types and the trait. Does not own what any key means.

use crate::StoreError;
use std::ops::Bound;

/// A table of the active state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Job records by id (big-endian).
    Jobs,
    /// Index keys of `Jobs` (`jobs.rs`), with empty values.
    JobIndex,
    /// Plugin bytes by sha256 (parts of large ones in `PluginParts`).
    Plugins,
    /// Parts of a large plugin: `sha256/NNNNNN`.
    PluginParts,
    /// Pipeline versions by number (big-endian).
    Pipelines,
    /// Settings, checkpoints and counters by name.
    Meta,
    /// Replicated services by id (big-endian).
    Services,
    /// Accounting records waiting for history (`outbox.rs`).
    AccountingOutbox,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 8] = [
        Table::Jobs,
        Table::JobIndex,
        Table::Plugins,
        Table::PluginParts,
        Table::Pipelines,
        Table::Meta,
        Table::Services,
        Table::AccountingOutbox,
    ];

    /// Its name (sled's tree, etcd's key segment).
    pub fn name(self) -> &'static str {
        match self {
            Table::Jobs => "jobs",
            Table::JobIndex => "job_index",
            Table::Plugins => "plugins",
            Table::PluginParts => "plugin_parts",
            Table::Pipelines => "pipelines",
            Table::Meta => "meta",
            Table::Services => "services",
            Table::AccountingOutbox => "accounting_outbox",
        }
    }
}

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    /// Sets a key's value.
    Put(Table, Vec<u8>, Vec<u8>),
    /// Removes a key (nothing when absent).
    Delete(Table, Vec<u8>),
}

/// A batch's condition: `key` of `table` holds `expected` (`None`: the key is absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The table.
    pub table: Table,
    /// The key.
    pub key: Vec<u8>,
    /// The value it must hold.
    pub expected: Option<Vec<u8>>,
}

/// A range read: which keys, in which direction, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The table.
    pub table: Table,
    /// The lowest key.
    pub from: Bound<Vec<u8>>,
    /// The highest key.
    pub to: Bound<Vec<u8>>,
    /// Highest first.
    pub reverse: bool,
    /// At most this many.
    pub limit: usize,
    /// Whether the values may be left out (index keys, names).
    pub keys_only: bool,
}

impl Scan {
    /// The same read without the values.
    pub fn keys(self) -> Self {
        Self {
            keys_only: true,
            ..self
        }
    }

    /// Every key of `table` that starts with `prefix`, lowest first.
    pub fn prefix(table: Table, prefix: &[u8], limit: usize) -> Self {
        Self {
            table,
            from: Bound::Included(prefix.to_vec()),
            to: prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded),
            reverse: false,
            limit,
            keys_only: false,
        }
    }
}

/// The lowest key above every key that starts with `prefix` (`None`: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A key and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// An active-state backend.
pub trait StateKv: Send + Sync {
    /// The backend's name in messages and `/v1/health` (`sled`, `etcd`).
    fn backend(&self) -> &'static str;
    /// A key's value.
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Applies `ops` at once, all or none, when `guard` holds (or there is none); returns
    /// whether they were applied.
    fn apply(&self, guard: Option<Guard>, ops: Vec<KvOp>) -> Result<bool, StoreError>;
    /// The entries `scan` names.
    fn scan(&self, scan: &Scan) -> Result<Vec<Entry>, StoreError>;
    /// Adds one to the counter `name` (starting at 1) and returns it, durable and never
    /// the same twice.
    fn next_counter(&self, name: &str) -> Result<u64, StoreError>;
    /// How many keys `table` has.
    fn count(&self, table: Table) -> Result<u64, StoreError>;
    /// Removes every key of `table`.
    fn clear(&self, table: Table) -> Result<(), StoreError>;
    /// Makes every applied batch durable (a no-op where each already is).
    fn flush(&self) -> Result<(), StoreError>;
    /// Bytes on this machine's disk (0 for a server's).
    fn bytes_on_disk(&self) -> Result<u64, StoreError>;
}
