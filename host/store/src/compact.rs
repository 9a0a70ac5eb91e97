//! Compaction of sled: sled reuses the space deleted records free but never gives it back
//! to the file system, so after the one-time move of an older database's history to SQLite
//! (`store/migrate.rs`) its files stay as big as they were. `gantry admin compact` (with the
//! daemon stopped) copies every tree into a fresh database and swaps it in, so the files
//! shrink to the live data. (The history database gives its free pages back online:
//! `store/history_db.rs`.)
//!
//! The swap is two renames: `db` → `db.before-compact`, then `db.compact` → `db`. A crash
//! between them leaves no `db`; [`recover_interrupted`] (called by every open) puts the old
//! one back, so an interrupted compaction never loses the store.
//!
//! Owns: the copy, the swap and its recovery. Does not own when to compact (the operator).

use super::StoreError;
use serde::Serialize;
use std::path::Path;

const FRESH: &str = "db.compact";
const BEFORE: &str = "db.before-compact";

/// What a compaction did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CompactReport {
    /// Bytes of the store's files before.
    pub bytes_before: u64,
    /// After.
    pub bytes_after: u64,
    /// Keys copied, over every tree.
    pub keys: u64,
    /// How long it took, ms.
    pub ms: u64,
}

/// Bytes of the files under `p`, recursively (what a store takes on disk).
pub fn dir_bytes(p: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(p) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Finishes or undoes a swap that a crash interrupted (before the store under `data_dir`
/// is opened).
pub(super) fn recover_interrupted(data_dir: &Path) -> Result<(), StoreError> {
    let (db, before) = (data_dir.join("db"), data_dir.join(BEFORE));
    if before.exists() {
        if db.exists() {
            // The new database is in place: the old one is no longer needed.
            std::fs::remove_dir_all(&before)?;
        } else {
            std::fs::rename(&before, &db)?;
        }
    }
    let fresh = data_dir.join(FRESH);
    if fresh.exists() {
        std::fs::remove_dir_all(fresh)?;
    }
    Ok(())
}

/// Rewrites the store under `data_dir` into fresh files. The daemon must be stopped: sled
/// locks its files, and opening them while the daemon holds them fails.
pub fn compact(data_dir: &Path) -> Result<CompactReport, StoreError> {
    let started = std::time::Instant::now();
    recover_interrupted(data_dir)?;
    let db_dir = data_dir.join("db");
    if !db_dir.exists() {
        return Err(StoreError::Directory(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no store at {}", db_dir.display()),
        )));
    }
    let bytes_before = dir_bytes(&db_dir);
    let fresh_dir = data_dir.join(FRESH);
    gantry_private_files::dir_with_mode(&fresh_dir, gantry_private_files::DAEMON_ONLY)?;
    let mut keys = 0u64;
    {
        let old = sled::Config::new().path(&db_dir).open()?;
        let fresh = sled::Config::new().path(&fresh_dir).open()?;
        for name in old.tree_names() {
            let (from, to) = (old.open_tree(&name)?, fresh.open_tree(&name)?);
            let mut batch = sled::Batch::default();
            let mut pending = 0;
            for kv in from.iter() {
                let (k, v) = kv?;
                batch.insert(k, v);
                pending += 1;
                keys += 1;
                if pending == 10_000 {
                    to.apply_batch(std::mem::take(&mut batch))?;
                    pending = 0;
                }
            }
            to.apply_batch(batch)?;
        }
        // Event and accounting sequence numbers come from sled's id generator: the new
        // database must never hand out one the old one did.
        let next = old.generate_id()?;
        while fresh.generate_id()? < next {}
        fresh.flush()?;
    }
    std::fs::rename(&db_dir, data_dir.join(BEFORE))?;
    std::fs::rename(&fresh_dir, &db_dir)?;
    std::fs::remove_dir_all(data_dir.join(BEFORE))?;
    Ok(CompactReport {
        bytes_before,
        bytes_after: dir_bytes(&db_dir),
        keys,
        ms: started.elapsed().as_millis() as u64,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::Store;
    use super::*;

    #[test]
    fn a_compacted_store_keeps_every_key_and_never_reuses_a_sequence_number() {
        let dir = tempfile::tempdir().unwrap();
        let before_seq;
        {
            let store = Store::open(dir.path()).unwrap();
            for i in 0..2_000u64 {
                store.set_meta(&format!("k{i}"), &vec![i; 64]).unwrap();
            }
            for i in 0..1_900u64 {
                let key = format!("k{i}").into_bytes();
                let op = crate::state::KvOp::Delete(crate::state::Table::Meta, key);
                store.state.apply(None, vec![op]).unwrap();
            }
            store.event(1, Some(1), "kept", "x".into()).unwrap();
            before_seq = store.sled.as_ref().unwrap().generate_id().unwrap();
            store.flush().unwrap();
        }
        let report = compact(dir.path()).unwrap();
        assert!(report.keys > 100, "{report:?}");
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.meta::<Vec<u64>>("k1999").unwrap(),
            Some(vec![1999; 64])
        );
        assert_eq!(store.meta::<Vec<u64>>("k0").unwrap(), None);
        assert_eq!(store.events(Some(1), 10).unwrap().len(), 1);
        assert!(store.sled.as_ref().unwrap().generate_id().unwrap() > before_seq);
    }

    #[test]
    fn a_swap_cut_between_its_renames_is_undone_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.set_meta("kept", &1u64).unwrap();
            store.flush().unwrap();
        }
        // As if the daemon died after the first rename.
        std::fs::rename(dir.path().join("db"), dir.path().join(BEFORE)).unwrap();
        std::fs::create_dir(dir.path().join(FRESH)).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.meta::<u64>("kept").unwrap(), Some(1));
        assert!(!dir.path().join(FRESH).exists());
    }
}
