//! The replicated active state: etcd v3 (`[store] backend = "etcd"`), shared by the
//! controllers of one cluster. A table's keys live under `{prefix}{table}/`; a batch is one
//! etcd transaction; a counter is a compare-and-swap on its key, which reserves
//! [`COUNTER_BLOCK`] numbers at a time for this process (handed out in order from memory,
//! so a submit does not wait for a quorum's fsync to get its id). Numbers stay unique and
//! grow within a leader's term; the rest of a block is skipped when another process takes
//! over. etcd's writes are durable on a quorum when they return, so a flush has nothing to
//! do.
//!
//! Fencing: once a controller leads (`election.rs`), every write it makes carries one more
//! comparison — the leader key is still the one it created — so a controller that lost
//! its lease (paused, partitioned) and has not noticed yet cannot change anything: etcd
//! refuses the write, and the caller gets [`StoreError::Fenced`].
//!
//! Limits: etcd takes at most 128 operations per transaction and 1.5 MiB per request by
//! default; batches here stay far below (a job and its index keys; plugins in 512 KiB parts).
//!
//! Owns: the key layout and the fence. Does not own what keys mean (`state.rs`).

use crate::StoreError;
use crate::etcd::{self, Etcd};
use crate::state::{Entry, Guard, KvOp, Scan, StateKv, Table, prefix_end};
use std::collections::HashMap;
use std::ops::{Bound, Range};
use std::sync::Mutex;

/// Most operations in one transaction (etcd's default `--max-txn-ops`).
const MAX_TXN_OPS: usize = 128;
/// Tries of a counter's compare-and-swap.
const COUNTER_TRIES: usize = 64;
/// How many numbers of a counter one compare-and-swap reserves.
pub const COUNTER_BLOCK: u64 = 32;

/// The leader key this controller created, which every write requires still to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The leader key.
    pub key: Vec<u8>,
    /// The revision that created it: this controller's term.
    pub term: i64,
}

/// etcd as the active state.
pub(crate) struct EtcdState {
    client: Etcd,
    prefix: Vec<u8>,
    fence: Mutex<Option<Fence>>,
    /// Numbers of each counter reserved in etcd and not handed out yet.
    reserved: Mutex<HashMap<String, Range<u64>>>,
}

impl EtcdState {
    pub(crate) fn new(client: Etcd, prefix: &str) -> Self {
        Self {
            client,
            prefix: prefix.as_bytes().to_vec(),
            fence: Mutex::new(None),
            reserved: Mutex::default(),
        }
    }

    /// Makes every later write require `fence` (this controller leads).
    /// Numbers reserved before are dropped: a new term reserves its own.
    pub(crate) fn set_fence(&self, fence: Option<Fence>) {
        if let Ok(mut f) = self.fence.lock() {
            *f = fence;
        }
        if let Ok(mut r) = self.reserved.lock() {
            r.clear();
        }
    }

    fn fence(&self) -> Result<Option<Fence>, StoreError> {
        self.fence
            .lock()
            .map(|f| f.clone())
            .map_err(|_| StoreError::Poisoned)
    }

    fn table_prefix(&self, table: Table) -> Vec<u8> {
        let mut p = self.prefix.clone();
        p.extend_from_slice(table.name().as_bytes());
        p.push(b'/');
        p
    }

    fn key(&self, table: Table, key: &[u8]) -> Vec<u8> {
        let mut k = self.table_prefix(table);
        k.extend_from_slice(key);
        k
    }

    /// Moves counter `name` on by [`COUNTER_BLOCK`] in etcd (compare-and-swap, fenced) and
    /// returns the numbers it passed over.
    fn reserve(&self, name: &str) -> Result<Range<u64>, StoreError> {
        let key = self.key(Table::Meta, name.as_bytes());
        for _ in 0..COUNTER_TRIES {
            let now = self.client.range(&key, &[], 1, false, false)?;
            let (n, compare) = match now.first() {
                None => (0, etcd::absent(&key)),
                Some(kv) => (
                    kv.value
                        .as_slice()
                        .try_into()
                        .map(u64::from_be_bytes)
                        .unwrap_or(0),
                    etcd::changed_at(&key, kv.mod_revision),
                ),
            };
            let end = n + COUNTER_BLOCK;
            let put = etcd::put_op(&key, &end.to_be_bytes(), 0);
            if self.fenced_txn(vec![compare], vec![put])? {
                return Ok(n + 1..end + 1);
            }
        }
        Err(StoreError::Etcd {
            endpoints: self.client.endpoints(),
            message: format!("counter {name} changed under every one of {COUNTER_TRIES} tries"),
        })
    }

