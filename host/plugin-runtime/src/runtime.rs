//! The process-wide [`Runtime`] (wasmtime engine, linker, epoch ticker, cache of loaded
//! components) and the [`LoadedPlugin`] it hands out: the data both loading (`loader.rs`)
//! and instances (`instance.rs`) share.
//!
//! Owns these types and their accessors. Loading is `loader.rs`'s; instantiating is
//! `instance.rs`'s.

use crate::bindings::{self as v01, State};
use crate::bindings_v02 as v02;
use crate::bindings_v03 as v03;
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

/// A component's `plugin` interface and the stage interfaces it exports, looked up once.
pub(crate) struct Exports<P, A, Pr, Pl, Pe> {
    pub(crate) plugin: Arc<P>,
    pub(crate) admission: Option<Arc<A>>,
    pub(crate) priority: Option<Arc<Pr>>,
    pub(crate) placement: Option<Arc<Pl>>,
    pub(crate) preemption: Option<Arc<Pe>>,
}

impl<P, A, Pr, Pl, Pe> Clone for Exports<P, A, Pr, Pl, Pe> {
    fn clone(&self) -> Self {
        Self {
            plugin: self.plugin.clone(),
            admission: self.admission.clone(),
            priority: self.priority.clone(),
            placement: self.placement.clone(),
            preemption: self.preemption.clone(),
        }
    }
}

impl<P, A, Pr, Pl, Pe> Exports<P, A, Pr, Pl, Pe> {
    /// Whether `stage`'s interface is exported.
    pub(crate) fn has(&self, stage: Stage) -> bool {
        match stage {
            Stage::Admission => self.admission.is_some(),
            Stage::Priority => self.priority.is_some(),
            Stage::Placement => self.placement.is_some(),
            Stage::Preemption => self.preemption.is_some(),
        }
    }
}

/// The exports of a 0.1.0 component.
pub(crate) type Indices01 = Exports<
    v01::plugin::GuestIndices,
    v01::admission::GuestIndices,
    v01::priority::GuestIndices,
    v01::placement::GuestIndices,
    v01::preemption::GuestIndices,
>;

/// The exports of a 0.2.0 component.
pub(crate) type Indices02 = Exports<
    v02::plugin::GuestIndices,
    v02::admission::GuestIndices,
    v02::priority::GuestIndices,
    v02::placement::GuestIndices,
    v02::preemption::GuestIndices,
>;

/// The exports of a 0.3.0 component.
pub(crate) type Indices03 = Exports<
    v03::plugin::GuestIndices,
    v03::admission::GuestIndices,
    v03::priority::GuestIndices,
    v03::placement::GuestIndices,
    v03::preemption::GuestIndices,
>;

/// Which contract a component speaks, with its exports.
#[derive(Clone)]
pub(crate) enum Indices {
    V01(Indices01),
    V02(Indices02),
    V03(Indices03),
}

impl Indices {
    /// Whether `stage`'s interface is exported.
    pub(crate) fn has(&self, stage: Stage) -> bool {
        match self {
            Self::V01(x) => x.has(stage),
            Self::V02(x) => x.has(stage),
            Self::V03(x) => x.has(stage),
        }
    }

    /// The contract version the component speaks.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::V01(_) => "0.1.0",
            Self::V02(_) => "0.2.0",
            Self::V03(_) => "0.3.0",
        }
    }
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
