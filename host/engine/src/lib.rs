//! `gantry-engine`: the pure scheduling core.
//!
//! Owns: the immutable [`Snapshot`] a cycle runs on (and the [`Interner`] that builds
//! its string table), the stage interfaces a pipeline is made of ([`pipeline`]), the
//! cycle itself (admission chain, priority chain, host sort, placement, preemption;
//! [`cycle`]), validation of every plugin decision ([`validate`]), submit-time checks
//! ([`submit`]), and the reason attached to every pending job.
//!
//! Does not own and must not depend on: I/O, clocks, HTTP, storage, wasm, telemetry.
//! Time and randomness arrive in the snapshot; plugins arrive as trait objects.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cycle;
pub mod forecast;
pub mod native;
mod node_count;
mod pending_reason;
pub mod pipeline;
pub mod sim;
pub mod snapshot;
mod stage_calls;
pub mod submit;
pub mod validate;

pub use cycle::{CycleOutcome, PendingReason, StartDecision, run_cycle};
pub use native::Native;
pub use pipeline::{
    AdmissionStage, FaultKind, FaultRecord, Identified, Pipeline, PlacementStage, PluginIdent,
    PolicyFault, PreemptionStage, PriorityStage, StageSlot,
};
pub use snapshot::{EvictionInProgress, Interner, Snapshot};
pub use submit::{SubmitDecision, check_submit, fits_empty_cluster};
pub use validate::{PlanViolation, validate_evictions, validate_plan};
