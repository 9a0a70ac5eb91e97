//! `first-fit`: places jobs in the priority order the host gives, each gang on the
//! first nodes (in node order) where all its tasks fit, all or nothing. Whole GPUs
//! take free devices; fractions take the fullest GPU that still has room (best fit).
//!
//! Config: `{"strict": true}` (default). Strict: once a job does not fit, no job behind
//! it starts this cycle (no starvation of large jobs; SLURM's behaviour without
//! backfill). `false`: skip jobs that do not fit and keep going.
#![deny(missing_docs)]

use gantry_sdk::{
    ClusterModel, Cycle, Job, Metadata, Node, Pending, Placement, Plan, Plugin, RunningJob, Stage,
    Start,
};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    strict: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self { strict: true }
    }
}

/// First fit, in strict priority order by default.
#[derive(Debug, Default)]
pub struct FirstFit {
    config: Config,
}

impl Plugin for FirstFit {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "first-fit",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Placement],
            r#"{"strict": bool (default true)}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        self.config = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }
}

impl Placement for FirstFit {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        _running: &[RunningJob],
    ) -> Result<Plan, String> {
        let mut cluster = ClusterModel::new(ctx, nodes);
        let mut plan = Plan::default();
        for job in jobs {
            match cluster.fit_gang(ctx, job) {
                Ok(tasks) => plan.starts.push(Start { job: job.id, tasks }),
                Err(reason) => {
                    plan.pending.push(Pending {
                        job: job.id,
                        reason,
                    });
                    if self.config.strict {
                        // Every later job waits behind this one; the host says so.
                        plan.stopped_at = Some(job.id);
                        break;
                    }
                }
            }
        }
        Ok(plan)
    }
}

gantry_sdk::export_plugin!(FirstFit, stages: [placement]);

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::{Gpu, NodeState, ReasonCode, TaskGroup};

    fn node(id: u32, gpus: u32) -> Node {
        Node {
            id,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 20,
            gpus: (0..gpus)
                .map(|i| Gpu {
                    index: i,
                    model: 0,
                    memory_mib: 80_000,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn job(id: u64, count: u32, gpus: u32) -> Job {
        Job {
            id,
            tasks: vec![TaskGroup {
                count,
                gpus,
                cpu_milli: 1000,
                memory_mib: 1024,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn ctx() -> Cycle {
        Cycle {
            strings: vec!["fake".into()],
            gpu_models: vec![0],
            ..Default::default()
        }
    }

    #[test]
    fn strict_blocks_behind_the_first_job_that_does_not_fit() {
        let mut p = FirstFit::default();
        let plan = p
            .place(
                &ctx(),
                &[job(1, 1, 2), job(2, 1, 4), job(3, 1, 1)],
                &[node(0, 4)],
                &[],
            )
            .unwrap();
        assert_eq!(plan.starts.len(), 1);
        assert_eq!(plan.pending.len(), 1);
        assert_eq!(plan.pending[0].reason.code, ReasonCode::InsufficientGpus);
        assert_eq!(plan.stopped_at, Some(2));
    }

    #[test]
    fn non_strict_skips_and_gang_spans_nodes() {
        let mut p = FirstFit::default();
        p.configure(r#"{"strict": false}"#).unwrap();
        let plan = p
            .place(
                &ctx(),
                &[job(1, 3, 4), job(2, 2, 4), job(3, 1, 2)],
                &[node(0, 4), node(1, 4)],
                &[],
            )
            .unwrap();
        let started: Vec<u64> = plan.starts.iter().map(|s| s.job).collect();
        assert_eq!(started, vec![2]);
        assert_eq!(plan.starts[0].tasks[0].node, 0);
        assert_eq!(plan.starts[0].tasks[1].node, 1);
    }

    #[test]
    fn unknown_config_field_is_rejected() {
        let err = FirstFit::default()
            .configure(r#"{"strikt": true}"#)
            .unwrap_err();
        assert!(err.contains("strikt"), "{err}");
    }
}
