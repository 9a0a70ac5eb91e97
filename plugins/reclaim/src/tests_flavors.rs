//! Unit tests of reclaim with flavors: victims come only from borrowers of the
//! blocked job's flavor and hold GPUs of that model; this cycle's starts count per
//! model; own-queue preemption stays within the flavor; unpinned jobs are not served.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_sdk::{Gpu, GpuShare, NodeState, ReasonCode, TaskAllocation, TaskGroup};

const CONFIG: &str = r#"{"queues": {
    "team-a": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 4, "borrowing_limit_gpus": 4},
        "L4": {"nominal_gpus": 4, "borrowing_limit_gpus": 4}}},
    "team-b": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 4, "borrowing_limit_gpus": 4},
        "L4": {"nominal_gpus": 4, "borrowing_limit_gpus": 4}}},
    "team-c": {"flavors": {"A100": {"nominal_gpus": 4}, "L4": {"nominal_gpus": 4}}}}}"#;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;
/// Model symbols (and mask bits 0 and 1).
const A100: u32 = 3;
const L4: u32 = 4;

fn ctx() -> Cycle {
    Cycle {
        strings: ["team-a", "team-b", "team-c", "A100", "L4"]
            .map(String::from)
            .to_vec(),
        gpu_models: vec![A100, L4],
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: u32, tier: i32, model: u32) -> Job {
    Job {
        id,
        queue,
        tier,
        submit_ms: id,
        preemptible: true,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: if model == L4 { 0b10 } else { 0b1 },
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A running job of `queue` on `node` holding `gpus` (of the node's model), started
/// at `id` s with score `-id`.
fn run(id: u64, queue: u32, node: u32, gpus: &[u32], model: u32) -> RunningJob {
    RunningJob {
        job: job(id, queue, gpus.len() as u32, 0, model),
        tasks: vec![TaskAllocation {
            node,
            gpus: gpus
                .iter()
                .map(|&index| GpuShare { index, milli: 1000 })
                .collect(),
            cpu_milli: 1000,
            memory_mib: 1024,
        }],
        start_ms: id * 1000,
        expected_end_ms: None,
        score: -(id as f64),
        revision: 0,
    }
}

/// Nodes of 4 GPUs of the given models, with what `running` and `extra` hold taken;
/// `broken` GPUs are unhealthy.
fn nodes(
    models: &[u32],
    running: &[RunningJob],
    extra: &[(u32, u32)],
    broken: &[(u32, u32)],
) -> Vec<Node> {
    let mut out: Vec<Node> = models
        .iter()
        .enumerate()
        .map(|(id, &model)| Node {
            id: id as u32,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 20,
            gpus: (0..4)
                .map(|index| Gpu {
                    index,
                    model,
                    memory_mib: 80_000,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    let shares = running
        .iter()
        .flat_map(|r| &r.tasks)
        .flat_map(|t| t.gpus.iter().map(move |g| (t.node, g.index)))
        .chain(extra.iter().copied());
    for (node, index) in shares {
        out[node as usize].gpus[index as usize].free_milli = 0;
    }
    for &(node, index) in broken {
        let g = &mut out[node as usize].gpus[index as usize];
        g.free_milli = 0;
        g.healthy = false;
    }
    out
}

fn plugin(config: &str) -> Reclaim {
    let mut p = Reclaim::default();
    p.configure(config).unwrap();
    p
}

fn victims(ev: &[Eviction]) -> Vec<(u64, u64)> {
    ev.iter().map(|e| (e.job, e.for_job)).collect()
}

/// team-a: 8 A100 jobs 1..=8 on nodes 0, 1 and 8 L4 jobs 11..=18 on nodes 2, 3 (the
/// L4 ones started later, so they have lower priority); it borrows 4 of each.
fn a_borrows_both() -> Vec<RunningJob> {
    let a100 = (1..=8u64).map(|i| run(i, A, (i as u32 - 1) / 4, &[(i as u32 - 1) % 4], A100));
    let l4 = (11..=18u64).map(|i| run(i, A, 2 + (i as u32 - 11) / 4, &[(i as u32 - 11) % 4], L4));
    a100.chain(l4).collect()
}

const MODELS: [u32; 4] = [A100, A100, L4, L4];

#[test]
fn victims_are_borrowers_of_the_blocked_jobs_flavor_only() {
    let running = a_borrows_both();
    let n = nodes(&MODELS, &running, &[], &[]);
    let blocked = [job(20, B, 1, 0, A100), job(21, B, 2, 0, L4)];
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &blocked, &[-20.0, -21.0], &n, &running)
        .unwrap();
    // L4 jobs 11..18 have the lowest priority, but job 20 asks for A100: job 8 goes.
    assert_eq!(victims(&ev), vec![(8, 20), (18, 21), (17, 21)]);
    assert_eq!(ev[0].reason.code, ReasonCode::Preempted);
    assert_eq!(
        ev[0].reason.message,
        "reclaiming quota for job 20 of queue team-b flavor A100 (1 of 4 GPUs nominal after it \
         starts): queue team-a flavor A100 of cohort lab uses 8 GPUs, 4 above its nominal 4"
    );
    // The A100 victim did not lower team-a's L4 use.
    assert_eq!(
        ev[2].reason.message,
        "reclaiming quota for job 21 of queue team-b flavor L4 (2 of 4 GPUs nominal after it \
         starts): queue team-a flavor L4 of cohort lab uses 8 GPUs, 4 above its nominal 4"
    );
}

#[test]
fn a_flavor_at_nominal_is_not_cut_whatever_the_queue_borrows_elsewhere() {
    // team-a borrows 4 L4 but only 1 A100 (5 jobs); node 1's other GPUs are broken.
    // team-b's 2-GPU A100 job would need two of team-a's A100 jobs: only one may go.
    let mut running: Vec<RunningJob> = a_borrows_both();
    running.retain(|r| r.job.id <= 5 || r.job.id >= 11);
    let n = nodes(&MODELS, &running, &[], &[(1, 1), (1, 2), (1, 3)]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 2, 0, A100)], &[0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn this_cycles_starts_count_against_the_flavor_of_their_model() {
    // team-a borrows 4 A100 on nodes 0, 1; team-b runs 3 A100 on node 2, whose last
    // GPU is broken; team-b asks for one more A100 (4 of 4: within nominal).
    let mut running: Vec<RunningJob> = a_borrows_both().into_iter().take(8).collect();
    running.extend((0..3).map(|i| run(30 + i, B, 2, &[i as u32], A100)));
    let models = [A100, A100, A100, L4];
    let blocked = [job(20, B, 1, 0, A100)];
    // A start this cycle on an L4 node does not count against team-b's A100.
    let n = nodes(&models, &running, &[(3, 0), (3, 1)], &[(2, 3)]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &blocked, &[0.0], &n, &running)
        .unwrap();
    assert_eq!(victims(&ev), vec![(8, 20)]);
    // One on an A100 GPU may be team-b's: 3 + 1 + 1 > 4, no eviction.
    let n = nodes(&models, &running, &[(2, 3)], &[]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &blocked, &[0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn own_queue_preemption_stays_within_the_flavor() {
    // team-c (no cohort) runs 4 A100 (1..=4) and 4 L4 (5..=8, lower priority).
    let mut running: Vec<RunningJob> = (1..=4u64)
        .map(|i| run(i, C, 0, &[(i - 1) as u32], A100))
        .collect();
    running.extend((5..=8u64).map(|i| run(i, C, 2, &[(i - 5) as u32], L4)));
    let n = nodes(&MODELS, &running, &[], &[(1, 0), (1, 1), (1, 2), (1, 3)]);
    let own = CONFIG.replacen('{', r#"{"within_cluster_queue": "lower_priority", "#, 1);
    let ev = plugin(&own)
        .preempt(&ctx(), &[job(9, C, 1, 1, A100)], &[0.0], &n, &running)
        .unwrap();
    assert_eq!(victims(&ev), vec![(4, 9)]);
    assert_eq!(
        ev[0].reason.message,
        "preempted by job 9 of the same queue team-c flavor A100, which has higher priority \
         (tier 1) and fits its nominal quota (4 of 4 GPUs after it starts)"
    );
}

#[test]
fn jobs_not_pinned_to_one_flavor_are_not_served() {
    let running = a_borrows_both();
    let n = nodes(&MODELS, &running, &[], &[]);
    let mut any = job(20, B, 1, 0, A100);
    any.tasks[0].gpu_model_mask = 0;
    let mut both = job(21, B, 1, 0, A100);
    both.tasks[0].gpu_model_mask = 0b11;
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[any, both], &[0.0, 0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty(), "{ev:?}");
}
