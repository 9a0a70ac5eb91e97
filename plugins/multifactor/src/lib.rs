//! `multifactor`: SLURM's multifactor priority as a Gantry priority plugin.
//!
//! score = Σ weightᵢ × factorᵢ − nice, every factor in [0, 1]: age (waiting time,
//! saturating at `max_age_s`), fair-share (classic `2^(−U/S)` or Fair Tree, from the
//! host's decayed usage against configured account and user shares), job size (GPU
//! demand against the cluster's GPUs, favouring large or small jobs), queue and QoS
//! (job label `qos`) from config tables normalised by their largest value; `nice` is
//! the job label of that name. Each job gets a note with every weighted term and the
//! numbers behind it. The chain's previous scores are ignored (this plugin sets the
//! score); it never sets a tier. See README.md for every config key and default.
//!
//! Owns: the plugin glue (metadata, configure, score). Does not own the factor
//! arithmetic (`factors`, `fairshare`), the weighting and note (`score`) or config
//! parsing (`config`). Usage decay is the host's (7-day half-life); the plugin takes
//! `ctx.user_usage` / `ctx.account_usage` as given and never re-decays.
#![deny(missing_docs)]

pub mod config;
pub mod factors;
pub mod fairshare;
pub mod score;

#[cfg(test)]
mod tests_fairshare;
#[cfg(test)]
mod tests_score;

use gantry_sdk::{Cycle, Job, Metadata, Plugin, Priority, Scored, Stage};

pub use config::{Config, ConfigError};
use score::Scorer;

/// The multifactor priority plugin.
#[derive(Debug, Default)]
pub struct Multifactor {
    scorer: Scorer,
}

impl Multifactor {
    /// A plugin configured with `config_json` (as the pipeline would).
    pub fn with_config(config_json: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            scorer: Scorer::new(Config::parse(config_json)?),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.scorer.config
    }
}

impl Plugin for Multifactor {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "multifactor",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Priority],
            r#"{"weights": {"age": 1000, "fairshare": 10000, "jobsize": 1000, "queue": 1000, "qos": 0}, "max_age_s": 604800, "favor_small": false, "fair_tree": false, "accounts": {"<account>": {"shares": 1, "users": {"<user>": shares}}}, "queues": {"<queue>": factor}, "qos": {"<qos label value>": factor}}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let config = Config::parse(config_json).map_err(|e| e.to_string())?;
        self.scorer = Scorer::new(config);
        Ok(())
    }
}

impl Priority for Multifactor {
    fn score(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        _previous: &[f64],
    ) -> Result<Vec<Scored>, String> {
        Ok(self.scorer.score_all(ctx, jobs))
    }
}

gantry_sdk::export_plugin!(Multifactor, stages: [priority]);
