//! `shortest-first`: priority by time limit, shortest first (jobs without a limit
//! last). With `"replace": true` (default) it ignores the previous scores of the
//! chain; with `false` it adds `weight × (−time limit in hours)` to them.
//! Config: `{"replace": true, "weight": 1.0}`.
#![deny(missing_docs)]

use gantry_sdk::{Cycle, Job, Metadata, Plugin, Priority, Scored, Stage};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    replace: bool,
    weight: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            replace: true,
            weight: 1.0,
        }
    }
}

/// Shortest time limit first.
#[derive(Debug, Default)]
pub struct ShortestFirst {
    config: Config,
}

/// Hours assumed for a job without a time limit (sorts after every limited job).
const NO_LIMIT_HOURS: f64 = 1e9;

impl Plugin for ShortestFirst {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "shortest-first",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Priority],
            r#"{"replace": bool (default true), "weight": f64 (default 1.0)}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        self.config = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }
}

impl Priority for ShortestFirst {
    fn score(
        &mut self,
        _ctx: &Cycle,
        jobs: &[Job],
        previous: &[f64],
    ) -> Result<Vec<Scored>, String> {
        Ok(jobs
            .iter()
            .zip(previous)
            .map(|(j, prev)| {
                let hours = if j.time_limit_s == 0 {
                    NO_LIMIT_HOURS
                } else {
                    j.time_limit_s as f64 / 3600.0
                };
                let own = -hours * self.config.weight;
                Scored {
                    score: if self.config.replace { own } else { prev + own },
                    tier: None,
                    note: None,
                }
            })
            .collect())
    }
}

gantry_sdk::export_plugin!(ShortestFirst, stages: [priority]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_limits_score_higher_and_unlimited_last() {
        let jobs = [
            Job {
                id: 1,
                time_limit_s: 7200,
                ..Default::default()
            },
            Job {
                id: 2,
                time_limit_s: 60,
                ..Default::default()
            },
            Job {
                id: 3,
                time_limit_s: 0,
                ..Default::default()
            },
        ];
        let s = ShortestFirst::default()
            .score(&Cycle::default(), &jobs, &[0.0; 3])
            .unwrap();
        assert!(s[1].score > s[0].score && s[0].score > s[2].score);
    }
}
