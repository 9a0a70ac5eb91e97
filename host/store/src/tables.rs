//! The small tables of the active state: plugin components by sha256 (a large one in
//! parts, so that no single write exceeds what etcd takes in one request), pipeline
//! versions, meta values (JSON) and named counters.
//!
//! Owns: those keys. Does not own what a pipeline or a meta value means (the daemon).

use crate::state::{KvOp, Scan, Table};
use crate::{Store, StoreError, decode, encode};
use serde::{Serialize, de::DeserializeOwned};

/// Bytes of one part of a plugin (etcd takes at most 1.5 MiB per request by default, and
/// its JSON gateway sends values in base64).
const PART_BYTES: usize = 512 * 1024;
/// The value of a plugin stored in parts: this prefix and the number of parts.
const PARTS_MARK: &[u8] = b"gantry-parts:";

fn part_key(sha256: &str, n: usize) -> Vec<u8> {
    format!("{sha256}/{n:06}").into_bytes()
}

impl Store {
    /// Stores plugin bytes under their sha256: the parts first, then the entry naming
    /// them, so a crash between leaves no entry (the parts are written again next time).
    pub fn put_plugin(&self, sha256: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if bytes.len() <= PART_BYTES {
            let op = KvOp::Put(Table::Plugins, sha256.as_bytes().to_vec(), bytes.to_vec());
            self.state.apply(None, vec![op])?;
            return Ok(());
        }
        let parts: Vec<&[u8]> = bytes.chunks(PART_BYTES).collect();
        for (n, part) in parts.iter().enumerate() {
            let op = KvOp::Put(Table::PluginParts, part_key(sha256, n), part.to_vec());
            self.state.apply(None, vec![op])?;
        }
        let mut mark = PARTS_MARK.to_vec();
        mark.extend_from_slice(parts.len().to_string().as_bytes());
        let op = KvOp::Put(Table::Plugins, sha256.as_bytes().to_vec(), mark);
        self.state.apply(None, vec![op])?;
        Ok(())
    }

    /// Plugin bytes by sha256.
    pub fn plugin(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(value) = self.state.get(Table::Plugins, sha256.as_bytes())? else {
            return Ok(None);
        };
        let Some(count) = value.strip_prefix(PARTS_MARK) else {
            return Ok(Some(value));
        };
        let count: usize = std::str::from_utf8(count)
            .ok()
            .and_then(|c| c.parse().ok())
            .ok_or(StoreError::Corrupt {
                tree: "plugins",
                message: format!("plugin {sha256}: a bad count of parts"),
            })?;
        let parts = self.state.scan(&Scan::prefix(
            Table::PluginParts,
            format!("{sha256}/").as_bytes(),
            count,
        ))?;
        if parts.len() != count {
            return Err(StoreError::Corrupt {
                tree: "plugins",
                message: format!("plugin {sha256}: {} of {count} parts", parts.len()),
            });
        }
        Ok(Some(parts.into_iter().flat_map(|(_, v)| v).collect()))
    }

    /// Every stored plugin's sha256.
    pub fn plugin_shas(&self) -> Result<Vec<String>, StoreError> {
        let keys = self
            .state
            .scan(&Scan::prefix(Table::Plugins, b"", usize::MAX))?;
        Ok(keys
            .into_iter()
            .map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
            .collect())
    }

    /// Writes a pipeline version.
    pub fn put_pipeline<T: Serialize>(&self, version: u64, value: &T) -> Result<(), StoreError> {
        let op = KvOp::Put(
            Table::Pipelines,
            version.to_be_bytes().to_vec(),
            encode(value),
        );
        self.state.apply(None, vec![op])?;
        Ok(())
    }

    /// Every pipeline version, oldest first.
    pub fn pipelines<T: DeserializeOwned>(&self) -> Result<Vec<T>, StoreError> {
        self.state
            .scan(&Scan::prefix(Table::Pipelines, b"", usize::MAX))?
            .iter()
            .map(|(_, v)| decode("pipelines", v))
            .collect()
    }

    /// Sets a meta value.
    pub fn set_meta<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let op = KvOp::Put(Table::Meta, key.as_bytes().to_vec(), encode(value));
        self.state.apply(None, vec![op])?;
        Ok(())
    }

    /// Reads a meta value.
    pub fn meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        self.state
            .get(Table::Meta, key.as_bytes())?
            .map(|v| decode("meta", &v))
            .transpose()
    }

    /// Next value of a named counter (starting at 1), never the same twice.
    pub fn next_id(&self, counter: &str) -> Result<u64, StoreError> {
        self.state.next_counter(counter)
    }
}
