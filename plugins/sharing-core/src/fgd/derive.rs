//! The target of a call without a configured one (`docs/fgd-replay/method.md` §8): the
//! shapes of the tasks of the pending jobs and of the running jobs, built like
//! [`build_target`](crate::fgd::target::build_target).
//!
//! Owns counting those tasks by shape. A call sees every running job, so the count runs
//! over a compact key (CPU, milli-GPU, GPU count, model mask: four integers, no
//! allocation) in a hash map, and only the distinct shapes become [`TraceShape`]s with
//! their model names. [`RunningShapes`] keeps the running jobs' counts between calls and,
//! given a call's hint (`gantry_sdk::changes`), adds and takes only the jobs that
//! started, ended or changed. The target's builder merges and sorts by content, so the result
//! does not depend on the order of the map. Does not own the target's rules (`target`).

use crate::fgd::memo::KeyHasher;
use crate::fgd::target::{Target, TraceShape, target_of_counts};
use crate::shape::PodShape;
use gantry_sdk::changes::FRESH;
use gantry_sdk::{Cycle, Job, RunningJob, Symbol, TaskGroup};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
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

impl ShapeKey {
    /// The key of `group` under the models `known` (a mask of the cycle's models).
    fn of(group: &TaskGroup, known: u64) -> Self {
        let pod = PodShape::of(group);
        Self {
            cpu_and_milli: u64::from(pod.cpu) | u64::from(pod.milli) << 32,
            gpus: u64::from(pod.gpus),
            mask: pod.model_mask & known,
        }
    }
}

/// The mask of the cycle's models (at most 64).
fn known_models(ctx: &Cycle) -> u64 {
    match ctx.gpu_models.len().min(64) {
        64 => u64::MAX,
        models => (1u64 << models) - 1,
    }
}

type KeyMap<V> = HashMap<ShapeKey, V, BuildHasherDefault<KeyHasher>>;

/// Task counts by shape, with each shape's `TraceShape` made once and kept while the
/// cycle's models stay the same.
#[derive(Debug, Default)]
struct Tally {
    counts: KeyMap<u64>,
    shapes: KeyMap<TraceShape>,
}

impl Tally {
    /// Adds `count` tasks like `group` under key `key`.
    fn add(&mut self, ctx: &Cycle, key: ShapeKey, count: u64, group: &TaskGroup) {
        match self.counts.entry(key) {
            Entry::Occupied(mut e) => *e.get_mut() += count,
            Entry::Vacant(e) => {
                e.insert(count);
                // Any task of a shape stands for it: the key holds all `of_task` reads.
                self.shapes
                    .entry(key)
                    .or_insert_with(|| TraceShape::of_task(ctx, group));
            }
        }
    }

    /// Takes `count` tasks of key `key` away.
    fn take(&mut self, key: &ShapeKey, count: u64) {
        if let Some(c) = self.counts.get_mut(key) {
            *c -= count;
            if *c == 0 {
                self.counts.remove(key);
            }
        }
    }

    /// The `(shape, count)` pairs.
    fn pairs(&self) -> impl Iterator<Item = (&TraceShape, u64)> {
        self.counts
            .iter()
            .filter_map(|(k, c)| self.shapes.get(k).map(|s| (s, *c)))
    }
}

/// The running jobs' tasks counted by shape, kept between calls.
#[derive(Debug, Default)]
pub struct RunningShapes {
    /// `Cycle::gpu_models` of the count: keys and model names depend on it.
    models: Vec<Symbol>,
    tally: Tally,
    /// Whether `keys` and `ends` hold the counted jobs (kept only once hints come).
    tracked: bool,
    /// Per running job, in input order, its groups' keys and counts: `keys[ends[j-1]..ends[j]]`.
    keys: Vec<(ShapeKey, u64)>,
    ends: Vec<u32>,
}

impl RunningShapes {
    /// Brings the counts to `running`: by the jobs `kept` (the call's hint) marks as new
    /// and the previous ones it leaves out, or by counting every job again. Either way the
    /// counts equal a fresh count; `true` when the hint was followed.
    pub fn update(&mut self, ctx: &Cycle, running: &[RunningJob], kept: Option<&[u32]>) -> bool {
        if self.models != ctx.gpu_models {
            self.models.clone_from(&ctx.gpu_models);
            self.tally.shapes.clear();
            self.tracked = false;
        }
        let followed = kept.is_some_and(|kept| {
            self.tracked && kept.len() == running.len() && self.follow(ctx, running, kept)
        });
        if !followed {
            // Without a hint there is nothing to follow next time either: skip the keys.
            self.recount(ctx, running, kept.is_some());
        }
        followed
    }

    /// Counts every task of `running`, keeping each job's keys when `track`.
    fn recount(&mut self, ctx: &Cycle, running: &[RunningJob], track: bool) {
        self.tally.counts.clear();
        self.keys.clear();
        self.ends.clear();
        self.tracked = track;
        let known = known_models(ctx);
        for r in running {
            for group in &r.job.tasks {
                let key = ShapeKey::of(group, known);
                let count = u64::from(group.count);
                self.tally.add(ctx, key, count, group);
                if track {
                    self.keys.push((key, count));
                }
            }
            if track {
                self.ends.push(self.keys.len() as u32);
            }
        }
    }

