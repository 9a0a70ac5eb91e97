//! `gantry-sim`, the front end of `gantry simulate`: replays a workload on a simulated cluster through real policy
//! pipelines (wasm components as the daemon runs them, or natively compiled) on the
//! engine's virtual clock, and writes a JSON report, a summary table and SVG plots.
//!
//! Owns: input files, building pipelines for a run (wasm through the plugin registry of
//! `gantry-policy`, as the daemon builds them, or the built-in plugin crates linked
//! natively: the only crate that links them), reports and plots. Does not own the
//! simulation itself (`gantry_engine::sim`) or any decision (the plugins). Uses
//! `gantry-api` for the job model, `gantry-policy` for the registry and pipeline specs and
//! `gantry-config` for pipeline files; it does not depend on the daemon library
//! (`scripts/crate-rules` checks it), and the daemon does not know this crate. See
//! `ARCHITECTURE.md`.
#![forbid(unsafe_code)]

pub mod command;
pub mod csv;
pub mod fgd_grid;
pub mod fgd_target;
pub mod fgd_workload;
pub mod openb;
pub mod pipelines;
pub mod progress;
pub mod report;
pub mod rng;
pub mod workload;
