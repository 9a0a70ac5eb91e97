//! `fifo`: priority by submit time. Earlier jobs score higher; ties fall to the
//! host's order (submit time, then id). Ignores the previous scores of a chain.
//! Config: none (`{}`).
#![deny(missing_docs)]

use gantry_sdk::{Cycle, Job, Metadata, Plugin, Priority, Scored, Stage};

/// First in, first out.
#[derive(Debug, Default)]
pub struct Fifo;

impl Plugin for Fifo {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "fifo",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Priority],
            "no config",
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let _: serde_json::Map<String, serde_json::Value> = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }
}

impl Priority for Fifo {
    fn score(
        &mut self,
        _ctx: &Cycle,
        jobs: &[Job],
        _previous: &[f64],
    ) -> Result<Vec<Scored>, String> {
        Ok(jobs
            .iter()
            .map(|j| Scored {
                score: -(j.submit_ms as f64),
                tier: None,
                note: None,
            })
            .collect())
    }
}

gantry_sdk::export_plugin!(Fifo, stages: [priority]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_submit_scores_higher() {
        let jobs = [
            Job {
                id: 1,
                submit_ms: 2_000,
                ..Default::default()
            },
            Job {
                id: 2,
                submit_ms: 1_000,
                ..Default::default()
            },
        ];
        let s = Fifo.score(&Cycle::default(), &jobs, &[0.0, 0.0]).unwrap();
        assert!(s[1].score > s[0].score);
    }
}
