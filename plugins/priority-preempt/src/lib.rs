//! `priority-preempt`: when the highest-priority blocked job cannot start, evict the
//! fewest lowest-priority preemptible running jobs that free enough room for it.
//!
//! Victims must rank strictly below the blocked job by (tier, score), lowest priority
//! first (most recently started first among equals). The plugin first looks for the
//! smallest set of up to [`EXACT_SEARCH_MAX`] victims among the [`EXACT_SEARCH_POOL`]
//! lowest-priority candidates (fewest victims, then lowest priority); when no such
//! set frees enough, it adds candidates in order until the gang fits and then drops
//! every victim that is not needed. Only the first blocked job is served per cycle.
//!
//! Config: `{"grace_s": 30}` (seconds between SIGTERM and SIGKILL, default 30).
#![deny(missing_docs)]

use gantry_sdk::{
    ClusterModel, Cycle, Eviction, Job, Metadata, Node, Plugin, Preemption, Reason, ReasonCode,
    RunningJob, Stage,
};
use serde::Deserialize;
use std::cmp::Ordering;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    grace_s: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self { grace_s: 30 }
    }
}

/// Priority preemption.
#[derive(Debug, Default)]
pub struct PriorityPreempt {
    config: Config,
}

impl Plugin for PriorityPreempt {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "priority-preempt",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Preemption],
            r#"{"grace_s": u32 seconds (default 30)}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        self.config = gantry_sdk::parse_config(config_json)?;
        Ok(())
    }
}

fn rank(tier: i32, score: f64) -> (i32, f64) {
    (tier, score)
}

fn lower(a: (i32, f64), b: (i32, f64)) -> bool {
    match a.0.cmp(&b.0) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a.1 < b.1,
    }
}

fn fits_without(ctx: &Cycle, nodes: &[Node], victims: &[&RunningJob], job: &Job) -> bool {
    let mut model = ClusterModel::new(ctx, nodes);
    for v in victims {
        for a in &v.tasks {
            model.release(a);
        }
    }
    model.fit_gang(ctx, job).is_ok()
}

impl Preemption for PriorityPreempt {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, String> {
        let (Some(job), Some(&score)) = (blocked.first(), blocked_scores.first()) else {
            return Ok(Vec::new());
        };
        let want = rank(job.tier, score);
        let mut candidates: Vec<&RunningJob> = running
            .iter()
            .filter(|r| r.job.preemptible && lower(rank(r.job.tier, r.score), want))
            .collect();
        // Lowest priority first; among equals, the most recently started first.
        candidates.sort_by(|a, b| {
            a.job
                .tier
                .cmp(&b.job.tier)
                .then(a.score.total_cmp(&b.score))
                .then(b.start_ms.cmp(&a.start_ms))
        });
        let victims = match smallest_set(ctx, nodes, &candidates, job) {
            Some(v) => v,
            None => greedy(ctx, nodes, &candidates, job),
        };
        Ok(victims
            .into_iter()
            .map(|v| Eviction {
                job: v.job.id,
                for_job: job.id,
                reason: Reason::new(
                    ReasonCode::Preempted,
                    format!(
                        "preempted for job {} (tier {}, score {score})",
                        job.id, job.tier
                    ),
                ),
                grace_s: self.config.grace_s,
                warn_s: 0,
            })
            .collect())
    }
}

/// Largest victim set the exact search tries.
pub const EXACT_SEARCH_MAX: usize = 3;
/// Candidates the exact search considers (lowest priority first).
pub const EXACT_SEARCH_POOL: usize = 24;

/// The first set (by size, then lexicographic in priority order) of at most
/// [`EXACT_SEARCH_MAX`] victims that frees room for `job`.
fn smallest_set<'a>(
    ctx: &Cycle,
    nodes: &[Node],
    candidates: &[&'a RunningJob],
    job: &Job,
) -> Option<Vec<&'a RunningJob>> {
    let pool = &candidates[..candidates.len().min(EXACT_SEARCH_POOL)];
    for k in 1..=EXACT_SEARCH_MAX.min(pool.len()) {
        let mut idx: Vec<usize> = (0..k).collect();
        loop {
            let set: Vec<&RunningJob> = idx.iter().map(|&i| pool[i]).collect();
            if fits_without(ctx, nodes, &set, job) {
                return Some(set);
            }
            // Next combination of k indices out of pool.len().
            let mut i = k;
            while i > 0 && idx[i - 1] == pool.len() - k + i - 1 {
                i -= 1;
            }
            if i == 0 {
                break;
            }
            idx[i - 1] += 1;
            for j in i..k {
                idx[j] = idx[j - 1] + 1;
            }
        }
    }
    None
}

