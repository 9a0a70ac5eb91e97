//! Unit tests of reclaim: who is evicted, for whom, and when nothing is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use gantry_sdk::{Gpu, GpuShare, NodeState, ReasonCode, TaskAllocation, TaskGroup};

const CONFIG: &str = r#"{"queues": {
    "team-a": {"nominal_gpus": 4, "borrowing_limit_gpus": 4, "cohort": "lab"},
    "team-b": {"nominal_gpus": 4, "borrowing_limit_gpus": 4, "cohort": "lab"},
    "team-c": {"nominal_gpus": 4}}}"#;

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;

fn ctx() -> Cycle {
    Cycle {
        strings: vec![
            "team-a".into(),
            "team-b".into(),
            "team-c".into(),
            "H100".into(),
        ],
        gpu_models: vec![3],
        ..Default::default()
    }
}

fn job(id: u64, queue: u32, gpus: u32, tier: i32) -> Job {
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
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A running job of `queue` on node `node` holding GPUs `gpus`, started at `start_ms`
/// with score `score`.
fn run(id: u64, queue: u32, node: u32, gpus: &[u32], start_ms: u64, score: f64) -> RunningJob {
    RunningJob {
        job: job(id, queue, gpus.len() as u32, 0),
        tasks: vec![TaskAllocation {
            node,
            gpus: gpus
                .iter()
                .map(|&index| GpuShare { index, milli: 1000 })
                .collect(),
            cpu_milli: 1000,
            memory_mib: 1024,
        }],
        start_ms,
        expected_end_ms: None,
        score,
        revision: 0,
    }
}

/// `count` nodes of 4 GPUs, with what `running` (and `extra` allocations) hold taken.
fn nodes(count: u32, running: &[RunningJob], extra: &[(u32, u32)]) -> Vec<Node> {
    let mut out: Vec<Node> = (0..count)
        .map(|id| Node {
            id,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 20,
            gpus: (0..4)
                .map(|index| Gpu {
                    index,
                    model: 3,
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
    out
}

fn plugin(config: &str) -> Reclaim {
    let mut p = Reclaim::default();
    p.configure(config).unwrap();
    p
}

/// team-a runs 8 one-GPU jobs on 2 nodes (4 borrowed): ids 1..=8 started at 1..=8 s.
fn a_borrows_four() -> Vec<RunningJob> {
    (1..=8u64)
        .map(|i| {
            let i0 = (i - 1) as u32;
            run(i, A, i0 / 4, &[i0 % 4], i * 1000, -(i as f64))
        })
        .collect()
}

fn victims(ev: &[Eviction]) -> Vec<(u64, u64)> {
    ev.iter().map(|e| (e.job, e.for_job)).collect()
}

#[test]
fn evicts_the_most_recent_lowest_priority_borrowers_one_set_per_blocked_job() {
    let running = a_borrows_four();
    let blocked = [job(20, B, 1, 0), job(21, B, 2, 0)];
    let ev = plugin(CONFIG)
        .preempt(
            &ctx(),
            &blocked,
            &[-20.0, -21.0],
            &nodes(2, &running, &[]),
            &running,
        )
        .unwrap();
    // Job 8 (lowest score) for job 20; jobs 7 and 6 (same node) for job 21.
    assert_eq!(victims(&ev), vec![(8, 20), (7, 21), (6, 21)]);
    assert_eq!(ev[0].grace_s, 60);
    assert_eq!(ev[0].reason.code, ReasonCode::Preempted);
    assert_eq!(
        ev[0].reason.message,
        "reclaiming quota for job 20 of queue team-b (1 of 4 GPUs nominal after it starts): \
         queue team-a of cohort lab uses 8 GPUs, 4 above its nominal 4"
    );
    assert!(
        ev[1]
            .reason
            .message
            .contains("uses 7 GPUs, 3 above its nominal 4")
    );
}

#[test]
fn a_borrower_is_never_cut_below_nominal_by_more_than_one_victim() {
    // team-a uses 5 (1 borrowed); team-b needs 2 on a full cluster: only one of
    // team-a's jobs may go, which is not enough.
    let running: Vec<RunningJob> = a_borrows_four().into_iter().take(5).collect();
    let full = nodes(2, &running, &[(1, 1), (1, 2), (1, 3)]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 2, 0)], &[0.0], &full, &running)
        .unwrap();
    assert!(ev.is_empty(), "{ev:?}");
}

#[test]
fn never_for_a_job_that_would_borrow_counting_this_cycles_starts() {
    let running = a_borrows_four();
    // team-b already runs 3: a 2-GPU job would take it to 5 > 4.
    let mut all = running.clone();
    all.extend((0..3).map(|i| run(30 + i, B, 2, &[i as u32], 1, 0.0)));
    let n = nodes(3, &all, &[(2, 3)]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 2, 0)], &[0.0], &n, &all)
        .unwrap();
    assert!(ev.is_empty());
    // A 1-GPU job fits team-b's nominal (3 + 1)... unless this cycle started
    // something (GPU 3 of node 2 is allocated but held by no running job).
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[0.0], &n, &all)
        .unwrap();
    assert!(
        ev.is_empty(),
        "the unseen start may be team-b's: 3 + 1 + 1 > 4"
    );
    let n = nodes(3, &all, &[]);
    let mut full = n.clone();
    full[2].gpus[3].free_milli = 0;
    full[2].gpus[3].healthy = false;
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[0.0], &full, &all)
        .unwrap();
    assert_eq!(victims(&ev), vec![(8, 20)], "unhealthy GPUs are not starts");
}

