//! The embedded active state: sled under the data directory (`db/`), one tree per
//! [`Table`]. A batch is one sled transaction over the trees it touches; a flush that
//! acknowledges a client is shared by the callers of the same moment
//! (`group_commit.rs`). The default, and the only backend a single controller needs.
//!
//! Owns: the trees and their durability. Does not own what the keys mean (`state.rs`).

use crate::StoreError;
use crate::state::{Entry, Guard, KvOp, Scan, StateKv, Table};
use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::{Transactional, Tree};
use std::ops::Bound;

/// sled and its trees.
pub(crate) struct SledState {
    pub(crate) db: sled::Db,
    /// One tree per table, in [`Table::ALL`]'s order.
    trees: Vec<Tree>,
    commits: crate::group_commit::GroupCommit,
}

fn position(table: Table) -> usize {
    Table::ALL.iter().position(|t| *t == table).unwrap_or(0)
}

impl SledState {
    /// The trees of `db`.
    pub(crate) fn over(db: sled::Db) -> Result<Self, StoreError> {
        let trees = Table::ALL
            .iter()
            .map(|t| db.open_tree(t.name()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            db,
            trees,
            commits: Default::default(),
        })
    }

    fn tree(&self, table: Table) -> &Tree {
        &self.trees[position(table)]
    }
}

fn bounds(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl StateKv for SledState {
    fn backend(&self) -> &'static str {
        "sled"
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.tree(table).get(key)?.map(|v| v.to_vec()))
    }

    fn apply(&self, guard: Option<Guard>, ops: Vec<KvOp>) -> Result<bool, StoreError> {
        let result = self.trees.as_slice().transaction(|trees| {
            if let Some(g) = &guard {
                let now = trees[position(g.table)].get(&g.key)?;
                if now.as_deref() != g.expected.as_deref() {
                    return Ok(false);
                }
            }
            for op in &ops {
                match op {
                    KvOp::Put(t, k, v) => {
                        trees[position(*t)].insert(k.as_slice(), v.as_slice())?;
                    }
                    KvOp::Delete(t, k) => {
                        trees[position(*t)].remove(k.as_slice())?;
                    }
                }
            }
            Ok::<_, ConflictableTransactionError<StoreError>>(true)
        });
        match result {
            Ok(applied) => Ok(applied),
            Err(TransactionError::Abort(e)) => Err(e),
            Err(TransactionError::Storage(e)) => Err(StoreError::Sled(e)),
        }
    }

    fn scan(&self, scan: &Scan) -> Result<Vec<Entry>, StoreError> {
        let range = self
            .tree(scan.table)
            .range::<&[u8], _>((bounds(&scan.from), bounds(&scan.to)));
        let pair =
            |r: sled::Result<(sled::IVec, sled::IVec)>| r.map(|(k, v)| (k.to_vec(), v.to_vec()));
        let entries: sled::Result<Vec<Entry>> = if scan.reverse {
            range.rev().take(scan.limit).map(pair).collect()
        } else {
            range.take(scan.limit).map(pair).collect()
        };
        Ok(entries?)
    }

    fn next_counter(&self, name: &str) -> Result<u64, StoreError> {
        let v = self.tree(Table::Meta).update_and_fetch(name, |old| {
            let n = old
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            Some((n + 1).to_be_bytes().to_vec())
        })?;
        Ok(v.and_then(|b| b.as_ref().try_into().ok())
            .map(u64::from_be_bytes)
            .unwrap_or(1))
    }

    fn count(&self, table: Table) -> Result<u64, StoreError> {
        Ok(self.tree(table).len() as u64)
    }

    fn clear(&self, table: Table) -> Result<(), StoreError> {
        Ok(self.tree(table).clear()?)
    }

    fn flush(&self) -> Result<(), StoreError> {
        // Callers at the same moment share one flush; each returns after a flush that
        // began after its call.
        self.commits.flush(|| self.db.flush().map(drop))?;
        Ok(())
    }

    fn bytes_on_disk(&self) -> Result<u64, StoreError> {
        Ok(self.db.size_on_disk()?)
    }
}
