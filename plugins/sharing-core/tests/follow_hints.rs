//! Property: a placer that follows each call's hint (`gantry_sdk::changes`, as a 0.2
//! component gets it) proposes exactly the plans of a placer that rebuilds everything in
//! every call, over a random sequence of calls in which plans start or do not start,
//! running jobs end, nodes go down and come back, and GPUs fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_sdk::changes::{Changes, FRESH, during};
use gantry_sdk::{Cycle, Gpu, Job, Node, NodeState, Plan, RunningJob, TaskAllocation, TaskGroup};
use gantry_sharing_core::{Policy, SharingPlacer};

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn ctx() -> Cycle {
    let mut strings = vec!["A".to_string(), "B".to_string()];
    strings.extend((0..12).map(|i| format!("node-{i}")));
    Cycle {
        seed: 7,
        strings,
        gpu_models: vec![0, 1],
        ..Default::default()
    }
}

fn cluster() -> Vec<Node> {
    (0..12u32)
        .map(|id| Node {
            id,
            name: 2 + id,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 256_000,
            memory_mib_free: 256_000,
            gpus: (0..4 + id % 5)
                .map(|index| Gpu {
                    index,
                    model: id % 2,
                    memory_mib: 16_000,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

fn job(id: u64, rng: &mut Lcg) -> Job {
    let (gpus, gpu_milli) =
        [(0, 0), (1, 0), (2, 0), (0, 250), (0, 500), (0, 700)][rng.below(6) as usize];
    Job {
        id,
        tasks: vec![TaskGroup {
            count: 1 + rng.below(2) as u32,
            gpus,
            gpu_milli,
            cpu_milli: [500, 4000, 8000][rng.below(3) as usize],
            memory_mib: 1024,
            gpu_model_mask: [0, 1, 2][rng.below(3) as usize],
        }],
        ..Job::default()
    }
}

/// Takes (or with `sign` -1 gives back) an allocation from the nodes.
fn book(nodes: &mut [Node], alloc: &TaskAllocation, give_back: bool) {
    let n = nodes.iter_mut().find(|n| n.id == alloc.node).unwrap();
    for share in &alloc.gpus {
        let g = n.gpus.iter_mut().find(|g| g.index == share.index).unwrap();
        g.free_milli = if give_back {
            (g.free_milli + share.milli).min(1000)
        } else {
            g.free_milli.saturating_sub(share.milli)
        };
    }
    if give_back {
        n.cpu_milli_free += alloc.cpu_milli;
        n.memory_mib_free += alloc.memory_mib;
    } else {
        n.cpu_milli_free -= alloc.cpu_milli.min(n.cpu_milli_free);
        n.memory_mib_free -= alloc.memory_mib.min(n.memory_mib_free);
    }
}

/// The host encoder's answer for `now` against `before`: an element's previous position
/// when an equal element with its key was there, else `FRESH`.
fn kept<T: PartialEq>(before: &[T], now: &[T], key: impl Fn(&T) -> u64) -> Vec<u32> {
    let mut used = vec![false; before.len()];
    now.iter()
        .map(|x| {
            let j = (0..before.len()).find(|&j| !used[j] && key(&before[j]) == key(x));
            match j {
                Some(j) if before[j] == *x => {
                    used[j] = true;
                    j as u32
                }
                _ => FRESH,
            }
        })
        .collect()
}

fn run(policy: Policy, seed: u64) {
    let ctx = ctx();
    let mut rng = Lcg(seed);
    let (mut following, mut rebuilding) = (SharingPlacer::new(policy), SharingPlacer::new(policy));
    following.configure("{}").unwrap();
    rebuilding.configure("{}").unwrap();
    let mut nodes = cluster();
    let mut running: Vec<RunningJob> = Vec::new();
    let (mut last_nodes, mut last_running): (Option<Vec<Node>>, Vec<RunningJob>) =
        (None, Vec::new());
    let mut next_id = 1;
    for step in 0..150 {
        let jobs: Vec<Job> = (0..1 + rng.below(3))
            .map(|_| {
                next_id += 1;
                job(next_id, &mut rng)
            })
            .collect();
        let hint = last_nodes.as_ref().map(|before| Changes {
            jobs: vec![FRESH; jobs.len()],
            nodes: kept(before, &nodes, |n| u64::from(n.id)),
            running: kept(&last_running, &running, |r| r.job.id),
        });
        let a: Plan = during(hint, || following.place(&ctx, &jobs, &nodes, &running)).unwrap();
        let b = rebuilding.place(&ctx, &jobs, &nodes, &running).unwrap();
        assert_eq!(a, b, "{policy:?} seed {seed} step {step}");
        last_nodes = Some(nodes.clone());
        last_running = running.clone();
        // Most plans start (the host applied them); some do not (a fault, a refused plan).
        if rng.below(5) != 0 {
            for start in &a.starts {
                let job = jobs.iter().find(|j| j.id == start.job).unwrap().clone();
                for t in &start.tasks {
                    book(&mut nodes, t, false);
                }
                running.push(RunningJob {
                    job,
                    tasks: start.tasks.clone(),
                    ..RunningJob::default()
                });
            }
        }
        match rng.below(8) {
            0 | 1 if !running.is_empty() => {
                let r = running.remove(rng.below(running.len() as u64) as usize);
                for t in &r.tasks {
                    book(&mut nodes, t, true);
                }
            }
            2 => {
                let n = &mut nodes[rng.below(12) as usize];
                n.state = if n.state == NodeState::Up {
                    NodeState::Draining
                } else {
                    NodeState::Up
                };
            }
            3 => {
                let n = &mut nodes[rng.below(12) as usize];
                let g = rng.below(n.gpus.len() as u64) as usize;
                n.gpus[g].healthy = !n.gpus[g].healthy;
            }
            _ => {}
        }
    }
}

#[test]
fn following_the_hint_gives_the_plans_of_a_rebuild_for_every_policy() {
    for policy in Policy::ALL {
        for seed in 1..=4 {
            run(policy, seed);
        }
    }
}