    /// Follows `kept`; `false` when it names a previous job out of range or twice.
    fn follow(&mut self, ctx: &Cycle, running: &[RunningJob], kept: &[u32]) -> bool {
        let prefix = kept
            .iter()
            .zip(0..self.ends.len())
            .take_while(|(k, i)| **k as usize == *i)
            .count();
        let cut = prefix.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        let old_keys = self.keys.split_off(cut);
        let old_ends = self.ends.split_off(prefix);
        let range = |j: usize| {
            let start = j.checked_sub(1).map_or(cut, |p| old_ends[p] as usize);
            start - cut..old_ends[j] as usize - cut
        };
        let known = known_models(ctx);
        let mut taken = vec![false; old_ends.len()];
        for (r, &k) in running[prefix..].iter().zip(&kept[prefix..]) {
            if k == FRESH {
                for group in &r.job.tasks {
                    let key = ShapeKey::of(group, known);
                    let count = u64::from(group.count);
                    self.tally.add(ctx, key, count, group);
                    self.keys.push((key, count));
                }
            } else {
                let j = (k as usize).wrapping_sub(prefix);
                match taken.get_mut(j) {
                    Some(t) if !*t => *t = true,
                    _ => return false,
                }
                self.keys.extend_from_slice(&old_keys[range(j)]);
            }
            self.ends.push(self.keys.len() as u32);
        }
        for j in (0..old_ends.len()).filter(|&j| !taken[j]) {
            for (key, count) in &old_keys[range(j)] {
                self.tally.take(key, *count);
            }
        }
        true
    }

    /// The target of the counted running jobs with the tasks of `jobs` added.
    pub fn target_with(&self, ctx: &Cycle, jobs: &[Job]) -> Target {
        let known = known_models(ctx);
        let mut pending = Tally::default();
        for group in jobs.iter().flat_map(|j| &j.tasks) {
            let key = ShapeKey::of(group, known);
            match self.tally.shapes.get(&key) {
                // A shape already made: count it without making it again.
                Some(_) => *pending.counts.entry(key).or_default() += u64::from(group.count),
                None => pending.add(ctx, key, u64::from(group.count), group),
            }
        }
        let made = |k: &ShapeKey| self.tally.shapes.get(k).or_else(|| pending.shapes.get(k));
        let pending_pairs = pending
            .counts
            .iter()
            .filter_map(|(k, c)| made(k).map(|s| (s, *c)));
        target_of_counts(self.tally.pairs().chain(pending_pairs), 95)
    }
}

/// The target derived from the tasks of `jobs` and `running`.
pub fn derive_target(ctx: &Cycle, jobs: &[Job], running: &[RunningJob]) -> Target {
    let mut shapes = RunningShapes::default();
    shapes.update(ctx, running, None);
    shapes.target_with(ctx, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fgd::target::build_target;
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

    /// The hint the host's encoder gives: each element's previous position when an
    /// equal element with its id was there (each used once), else `FRESH`.
    fn kept_by_id(before: &[RunningJob], now: &[RunningJob]) -> Vec<u32> {
        let mut used = vec![false; before.len()];
        now.iter()
            .map(|r| {
                let j = (0..before.len()).find(|&j| !used[j] && before[j] == *r);
                j.map_or(FRESH, |j| {
                    used[j] = true;
                    j as u32
                })
            })
            .collect()
    }

    #[test]
    fn following_a_hint_equals_counting_again() {
        let ctx = Cycle {
            strings: vec!["A".into(), "B".into()],
            gpu_models: vec![0, 1],
            ..Default::default()
        };
        let mut x = 5u64;
        let mut next = |n: u64| {
            x = crate::rank::splitmix64(x);
            x % n
        };
        let (mut followed, mut id) = (0, 0u64);
        let mut shapes = RunningShapes::default();
        let mut running: Vec<RunningJob> = Vec::new();
        for step in 0..400 {
            let before = running.clone();
            for _ in 0..1 + next(3) {
                match next(5) {
                    // Start a job at the end (the fill replay's case) or in the middle.
                    0..=2 => {
                        id += 1;
                        let job = Job {
                            id,
                            tasks: (0..1 + next(2))
                                .map(|_| TaskGroup {
                                    count: 1 + next(2) as u32,
                                    gpus: [0, 1, 2][next(3) as usize],
                                    gpu_milli: [0, 500, 1000][next(3) as usize],
                                    cpu_milli: [0, 4000][next(2) as usize],
                                    memory_mib: 0,
                                    gpu_model_mask: [0, 1, 2][next(3) as usize],
                                })
                                .collect(),
                            ..Job::default()
                        };
                        let at = if next(4) == 0 {
                            next(running.len() as u64 + 1)
                        } else {
                            running.len() as u64
                        };
                        running.insert(
                            at as usize,
                            RunningJob {
                                job,
                                ..RunningJob::default()
                            },
                        );
                    }
                    // End one.
                    3 if !running.is_empty() => {
                        running.remove(next(running.len() as u64) as usize);
                    }
                    // Change one's tasks in place.
                    _ if !running.is_empty() => {
                        let i = next(running.len() as u64) as usize;
                        running[i].job.tasks[0].count += 1;
                    }
                    _ => {}
                }
            }
            let kept = kept_by_id(&before, &running);
            followed += u32::from(shapes.update(&ctx, &running, Some(&kept)));
            let jobs: Vec<Job> = running
                .iter()
                .take(next(3) as usize)
                .map(|r| r.job.clone())
                .collect();
            assert_eq!(
                shapes.target_with(&ctx, &jobs),
                by_definition(&ctx, &jobs, &running),
                "step {step}"
            );
        }
        assert!(followed >= 399, "followed {followed} of 400");
        // A hint naming a previous job twice is not followed, and the count is still right.
        let twice = vec![0; running.len()];
        assert!(!shapes.update(&ctx, &running, Some(&twice)));
        assert_eq!(
            shapes.target_with(&ctx, &[]),
            by_definition(&ctx, &[], &running)
        );
    }
}
