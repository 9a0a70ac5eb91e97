//! The stage traits a plugin implements. `gantry-sdk` exports a type implementing them
//! as a wasm component; the engine runs the same type natively (tests, benchmarks).
//!
//! An `Err(String)` is the plugin saying it failed; the host records it as a fault and
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

/// The admission stage.
pub trait Admission {
    /// At submit: accept, accept with defaults, or reject. Accepts by default.
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, String> {
        let _ = (ctx, job);
        Ok(SubmitVerdict::Accept)
    }
    /// Each cycle: one verdict per pending job, in order.
    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, String>;
}

/// The priority stage.
pub trait Priority {
    /// One score per job, in order; `previous` holds the chain's scores so far.
    fn score(&mut self, ctx: &Cycle, jobs: &[Job], previous: &[f64])
    -> Result<Vec<Scored>, String>;
}

/// The placement stage.
pub trait Placement {
    /// Starts for ordered `jobs` on `nodes`, and a reason for every job left pending.
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, String>;
}

/// The preemption stage.
pub trait Preemption {
    /// Evictions that make room for `blocked` jobs (priority order, scores alongside).
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, String>;
}
