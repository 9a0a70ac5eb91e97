//! The stage traits: the one Rust definition of each stage's signature. A plugin
//! implements them with the default error, `String` (`gantry-sdk` exports such a type
//! as a wasm component; the engine can run it natively); the host implements the same
//! traits with its typed fault (`gantry_engine::PolicyFault`) for the wasm runtime's
//! instances, the native adapter and the daemon's instrumented wrapper, and the engine's
//! stage traits (`host/engine/src/pipeline.rs`) are these plus an identity.
//!
//! An `Err` is the plugin (or the call) failing; the host records it as a fault and
//! falls back. Rejections and holds are data (`SubmitVerdict`, `Verdict`), not errors.

use crate::stages::{Eviction, Metadata, Plan, Scored, SubmitVerdict, Verdict};
use crate::types::{Cycle, Job, Node, RunningJob};

/// Every plugin: identity and configuration.
pub trait Plugin {
    /// Name, version, contract, stages.
    fn metadata(&self) -> Metadata;
    /// Applies the pipeline's JSON config ("{}" when none).
    fn configure(&mut self, config_json: &str) -> Result<(), String>;
}

/// The admission stage; `E` is what a failed call returns.
pub trait Admission<E = String> {
    /// At submit: accept, accept with defaults, or reject. Accepts by default.
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, E> {
        let _ = (ctx, job);
        Ok(SubmitVerdict::Accept)
    }
    /// Each cycle: one verdict per pending job, in order.
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, E>;
}

/// The priority stage; `E` is what a failed call returns.
pub trait Priority<E = String> {
    /// One score per job, in order; `previous` holds the chain's scores so far.
    fn score(&mut self, ctx: &Cycle, jobs: &[Job], previous: &[f64]) -> Result<Vec<Scored>, E>;
}

/// The placement stage; `E` is what a failed call returns.
pub trait Placement<E = String> {
    /// Starts for ordered `jobs` on `nodes`, and a reason for every job left pending.
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, E>;
}

/// The preemption stage; `E` is what a failed call returns.
pub trait Preemption<E = String> {
    /// Evictions that make room for `blocked` jobs (priority order, scores alongside).
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, E>;
}