/// Adds candidates in order until `job` fits, then drops the unneeded ones.
fn greedy<'a>(
    ctx: &Cycle,
    nodes: &[Node],
    candidates: &[&'a RunningJob],
    job: &Job,
) -> Vec<&'a RunningJob> {
    let mut victims: Vec<&RunningJob> = Vec::new();
    for &c in candidates {
        victims.push(c);
        if fits_without(ctx, nodes, &victims, job) {
            break;
        }
    }
    if victims.is_empty() || !fits_without(ctx, nodes, &victims, job) {
        return Vec::new();
    }
    // Drop victims that are not needed, highest priority first.
    let mut i = victims.len();
    while i > 0 {
        i -= 1;
        let mut trial = victims.clone();
        trial.remove(i);
        if fits_without(ctx, nodes, &trial, job) {
            victims = trial;
        }
    }
    victims
}

gantry_sdk::export_plugin!(PriorityPreempt, stages: [preemption]);

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::{Gpu, GpuShare, NodeState, TaskAllocation, TaskGroup};

    fn ctx() -> Cycle {
        Cycle {
            strings: vec!["fake".into()],
            gpu_models: vec![0],
            ..Default::default()
        }
    }

    fn job(id: u64, gpus: u32, tier: i32) -> Job {
        Job {
            id,
            tier,
            preemptible: true,
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

    fn running(id: u64, gpu_indices: &[u32], tier: i32, start_ms: u64) -> RunningJob {
        RunningJob {
            job: job(id, gpu_indices.len() as u32, tier),
            tasks: vec![TaskAllocation {
                node: 0,
                gpus: gpu_indices
                    .iter()
                    .map(|&index| GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: 100,
                memory_mib: 10,
            }],
            start_ms,
            expected_end_ms: None,
            score: 0.0,
            revision: 0,
        }
    }

    fn full_node() -> Node {
        Node {
            id: 0,
            state: NodeState::Up,
            cpu_milli_total: 1000,
            cpu_milli_free: 600,
            memory_mib_total: 100,
            memory_mib_free: 60,
            gpus: (0..4)
                .map(|i| Gpu {
                    index: i,
                    model: 0,
                    memory_mib: 1,
                    free_milli: 0,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn evicts_the_fewest_lowest_priority_jobs() {
        let run = [
            running(1, &[0], 0, 1),
            running(2, &[1], 0, 2),
            running(3, &[2, 3], 0, 3),
            running(4, &[], 5, 4),
        ];
        let ev = PriorityPreempt::default()
            .preempt(&ctx(), &[job(9, 2, 1)], &[0.0], &[full_node()], &run)
            .unwrap();
        let ids: Vec<u64> = ev.iter().map(|e| e.job).collect();
        assert_eq!(ids, vec![3], "one 2-GPU victim beats two 1-GPU victims");
        assert_eq!(ev[0].grace_s, 30);
    }

    #[test]
    fn prefers_one_victim_over_two_even_when_greedy_would_take_two() {
        // Job 10 (2 GPUs) started first; jobs 11 and 12 (1 GPU each) later: greedy
        // order is 12, 11, 10, and 12+11 would free enough, but 10 alone does too.
        let run = [
            running(10, &[0, 1], 0, 1),
            running(11, &[2], 0, 2),
            running(12, &[3], 0, 3),
        ];
        let ev = PriorityPreempt::default()
            .preempt(&ctx(), &[job(9, 2, 1)], &[0.0], &[full_node()], &run)
            .unwrap();
        let ids: Vec<u64> = ev.iter().map(|e| e.job).collect();
        assert_eq!(ids, vec![10]);
    }

    #[test]
    fn never_evicts_equal_or_higher_priority_or_non_preemptible() {
        let mut run = vec![running(1, &[0, 1, 2, 3], 1, 1)];
        let ev = PriorityPreempt::default()
            .preempt(&ctx(), &[job(9, 2, 1)], &[0.0], &[full_node()], &run)
            .unwrap();
        assert!(ev.is_empty());
        run[0].job.tier = 0;
        run[0].job.preemptible = false;
        let ev = PriorityPreempt::default()
            .preempt(&ctx(), &[job(9, 2, 1)], &[0.0], &[full_node()], &run)
            .unwrap();
        assert!(ev.is_empty());
    }
}
