//! `gantry-sdk`: write a Gantry policy plugin in Rust.
//!
//! Implement [`Plugin`] and the trait of each stage you want ([`Admission`],
//! [`Priority`], [`Placement`], [`Preemption`]) over the plain types of
//! [`gantry_contract`], then register with one line:
//!
//! ```ignore
//! gantry_sdk::export_plugin!(MyPolicy, stages: [priority]);
//! ```
//!
//! The same crate compiles natively (unit-test your logic with `cargo test`; the host
//! can run it in-process) and to a `wasm32-wasip2` component (`cargo build --target
//! wasm32-wasip2 --release`), which is what Gantry loads. Placement authors get a
//! tentative [`ClusterModel`] with all-or-nothing [`ClusterModel::fit_gang`].
//!
//! Owns: the stage registry ([`DynPlugin`]), the export macro, config parsing and
//! logging helpers, and (on wasm32 only) the WIT bindings and their conversions.
//! Does not own: the contract types (re-exported from `gantry-contract`).
#![deny(missing_docs)]

pub use gantry_contract::*;

pub mod changes;

#[cfg(all(target_arch = "wasm32", feature = "contract-0-1"))]
#[doc(hidden)]
pub mod wasm;
#[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
#[doc(hidden)]
pub mod wasm_delta;
#[cfg(target_arch = "wasm32")]
mod wasm_instance;

/// The contract version a component built with this SDK exports: `0.3.0` (incremental
/// inputs, MIG slices name their GPU), `0.2.0` with the feature `contract-0-2`, or `0.1.0`
/// with `contract-0-1` (which wins over `contract-0-2`). The stage traits are the same.
#[cfg(not(any(feature = "contract-0-1", feature = "contract-0-2")))]
pub const SDK_CONTRACT: &str = "0.3.0";
/// The contract version a component built with this SDK exports (feature `contract-0-2`).
#[cfg(all(feature = "contract-0-2", not(feature = "contract-0-1")))]
pub const SDK_CONTRACT: &str = "0.2.0";
/// The contract version a component built with this SDK exports (feature `contract-0-1`).
#[cfg(feature = "contract-0-1")]
pub const SDK_CONTRACT: &str = "0.1.0";

/// A plugin as the export glue sees it: identity plus whichever stages it implements.
/// Implemented for you by [`export_plugin!`]; the accessors of stages you did not list
/// return `None` and the component answers those calls with an error.
pub trait DynPlugin: Plugin {
    /// The admission stage, if implemented.
    fn as_admission(&mut self) -> Option<&mut dyn Admission> {
        None
    }
    /// The priority stage, if implemented.
    fn as_priority(&mut self) -> Option<&mut dyn Priority> {
        None
    }
    /// The placement stage, if implemented.
    fn as_placement(&mut self) -> Option<&mut dyn Placement> {
        None
    }
    /// The preemption stage, if implemented.
    fn as_preemption(&mut self) -> Option<&mut dyn Preemption> {
        None
    }
}

/// Parses a plugin's JSON config into `T`, treating "" as `{}`, with an error that
/// names the offending field.
pub fn parse_config<T: serde::de::DeserializeOwned>(config_json: &str) -> Result<T, String> {
    let text = if config_json.trim().is_empty() {
        "{}"
    } else {
        config_json
    };
    serde_json::from_str(text).map_err(|e| format!("invalid config: {e}"))
}

/// Writes a line into the plugin's log on the host (a no-op when running natively).
pub fn log(level: LogLevel, message: &str) {
    #[cfg(all(target_arch = "wasm32", feature = "contract-0-1"))]
    wasm::log(level, message);
    #[cfg(all(target_arch = "wasm32", not(feature = "contract-0-1")))]
    wasm_delta::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Builds [`Metadata`] for a plugin of this contract version.
pub fn metadata(name: &str, version: &str, stages: &[Stage], config_hint: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        version: version.to_string(),
        contract: SDK_CONTRACT.to_string(),
        stages: stages.to_vec(),
        config_hint: config_hint.to_string(),
    }
}

#[doc(hidden)]
#[macro_export]
macro_rules! __gantry_stage_accessor {
    (admission) => {
        fn as_admission(&mut self) -> Option<&mut dyn $crate::Admission> {
            Some(self)
        }
    };
    (priority) => {
        fn as_priority(&mut self) -> Option<&mut dyn $crate::Priority> {
            Some(self)
        }
    };
    (placement) => {
        fn as_placement(&mut self) -> Option<&mut dyn $crate::Placement> {
            Some(self)
        }
    };
    (preemption) => {
        fn as_preemption(&mut self) -> Option<&mut dyn $crate::Preemption> {
            Some(self)
        }
    };
}

/// Registers a plugin type (which must implement `Default`, [`Plugin`] and the traits
/// of the listed stages) and, on wasm32, exports it as a `gantry:policy` component.
///
/// `gantry_sdk::export_plugin!(Fifo, stages: [priority]);`
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty, stages: [$($stage:ident),+ $(,)?]) => {
        impl $crate::DynPlugin for $plugin {
            $($crate::__gantry_stage_accessor!($stage);)+
        }

        $crate::__gantry_export_glue!($plugin);
    };
}

// The export glue of the SDK's contract version; chosen here, by the SDK's own feature
// (a `cfg` inside `export_plugin!` would read the plugin crate's features instead).
#[cfg(feature = "contract-0-1")]
#[doc(hidden)]
#[macro_export]
macro_rules! __gantry_export_glue {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        type __GantryExporter = $crate::wasm::Exporter<$plugin>;
        #[cfg(target_arch = "wasm32")]
        $crate::wasm::__export_full_plugin!(__GantryExporter with_types_in $crate::wasm);
    };
}

#[cfg(not(feature = "contract-0-1"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __gantry_export_glue {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        type __GantryExporter = $crate::wasm_delta::Exporter<$plugin>;
        #[cfg(target_arch = "wasm32")]
        $crate::wasm_delta::__export_full_plugin_delta!(__GantryExporter with_types_in $crate::wasm_delta);
    };
}
