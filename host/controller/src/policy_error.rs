//! The error of a policy operation: an invalid spec, a pipeline that fails its dry run,
//! nothing to roll back to, a plugin that does not load, or the store failing. Returned by
//! the hot swaps and uploads (`policy_ops.rs`) and by shadow and replay (`shadow.rs`);
//! `api::policy` maps each case to an HTTP answer.
//!
//! Owns: `PolicyOpError`. Does not own the operations that return it or their HTTP answers.

use gantry_engine::FaultRecord;
use gantry_plugin_runtime::LoadError;
use gantry_policy::PolicyError;
use gantry_store::StoreError;

/// Why a policy operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PolicyOpError {
    /// The spec is invalid (names the field).
    #[error("{0}")]
    Invalid(#[from] PolicyError),
    /// The new pipeline faulted on the current snapshot.
    #[error("the new pipeline failed its dry run on the current snapshot: {}", .0.iter().map(|f| format!("{} at {}: {}", f.plugin.name, f.stage, f.fault)).collect::<Vec<_>>().join("; "))]
    DryRun(Vec<FaultRecord>),
    /// Nothing to roll back to.
    #[error("there is no earlier pipeline version to roll back to")]
    NoPrevious,
    /// The plugin could not be loaded.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// Storage failed.
    #[error("{0}")]
    Store(#[from] StoreError),
}
