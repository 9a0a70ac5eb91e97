//! The process-wide [`Runtime`] (wasmtime engine, linker, epoch ticker, cache of loaded
//! components) and the [`LoadedPlugin`] it hands out: the data both loading (`loader.rs`)
//! and instances (`instance.rs`) share.
//!
//! Owns these types and their accessors. Loading is `loader.rs`'s; instantiating is
//! `instance.rs`'s.

use crate::bindings::{State, admission, placement, plugin, preemption, priority};
use gantry_contract::{Metadata, Stage};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::Engine;
use wasmtime::component::{InstancePre, Linker};

/// How often the epoch advances; deadlines are counted in these ticks.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Options for the runtime.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Where compiled components are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
}

pub(crate) struct Ticker {
    pub(crate) stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(crate) struct RuntimeInner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<State>,
    pub(crate) cache_dir: Option<PathBuf>,
    pub(crate) loaded: Mutex<HashMap<String, LoadedPlugin>>,
    pub(crate) _ticker: Ticker,
}

/// One per process: the wasmtime engine, the linker, the epoch ticker and the cache.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("cache_dir", &self.inner.cache_dir)
            .finish_non_exhaustive()
    }
}

/// Stage interfaces a component exports, looked up once.
#[derive(Clone)]
pub(crate) struct Indices {
    pub(crate) plugin: Arc<plugin::GuestIndices>,
    pub(crate) admission: Option<Arc<admission::GuestIndices>>,
    pub(crate) priority: Option<Arc<priority::GuestIndices>>,
    pub(crate) placement: Option<Arc<placement::GuestIndices>>,
    pub(crate) preemption: Option<Arc<preemption::GuestIndices>>,
}

/// A compiled, checked, pre-instantiated component. Cheap to clone.
#[derive(Clone)]
pub struct LoadedPlugin {
    pub(crate) sha256: String,
    pub(crate) size_bytes: usize,
    pub(crate) imports: Arc<Vec<String>>,
    pub(crate) exports: Arc<Vec<String>>,
    pub(crate) metadata: Metadata,
    pub(crate) pre: InstancePre<State>,
    pub(crate) indices: Indices,
    pub(crate) runtime: Runtime,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("sha256", &self.sha256)
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

impl LoadedPlugin {
    /// sha256 of the component bytes, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
    /// The plugin's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }
    /// The stages it implements (declared and exported).
    pub fn stages(&self) -> &[Stage] {
        &self.metadata.stages
    }
    /// Names of the component's imports (e.g. `wasi:cli/stdout@0.2.6`, `gantry:policy/host@0.1.0`).
    pub fn imports(&self) -> &[String] {
        &self.imports
    }
    /// Size of the component in bytes.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }
    /// Names of the component's exports.
    pub fn exports(&self) -> &[String] {
        &self.exports
    }
}