#[test]
fn prefers_one_big_victim_over_several_small_ones() {
    // team-a: a 2-GPU job started first (score -1), then two 1-GPU jobs, all on node 1,
    // plus 4 nominal jobs on node 0.
    let mut running: Vec<RunningJob> = a_borrows_four().into_iter().take(4).collect();
    running.push(run(5, A, 1, &[0, 1], 5_000, -5.0));
    running.push(run(6, A, 1, &[2], 6_000, -6.0));
    running.push(run(7, A, 1, &[3], 7_000, -7.0));
    let ev = plugin(CONFIG)
        .preempt(
            &ctx(),
            &[job(20, B, 2, 0)],
            &[0.0],
            &nodes(2, &running, &[]),
            &running,
        )
        .unwrap();
    assert_eq!(victims(&ev), vec![(5, 20)]);
}

#[test]
fn lower_priority_modes_and_within_queue() {
    let running = a_borrows_four();
    let n = nodes(2, &running, &[]);
    let lower_only = CONFIG.replacen('{', r#"{"reclaim_within_cohort": "lower_priority", "#, 1);
    // The blocked job's score -5.5 is above jobs 6, 7, 8 only.
    let ev = plugin(&lower_only)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[-7.5], &n, &running)
        .unwrap();
    assert_eq!(victims(&ev), vec![(8, 20)]);
    let ev = plugin(&lower_only)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[-9.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty());
    let never = CONFIG.replacen('{', r#"{"reclaim_within_cohort": "never", "#, 1);
    let ev = plugin(&never)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty());
    // team-c (no cohort) runs 4 at nominal; a tier-1 team-c job may evict its own
    // lowest-priority job when within_cluster_queue allows it.
    let running: Vec<RunningJob> = (1..=4u64)
        .map(|i| run(i, C, 0, &[(i - 1) as u32], i, -(i as f64)))
        .collect();
    let n = nodes(1, &running, &[]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(9, C, 1, 1)], &[0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty(), "within_cluster_queue defaults to never");
    let own = CONFIG.replacen('{', r#"{"within_cluster_queue": "lower_priority", "#, 1);
    let ev = plugin(&own)
        .preempt(&ctx(), &[job(9, C, 1, 1)], &[0.0], &n, &running)
        .unwrap();
    assert_eq!(victims(&ev), vec![(4, 9)]);
    assert_eq!(
        ev[0].reason.message,
        "preempted by job 9 of the same queue team-c, which has higher priority (tier 1) \
         and fits its nominal quota (4 of 4 GPUs after it starts)"
    );
    let ev = plugin(&own)
        .preempt(&ctx(), &[job(9, C, 1, 0)], &[-2.5], &n, &running)
        .unwrap();
    assert_eq!(
        victims(&ev),
        vec![(4, 9)],
        "tier equal, score above jobs 3 and 4"
    );
}

#[test]
fn non_preemptible_unlisted_and_already_fitting_jobs() {
    let mut running = a_borrows_four();
    for r in &mut running[4..] {
        r.job.preemptible = false;
    }
    let n = nodes(2, &running, &[]);
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[0.0], &n, &running)
        .unwrap();
    // Any job of a borrowing queue is a candidate, not only the last ones it started.
    assert_eq!(victims(&ev), vec![(4, 20)]);
    for r in &mut running {
        r.job.preemptible = false;
    }
    let ev = plugin(CONFIG)
        .preempt(&ctx(), &[job(20, B, 1, 0)], &[0.0], &n, &running)
        .unwrap();
    assert!(ev.is_empty());
    let running = a_borrows_four();
    let n = nodes(3, &running, &[]);
    // Job 20 fits the empty node 2 (4 GPUs) and keeps that room; job 21 then needs one
    // victim. A queue not in the config is never served.
    let ev = plugin(CONFIG)
        .preempt(
            &ctx(),
            &[job(20, B, 4, 0), job(21, B, 1, 0), job(22, 3, 1, 0)],
            &[0.0, 0.0, 0.0],
            &n,
            &running,
        )
        .unwrap();
    assert!(ev.is_empty(), "job 21 would take team-b to 5 > 4: {ev:?}");
    // With team-c holding GPU 3 of node 2, job 20 (3 GPUs) takes the rest of node 2.
    let mut running = running;
    running.push(run(40, C, 2, &[3], 1, 0.0));
    let n = nodes(3, &running, &[]);
    let ev = plugin(CONFIG)
        .preempt(
            &ctx(),
            &[job(20, B, 3, 0), job(21, B, 1, 0)],
            &[0.0, 0.0],
            &n,
            &running,
        )
        .unwrap();
    assert_eq!(victims(&ev), vec![(8, 21)]);
}

#[test]
fn config_errors_name_the_key() {
    let mut p = Reclaim::default();
    let e = p.configure(r#"{"grace": 5}"#).unwrap_err();
    assert!(e.contains("unknown field `grace`"), "{e}");
    let e = p
        .configure(r#"{"reclaim_within_cohort": "lowerPriority"}"#)
        .unwrap_err();
    assert!(e.contains("unknown variant `lowerPriority`"), "{e}");
    let e = p
        .configure(r#"{"queues": {"x": {"nominal_gpus": "4"}}}"#)
        .unwrap_err();
    assert!(
        e.starts_with("invalid config: queues.x: invalid type"),
        "{e}"
    );
    p.configure(r#"{"grace_s": 5, "unlisted": "hold"}"#)
        .unwrap();
    assert_eq!(p.grace_s, 5);
    assert!(
        p.preempt(&ctx(), &[job(1, A, 1, 0)], &[0.0], &[], &[])
            .unwrap()
            .is_empty()
    );
}
