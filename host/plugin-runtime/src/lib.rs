//! `gantry-plugin-runtime`: the only crate that touches wasmtime.
//!
//! Owns: one [`Runtime`] per process (a wasmtime `Engine` with epoch interruption and
//! a 10 ms ticker, a linker with the `host` import and WASI on an empty context, whose
//! clocks and polls never block the host: `nonblocking`),
//! loading components from bytes ([`Runtime::load`]: compile once, cached on disk by
//! sha256 and engine compatibility hash, checked for contract version and exported
//! stages), and sandboxed instances ([`PluginInstance`]) that implement the engine's
//! stage traits with a deadline and a memory cap per call, typed faults, and a fresh
//! instance after any trap.
//!
//! Does not own: which plugins form a pipeline (the daemon), or what a fault means for
//! the cycle (the engine).
#![deny(missing_docs)]

mod bindings;
mod bindings_v02;
mod bindings_v03;
mod cache;
mod calls_delta;
mod calls_v01;
mod convert;
mod instance;
mod limits;
mod loader;
mod mirror;
mod nonblocking;
mod runtime;

pub use instance::PluginInstance;
pub use mirror::MirrorStats;
pub use runtime::{LoadedPlugin, Runtime, RuntimeOptions};

use gantry_engine::PolicyFault;

/// Limits applied to every call of one plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline per call in ms (default 100).
    pub deadline_ms: u64,
    /// Cap on the instance's total linear memory and tables in MiB (default 256; a table
    /// element counts as 16 bytes).
    pub memory_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline_ms: 100,
            memory_mib: 256,
        }
    }
}

/// Why a component could not be loaded or configured.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not a valid WebAssembly component.
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// The component targets a contract version this host does not support.
    #[error("contract version mismatch: {0}")]
    VersionMismatch(String),
    /// A required export is missing or the declared stages are not exported.
    #[error("{0}")]
    MissingExport(String),
    /// The component imports something the sandbox does not offer.
    #[error("cannot link the component (it imports something the sandbox does not offer): {0}")]
    Link(String),
    /// `metadata` or `configure` failed.
    #[error("plugin {plugin}: {fault}")]
    Fault {
        /// Plugin name (or sha256 before metadata is known).
        plugin: String,
        /// The failure.
        fault: PolicyFault,
    },
    /// The compiled-artifact cache failed.
    #[error("compile cache: {0}")]
    Cache(String),
}
