//! The target of a call without a configured one (`docs/fgd-replay/method.md` §8): the
//! shapes of the tasks of the pending jobs and of the running jobs, built like
//! [`build_target`].
//!
//! Owns counting those tasks by shape. A call sees every running job, so the count runs
//! over a compact key (CPU, milli-GPU, GPU count, model mask: four integers, no
//! allocation) in a hash map, and only the few distinct shapes become [`TraceShape`]s
//! with their model names. [`build_target`] merges and sorts by content, so the result
//! does not depend on the order of the map. Does not own the target's rules (`target`).

use crate::fgd::memo::KeyHasher;
use crate::fgd::target::{Target, TraceShape, build_target};
use crate::shape::PodShape;
use gantry_sdk::{Cycle, Job, RunningJob};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A task's shape as FGD counts it: `PodShape`'s `cpu`, `milli`, `gpus` and the model
/// mask cut to the cycle's models (what [`TraceShape::of_task`] reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ShapeKey {
    cpu_and_milli: u64,
    gpus: u64,
    mask: u64,
}

impl Hash for ShapeKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.cpu_and_milli);
        state.write_u64(self.gpus);
        state.write_u64(self.mask);
    }
}

/// The target derived from the tasks of `jobs` and `running`.
pub fn derive_target(ctx: &Cycle, jobs: &[Job], running: &[RunningJob]) -> Target {
    let models = ctx.gpu_models.len().min(64);
    let known = if models == 64 {
        u64::MAX
    } else {
        (1u64 << models) - 1
    };
    let mut counts: HashMap<ShapeKey, (u64, usize, usize), BuildHasherDefault<KeyHasher>> =
        HashMap::default();
    let groups = jobs
        .iter()
        .chain(running.iter().map(|r| &r.job))
        .enumerate()
        .flat_map(|(j, job)| job.tasks.iter().enumerate().map(move |(g, t)| (j, g, t)));
    for (j, g, group) in groups {
        let pod = PodShape::of(group);
        let key = ShapeKey {
            cpu_and_milli: u64::from(pod.cpu) | u64::from(pod.milli) << 32,
            gpus: u64::from(pod.gpus),
            mask: pod.model_mask & known,
        };
        // The first task of each shape stands for it: its `TraceShape` is the shape's.
        counts.entry(key).or_insert((0, j, g)).0 += u64::from(group.count);
    }
    let group_at = |j: usize, g: usize| {
        let job = jobs.get(j).unwrap_or_else(|| &running[j - jobs.len()].job);
        &job.tasks[g]
    };
    let pairs: Vec<(TraceShape, u64)> = counts
        .into_values()
        .map(|(count, j, g)| (TraceShape::of_task(ctx, group_at(j, g)), count))
        .collect();
    build_target(&pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_sdk::TaskGroup;
    use std::collections::BTreeMap;

    /// Counting every task's `TraceShape` in an ordered map: the definition.
    fn by_definition(ctx: &Cycle, jobs: &[Job], running: &[RunningJob]) -> Target {
        let mut counts: BTreeMap<TraceShape, u64> = BTreeMap::new();
        let groups = jobs
            .iter()
            .chain(running.iter().map(|r| &r.job))
            .flat_map(|j| j.tasks.iter());
        for g in groups {
            *counts.entry(TraceShape::of_task(ctx, g)).or_default() += u64::from(g.count);
        }
        build_target(&counts.into_iter().collect::<Vec<_>>())
    }

    #[test]
    fn equals_counting_every_task_by_its_shape() {
        let ctx = Cycle {
            strings: vec!["A".into(), "B".into(), "C".into()],
            gpu_models: vec![0, 1, 2],
            ..Default::default()
        };
        let mut x = 99u64;
        let mut next = |n: u64| {
            x = crate::rank::splitmix64(x);
            x % n
        };
        for round in 0..200 {
            let (pending, busy) = (next(4), next(60));
            let mut job = |id: u64| Job {
                id,
                tasks: (0..1 + next(3))
                    .map(|_| TaskGroup {
                        count: 1 + next(3) as u32,
                        gpus: [0, 0, 1, 2, 8][next(5) as usize],
                        gpu_milli: [0, 250, 500, 1000, 1500][next(5) as usize],
                        cpu_milli: [0, 100, 4000][next(3) as usize],
                        memory_mib: next(2) * 1024,
                        // Bit 5 names no model: cut off like `of_task` does.
                        gpu_model_mask: [0, 1, 2, 3, 0b10_0001][next(5) as usize],
                    })
                    .collect(),
                ..Job::default()
            };
            let jobs: Vec<Job> = (0..pending).map(&mut job).collect();
            let running: Vec<RunningJob> = (0..busy)
                .map(|i| RunningJob {
                    job: job(100 + i),
                    ..RunningJob::default()
                })
                .collect();
            assert_eq!(
                derive_target(&ctx, &jobs, &running),
                by_definition(&ctx, &jobs, &running),
                "round {round}"
            );
        }
    }
}
