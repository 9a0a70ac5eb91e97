//! On-disk cache of compiled components, keyed by the component's sha256 and the
//! engine's precompile compatibility hash (so a wasmtime upgrade or a config change
//! never loads a stale artifact). A Python or JS component takes ~10 s to compile and
//! milliseconds to load from here.
//!
//! Owns: where compiled components are stored and when a stored one is loaded. A compiled
//! file is native code, so it is loaded only from a directory and a file that only this
//! process's effective user can write (`trust`): an untrusted directory is not used at
//! all (components are compiled in memory, with a warning), and an untrusted file (group-
//! or other-writable, someone else's, a symlink, not a regular file) is recompiled and
//! replaced by a private one.

mod trust;

use crate::LoadError;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Loaded from a trusted cache file.
    Cache,
    /// Compiled, and stored in the cache.
    Compiled,
    /// Compiled in memory: no cache, or the cache directory is not trusted.
    InMemory,
}

fn compat_key(engine: &Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn entry(dir: &Path, engine: &Engine, sha256: &str) -> PathBuf {
    dir.join(format!("{sha256}-{}.cwasm", compat_key(engine)))
}

fn compile_in_memory(engine: &Engine, bytes: &[u8]) -> Result<Component, LoadError> {
    Component::new(engine, bytes).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))
}

/// Loads the compiled component for `bytes`, compiling and storing it on a miss.
pub(crate) fn compile(
    engine: &Engine,
    dir: Option<&Path>,
    sha256: &str,
    bytes: &[u8],
) -> Result<Component, LoadError> {
    compile_from(engine, dir, sha256, bytes).map(|(c, _)| c)
}

/// [`compile`], saying where the component came from.
pub(crate) fn compile_from(
    engine: &Engine,
    dir: Option<&Path>,
    sha256: &str,
    bytes: &[u8],
) -> Result<(Component, Origin), LoadError> {
    let Some(dir) = dir else {
        return Ok((compile_in_memory(engine, bytes)?, Origin::InMemory));
    };
    if let Err(why) = trust::private_dir(dir) {
        tracing::warn!(
            dir = %dir.display(),
            "not using the compiled-component cache ({why}): compiling in memory; make it the daemon user's, mode 0700"
        );
        return Ok((compile_in_memory(engine, bytes)?, Origin::InMemory));
    }
    let path = entry(dir, engine, sha256);
    match trust::open_private_file(&path) {
        Ok(Some(file)) => match deserialize(engine, file) {
            Ok(c) => return Ok((c, Origin::Cache)),
            Err(e) => {
                tracing::warn!(path = %path.display(), "discarding unusable compiled component: {e:#}")
            }
        },
        Ok(None) => {}
        Err(why) => {
            tracing::warn!(path = %path.display(), "not loading a compiled component ({why}): recompiling it")
        }
    }
    let component = compile_in_memory(engine, bytes)?;
    let stored = component
        .serialize()
        .map_err(|e| format!("{e:#}"))
        .and_then(|s| trust::write_private(&path, &s).map_err(|e| e.to_string()));
    if let Err(e) = stored {
        tracing::warn!(path = %path.display(), "could not store a compiled component: {e}");
    }
    Ok((component, Origin::Compiled))
}

/// Reads a trusted, already opened cache file and loads it.
fn deserialize(engine: &Engine, mut file: std::fs::File) -> wasmtime::Result<Component> {
    let mut serialized = Vec::new();
    file.read_to_end(&mut serialized)?;
    // SAFETY: the bytes come from a regular file, opened without following symlinks, in
    // a directory that only this process's user can write, both owned by that user and
    // writable by no one else: so this process's own `Component::serialize` (the name
    // carries the engine's compatibility hash) wrote it. wasmtime also checks the header.
    unsafe { Component::deserialize(engine, &serialized) }
}

/// sha256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests;
