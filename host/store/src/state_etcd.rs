//! The replicated active state: etcd v3 (`[store] backend = "etcd"`), shared by the
//! controllers of one cluster. A table's keys live under `{prefix}{table}/`; a batch is one
//! etcd transaction; a counter is a compare-and-swap on its key. etcd's writes are durable
//! on a quorum when they return, so a flush has nothing to do.
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
use std::ops::Bound;
use std::sync::Mutex;

/// Most operations in one transaction (etcd's default `--max-txn-ops`).
const MAX_TXN_OPS: usize = 128;
/// Tries of a counter's compare-and-swap.
const COUNTER_TRIES: usize = 64;

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
}

impl EtcdState {
    pub(crate) fn new(client: Etcd, prefix: &str) -> Self {
        Self {
            client,
            prefix: prefix.as_bytes().to_vec(),
            fence: Mutex::new(None),
        }
    }

    /// Makes every later write require `fence` (this controller leads).
    pub(crate) fn set_fence(&self, fence: Option<Fence>) {
        if let Ok(mut f) = self.fence.lock() {
            *f = fence;
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
            let next = n + 1;
            let put = etcd::put_op(&key, &next.to_be_bytes(), 0);
            if self.fenced_txn(vec![compare], vec![put])? {
                return Ok(next);
            }
        }
        Err(StoreError::Etcd {
            endpoints: self.client.endpoints(),
            message: format!("counter {name} changed under every one of {COUNTER_TRIES} tries"),
        })
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
