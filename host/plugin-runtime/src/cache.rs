//! On-disk cache of compiled components, keyed by the component's sha256 and the
//! engine's precompile compatibility hash (so a wasmtime upgrade or a config change
//! never loads a stale artifact). A Python or JS component takes ~10 s to compile and
//! ~4 ms to load from here.
//!
//! Only files this process wrote are ever deserialized: the directory is the daemon's
//! own data directory.

use crate::LoadError;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

fn compat_key(engine: &Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn entry(dir: &Path, engine: &Engine, sha256: &str) -> PathBuf {
    dir.join(format!("{sha256}-{}.cwasm", compat_key(engine)))
}

/// Loads the compiled component for `bytes`, compiling and storing it on a miss.
pub(crate) fn compile(
    engine: &Engine,
    dir: Option<&Path>,
    sha256: &str,
    bytes: &[u8],
) -> Result<Component, LoadError> {
    let Some(dir) = dir else {
        return Component::new(engine, bytes)
            .map_err(|e| LoadError::NotAComponent(format!("{e:#}")));
    };
    let path = entry(dir, engine, sha256);
    if path.exists() {
        // SAFETY: the file was produced by `Component::serialize` of this process's
        // engine configuration (the name carries the compatibility hash), and lives in
        // the daemon's private data directory; wasmtime additionally checks its header.
        let loaded = unsafe { Component::deserialize_file(engine, &path) };
        match loaded {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), "discarding unusable compiled component: {e:#}")
            }
        }
    }
    let component =
        Component::new(engine, bytes).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
    let serialized = component
        .serialize()
        .map_err(|e| LoadError::Cache(format!("{e:#}")))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| LoadError::Cache(format!("{}: {e}", dir.display())))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serialized)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| LoadError::Cache(format!("{}: {e}", path.display())))?;
    Ok(component)
}
