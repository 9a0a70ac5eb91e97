//! The process-wide [`Runtime`] and loading components into [`LoadedPlugin`]s:
//! compile (or fetch from cache), check the contract version and exports, link,
//! pre-instantiate, and read the plugin's metadata.

use crate::bindings::{self as v01, State};
use crate::bindings_v02 as v02;
use crate::bindings_v03 as v03;
pub use crate::cache::sha256_hex;
use crate::instance::PluginInstance;
use crate::nonblocking::{self, NonBlocking};
use crate::runtime::{
    EPOCH_TICK, Exports, Indices, LoadedPlugin, Runtime, RuntimeInner, RuntimeOptions, Ticker,
};
use crate::{LoadError, cache};
use gantry_contract::{Metadata, compatible_versions, is_compatible, served_as};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};

const PACKAGE: &str = "gantry:policy";

/// The export indices of a pre-instantiated component, in bindings module `$v`'s types:
/// `plugin` must be there (`$idx` makes the error), a stage's interface may be missing.
macro_rules! exports_of {
    ($v:ident, $pre:expr, $idx:expr) => {
        Exports {
            plugin: Arc::new($v::plugin::GuestIndices::new($pre).map_err($idx)?),
            admission: $v::admission::GuestIndices::new($pre).ok().map(Arc::new),
            priority: $v::priority::GuestIndices::new($pre).ok().map(Arc::new),
            placement: $v::placement::GuestIndices::new($pre).ok().map(Arc::new),
            preemption: $v::preemption::GuestIndices::new($pre).ok().map(Arc::new),
        }
    };
}

impl Runtime {
    /// Makes the engine, the linker and the epoch ticker.
    pub fn new(options: RuntimeOptions) -> Result<Self, LoadError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        if std::env::var_os("GANTRY_WASM_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine =
            Engine::new(&config).map_err(|e| LoadError::Cache(format!("engine: {e:#}")))?;
        let mut linker: Linker<State> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| {
                nonblocking::shadow_blocking_wasi(&mut linker, |s: &mut State| {
                    NonBlocking::new(&mut s.table)
                })
            })
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        v01::FullPlugin::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .and_then(|()| {
                v02::FullPlugin::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            })
            .and_then(|()| {
                v03::FullPlugin::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            })
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.clone();
        let ticker_stop = stop.clone();
        std::thread::Builder::new()
            .name("gantry-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    ticker_engine.increment_epoch();
                }
            })
            .map_err(|e| LoadError::Cache(format!("epoch ticker: {e}")))?;
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                cache_dir: options.cache_dir,
                loaded: Mutex::new(HashMap::new()),
                _ticker: Ticker { stop },
            }),
        })
    }

    /// Loads (or returns the already loaded) component for `bytes`.
    pub fn load(&self, bytes: &[u8]) -> Result<LoadedPlugin, LoadError> {
        let sha = sha256_hex(bytes);
        if let Some(p) = self
            .inner
            .loaded
            .lock()
            .ok()
            .and_then(|m| m.get(&sha).cloned())
        {
            return Ok(p);
        }
        let plugin = self.load_uncached(&sha, bytes)?;
        if let Ok(mut m) = self.inner.loaded.lock() {
            m.insert(sha, plugin.clone());
        }
        Ok(plugin)
    }

    fn load_uncached(&self, sha: &str, bytes: &[u8]) -> Result<LoadedPlugin, LoadError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(LoadError::NotAComponent(
                "the bytes do not start with the WebAssembly magic number".into(),
            ));
        }
        let engine = &self.inner.engine;
        let component = cache::compile(engine, self.inner.cache_dir.as_deref(), sha, bytes)?;
        let version = check_contract_exports(engine, &component)?;
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Link(format!("{e:#}")))?;
        let idx = |e: wasmtime::Error| LoadError::MissingExport(format!("{e:#}"));
        let indices = match version {
            "0.1.0" => Indices::V01(exports_of!(v01, &pre, idx)),
            "0.2.0" => Indices::V02(exports_of!(v02, &pre, idx)),
            _ => Indices::V03(exports_of!(v03, &pre, idx)),
        };
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let mut plugin = LoadedPlugin {
            sha256: sha.to_string(),
            size_bytes: bytes.len(),
            imports: Arc::new(imports),
            exports: Arc::new(exports),
            metadata: Metadata {
                name: sha.chars().take(12).collect(),
                version: String::new(),
                contract: String::new(),
                stages: Vec::new(),
                config_hint: String::new(),
            },
            pre,
            indices,
            runtime: self.clone(),
        };
        let metadata = PluginInstance::read_metadata(&plugin)?;
        check_metadata(&plugin.indices, &metadata)?;
        plugin.metadata = metadata;
        Ok(plugin)
    }
}

/// Every `gantry:policy/*` export must be of one version this host serves; that version.
fn check_contract_exports(
    engine: &Engine,
    component: &wasmtime::component::Component,
) -> Result<&'static str, LoadError> {
    let ty = component.component_type();
    let names: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let ours: Vec<&String> = names.iter().filter(|n| n.starts_with(PACKAGE)).collect();
    if ours.is_empty() {
        return Err(LoadError::MissingExport(format!(
            "the component exports no {PACKAGE} interface (exports: {}); build it against wit/<version>/ of this repository",
            names.join(", ")
        )));
    }
    let mut seen: Option<&'static str> = None;
    for name in ours {
        let version = name.rsplit_once('@').map(|(_, v)| v).unwrap_or("");
        let Some(served) = served_as(version) else {
            return Err(LoadError::VersionMismatch(format!(
                "the component exports {name}; this host serves {PACKAGE} {}",
                compatible_versions()
            )));
        };
        if seen.is_some_and(|s| s != served) {
            return Err(LoadError::VersionMismatch(format!(
                "the component exports {PACKAGE} interfaces of two versions ({name} beside {})",
                seen.unwrap_or_default()
            )));
        }
        seen = Some(served);
    }
    seen.ok_or_else(|| LoadError::MissingExport(format!("no {PACKAGE} export")))
}

fn check_metadata(indices: &Indices, m: &Metadata) -> Result<(), LoadError> {
    if !is_compatible(&m.contract) {
        return Err(LoadError::VersionMismatch(format!(
            "plugin {} says it was built for contract {}; this host serves {}",
            m.name,
            m.contract,
            compatible_versions()
        )));
    }
    let speaks = indices.version();
    if served_as(&m.contract) != Some(speaks) {
        return Err(LoadError::VersionMismatch(format!(
            "plugin {} says it was built for contract {} but exports {PACKAGE}@{speaks}",
            m.name, m.contract
        )));
    }
    if m.stages.is_empty() {
        return Err(LoadError::MissingExport(format!(
            "plugin {} declares no stage",
            m.name
        )));
    }
    for stage in &m.stages {
        let exported = indices.has(*stage);
        if !exported {
            return Err(LoadError::MissingExport(format!(
                "plugin {} declares the {stage} stage but does not export {PACKAGE}/{stage}",
                m.name
            )));
        }
    }
    Ok(())
}