    /// Runs a transaction with the fence added; `Ok(false)` when a comparison of the
    /// caller's failed, [`StoreError::Fenced`] when the fence did.
    fn fenced_txn(
        &self,
        mut compare: Vec<serde_json::Value>,
        success: Vec<serde_json::Value>,
    ) -> Result<bool, StoreError> {
        if success.len() > MAX_TXN_OPS {
            return Err(StoreError::Etcd {
                endpoints: self.client.endpoints(),
                message: format!(
                    "a batch of {} writes is more than etcd takes at once ({MAX_TXN_OPS})",
                    success.len()
                ),
            });
        }
        let fence = self.fence()?;
        if let Some(f) = &fence {
            compare.push(etcd::created_at(&f.key, f.term));
        }
        let (succeeded, _) = self.client.txn(compare, success, vec![])?;
        if succeeded {
            return Ok(true);
        }
        if let Some(f) = fence {
            let now = self.client.range(&f.key, &[], 1, false, true)?;
            if now.first().map(|kv| kv.create_revision) != Some(f.term) {
                return Err(StoreError::Fenced { term: f.term });
            }
        }
        Ok(false)
    }
}

fn after(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

impl StateKv for EtcdState {
    fn backend(&self) -> &'static str {
        "etcd"
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let kvs = self
            .client
            .range(&self.key(table, key), &[], 1, false, false)?;
        Ok(kvs.into_iter().next().map(|kv| kv.value))
    }

    fn apply(&self, guard: Option<Guard>, ops: Vec<KvOp>) -> Result<bool, StoreError> {
        let compare = guard
            .map(|g| {
                let k = self.key(g.table, &g.key);
                match g.expected {
                    None => etcd::absent(&k),
                    Some(v) => etcd::holds(&k, &v),
                }
            })
            .into_iter()
            .collect();
        let success = ops
            .iter()
            .map(|op| match op {
                KvOp::Put(t, k, v) => etcd::put_op(&self.key(*t, k), v, 0),
                KvOp::Delete(t, k) => etcd::delete_op(&self.key(*t, k), None),
            })
            .collect();
        self.fenced_txn(compare, success)
    }

    fn scan(&self, scan: &Scan) -> Result<Vec<Entry>, StoreError> {
        let base = self.table_prefix(scan.table);
        let from = match &scan.from {
            Bound::Included(k) => self.key(scan.table, k),
            Bound::Excluded(k) => after(&self.key(scan.table, k)),
            Bound::Unbounded => base.clone(),
        };
        let to = match &scan.to {
            Bound::Included(k) => after(&self.key(scan.table, k)),
            Bound::Excluded(k) => self.key(scan.table, k),
            Bound::Unbounded => prefix_end(&base).unwrap_or_default(),
        };
        if from >= to {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(scan.limit).unwrap_or(0);
        let kvs = self
            .client
            .range(&from, &to, limit, scan.reverse, scan.keys_only)?;
        Ok(kvs
            .into_iter()
            .filter_map(|kv| Some((kv.key.strip_prefix(base.as_slice())?.to_vec(), kv.value)))
            .collect())
    }

    fn next_counter(&self, name: &str) -> Result<u64, StoreError> {
        let mut reserved = self.reserved.lock().map_err(|_| StoreError::Etcd {
            endpoints: self.client.endpoints(),
            message: "the counters' lock was poisoned".into(),
        })?;
        if let Some(block) = reserved.get_mut(name)
            && let Some(n) = block.next()
        {
            return Ok(n);
        }
        let mut block = self.reserve(name)?;
        let n = block.next().unwrap_or(block.start);
        reserved.insert(name.to_string(), block);
        Ok(n)
    }

    fn count(&self, table: Table) -> Result<u64, StoreError> {
        let base = self.table_prefix(table);
        self.client
            .count(&base, &prefix_end(&base).unwrap_or_default())
    }

    fn clear(&self, table: Table) -> Result<(), StoreError> {
        let base = self.table_prefix(table);
        let end = prefix_end(&base).unwrap_or_default();
        self.fenced_txn(vec![], vec![etcd::delete_op(&base, Some(&end))])
            .map(drop)
    }

    fn flush(&self) -> Result<(), StoreError> {
        // Every write was on a quorum's disk when it returned.
        Ok(())
    }

    fn bytes_on_disk(&self) -> Result<u64, StoreError> {
        // The members' disks, not this machine's.
        Ok(0)
    }
}
