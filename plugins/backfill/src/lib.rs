//! `backfill`: EASY backfill on time limits, as a placement plugin.
//!
//! Jobs are walked in the host's priority order. A job that fits now starts. The first
//! job that does not (the first `conservative` ones) gets a reservation at the
//! earliest instant enough resources free up, computed from running jobs'
//! `expected_end_ms` (a running job without a time limit never frees its resources for
//! planning) and from the reservations' own future. A later job may start now only if
//! it does not delay a reservation: it ends (by its time limit) before the reserved
//! start, or it uses only resources the reserved job does not need then. Gangs are
//! all or nothing, across nodes. Nodes and GPUs are chosen by `scoring`.
//!
//! Config (all optional, unknown keys are an error):
//! `{"conservative": 1, "window_s": 604800, "max_jobs": 1000, "scoring": "binpack"}`;
//! see the crate README for the semantics and the node labels read under
//! `"scoring": "topology"` (`rack`, `switch`, `gantry.io/gpu-groups`).
//!
//! Owns: the plugin's identity and config. Modules: `plan` (the walk), `reserve`
//! (reservation search), `timeline` (free resources over time), `scoring` and `gang`
//! (node choice), `gpus` (GPU choice), `topology` (labels), `reason` (messages).
#![deny(missing_docs)]

mod gang;
pub mod gpus;
mod plan;
pub mod reason;
pub mod reserve;
pub mod scoring;
pub mod timeline;
pub mod topology;

#[cfg(test)]
mod tests;

pub use plan::MAX_FAILED_SEARCHES;
pub use scoring::Scoring;
pub use topology::{GPU_GROUPS_LABEL, RACK_LABEL, SWITCH_LABEL};

use gantry_sdk::{Cycle, Job, Metadata, Node, Placement, Plan, Plugin, RunningJob, Stage};
use serde::Deserialize;

/// The plugin's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Reservations for the first N blocked jobs (1 = EASY; 0 = none, plain skipping).
    pub conservative: u32,
    /// How far ahead reservations are planned, seconds.
    pub window_s: u64,
    /// Jobs tested per cycle; the rest wait with "not tested this cycle".
    pub max_jobs: u32,
    /// Node and GPU choice.
    pub scoring: Scoring,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            conservative: 1,
            window_s: 7 * 24 * 3600,
            max_jobs: 1000,
            scoring: Scoring::Binpack,
        }
    }
}

/// The backfill placement plugin.
#[derive(Debug, Default)]
pub struct Backfill {
    config: Config,
}

impl Plugin for Backfill {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "backfill",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Placement],
            r#"{"conservative": u32 (default 1 = EASY), "window_s": u64 (default 604800), "max_jobs": u32 (default 1000), "scoring": "binpack" | "spread" | "topology" (default "binpack")}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let config: Config = gantry_sdk::parse_config(config_json)?;
        if config.max_jobs == 0 {
            return Err("invalid config: max_jobs must be at least 1".into());
        }
        self.config = config;
        Ok(())
    }
}

impl Placement for Backfill {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Plan, String> {
        plan::place(&self.config, ctx, jobs, nodes, running)
    }
}

gantry_sdk::export_plugin!(Backfill, stages: [placement]);
