//! Example organisation policy (placement): keep GPU 0 of every node free for
//! interactive jobs (notebooks, debugging sessions) unless no interactive job waits.
//!
//! While an interactive job is in the queue, batch and service jobs are placed as if
//! the reserved GPU of every node were taken; interactive jobs may use every GPU (a
//! whole-GPU request takes the lowest free indices, so the reserved one first). When
//! no interactive job waits, the reservation is lifted and everything is first-fit.
//! Jobs are placed in the host's priority order; with `strict` (default) placement
//! stops at the first job that does not fit.
//!
//! Config: `{"reserved_index": 0, "strict": true}`.
#![deny(missing_docs)]

use gantry_sdk::{
    ClusterModel, Cycle, GpuShare, Job, JobKind, MILLI_PER_GPU, Metadata, Node, Pending, Placement,
    Plan, Plugin, Reason, ReasonCode, RunningJob, Stage, Start, TaskAllocation, TaskGroup,
};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    reserved_index: u32,
    strict: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            reserved_index: 0,
            strict: true,
        }
    }
}

/// Keeps one GPU per node for interactive work.
#[derive(Debug, Default)]
pub struct Gpu0Reserve {
    config: Config,
}

impl Plugin for Gpu0Reserve {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "gpu0-reserve",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Placement],
            r#"{"reserved_index": u32 (default 0), "strict": bool (default true)}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        self.config = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }
}

/// Books whatever is free of the reserved GPU on every node, so other jobs cannot take it.
fn hold_reserved(
    model: &mut ClusterModel,
    nodes: &[Node],
    index: u32,
) -> Vec<(TaskGroup, TaskAllocation)> {
    let mut held = Vec::new();
    for n in nodes {
        let Some(g) = n
            .gpus
            .iter()
            .find(|g| g.index == index && g.healthy && g.free_milli > 0)
        else {
            continue;
        };
        let whole = g.free_milli == MILLI_PER_GPU;
        let group = TaskGroup {
            count: 1,
            gpus: u32::from(whole),
            gpu_milli: if whole { 0 } else { g.free_milli },
            ..Default::default()
        };
        let alloc = TaskAllocation {
            node: n.id,
            gpus: vec![GpuShare {
                index,
                milli: g.free_milli,
            }],
            cpu_milli: 0,
            memory_mib: 0,
        };
        if model.take(&group, &alloc).is_ok() {
            held.push((group, alloc));
        }
    }
    held
}

impl Placement for Gpu0Reserve {
    fn place(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        nodes: &[Node],
        _running: &[RunningJob],
    ) -> Result<Plan, String> {
        let reserve = jobs.iter().any(|j| j.kind == JobKind::Interactive);
        let mut model = ClusterModel::new(ctx, nodes);
        let mut held = if reserve {
            hold_reserved(&mut model, nodes, self.config.reserved_index)
        } else {
            Vec::new()
        };
        let mut plan = Plan::default();
        for job in jobs {
            let interactive = job.kind == JobKind::Interactive;
            if interactive {
                for (_, a) in held.drain(..) {
                    model.release(&a);
                }
            }
            let fit = model.fit_gang(ctx, job);
            if interactive && reserve {
                // Hold again the reserved GPUs this job left untouched, for the jobs behind it.
                held = hold_reserved(&mut model, nodes, self.config.reserved_index);
            }
            match fit {
                Ok(tasks) => plan.starts.push(Start { job: job.id, tasks }),
                Err(mut reason) => {
                    if reserve && !interactive && reason.code == ReasonCode::InsufficientGpus {
                        reason = Reason::new(
                            reason.code,
                            format!(
                                "{} (GPU {} of every node is kept for interactive jobs while one waits)",
                                reason.message, self.config.reserved_index
                            ),
                        );
                    }
                    plan.pending.push(Pending {
                        job: job.id,
                        reason,
                    });
                    if self.config.strict {
                        plan.stopped_at = Some(job.id);
                        break;
                    }
                }
            }
        }
        Ok(plan)
    }
}

gantry_sdk::export_plugin!(Gpu0Reserve, stages: [placement]);

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::{Gpu, NodeState};

    fn ctx() -> Cycle {
        Cycle {
            strings: vec!["fake".into()],
            gpu_models: vec![0],
            ..Default::default()
        }
    }

    fn node(id: u32, gpus: u32) -> Node {
        Node {
            id,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 20,
            gpus: (0..gpus)
                .map(|index| Gpu {
                    index,
                    model: 0,
                    memory_mib: 1,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn job(id: u64, gpus: u32, kind: JobKind) -> Job {
        Job {
            id,
            kind,
            tasks: vec![TaskGroup {
                count: 1,
                gpus,
                cpu_milli: 100,
                memory_mib: 10,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn gpus_of(plan: &Plan, id: u64) -> Vec<u32> {
        plan.starts
            .iter()
            .find(|s| s.job == id)
            .map(|s| s.tasks[0].gpus.iter().map(|g| g.index).collect())
            .unwrap_or_default()
    }

    #[test]
    fn batch_jobs_avoid_gpu0_while_an_interactive_job_waits() {
        let jobs = [
            job(1, 2, JobKind::Batch),
            job(2, 1, JobKind::Interactive),
            job(3, 1, JobKind::Batch),
        ];
        let plan = Gpu0Reserve::default()
            .place(&ctx(), &jobs, &[node(0, 4)], &[])
            .unwrap();
        assert_eq!(gpus_of(&plan, 1), vec![1, 2]);
        assert_eq!(
            gpus_of(&plan, 2),
            vec![0],
            "the interactive job gets the reserved GPU"
        );
        assert_eq!(gpus_of(&plan, 3), vec![3]);
    }

    #[test]
    fn reservation_holds_even_when_batch_jobs_come_first_and_fill_the_rest() {
        let jobs = [
            job(1, 3, JobKind::Batch),
            job(2, 1, JobKind::Batch),
            job(3, 1, JobKind::Interactive),
        ];
        let plan = Gpu0Reserve::default()
            .place(&ctx(), &jobs, &[node(0, 4)], &[])
            .unwrap();
        assert_eq!(gpus_of(&plan, 1), vec![1, 2, 3]);
        assert_eq!(
            plan.pending[0].job, 2,
            "no batch job may take GPU 0 while job 3 waits"
        );
        assert!(
            plan.pending[0]
                .reason
                .message
                .contains("kept for interactive"),
            "{:?}",
            plan.pending
        );
        let mut lenient = Gpu0Reserve::default();
        lenient.configure(r#"{"strict": false}"#).unwrap();
        let plan = lenient.place(&ctx(), &jobs, &[node(0, 4)], &[]).unwrap();
        assert_eq!(gpus_of(&plan, 3), vec![0]);
    }

    #[test]
    fn without_interactive_jobs_gpu0_is_used() {
        let jobs = [job(1, 4, JobKind::Batch)];
        let plan = Gpu0Reserve::default()
            .place(&ctx(), &jobs, &[node(0, 4)], &[])
            .unwrap();
        assert_eq!(gpus_of(&plan, 1), vec![0, 1, 2, 3]);
    }
}
