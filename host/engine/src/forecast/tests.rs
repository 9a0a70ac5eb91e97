#![allow(clippy::unwrap_used)]
use super::*;
use gantry_contract::{
    Cycle, Gpu, GpuShare, Node, NodeState, RunningJob, TaskAllocation, TaskGroup,
};

const NOW: u64 = 1_000_000_000;
const MIN: u64 = 60_000;

fn job(id: u64, gpus: u32) -> Job {
    Job {
        id,
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

/// One node of four GPUs; job 1 runs on GPUs 0..`held`, started ten minutes ago.
fn snap(held: u32, pending: Vec<Job>) -> Snapshot {
    let gpus = (0..4)
        .map(|index| Gpu {
            index,
            model: 0,
            memory_mib: 80_000,
            free_milli: if index < held { 0 } else { 1000 },
            healthy: true,
            parent: None,
        })
        .collect();
    let node = Node {
        id: 0,
        state: NodeState::Up,
        cpu_milli_total: 64_000,
        cpu_milli_free: 64_000 - 1000,
        memory_mib_total: 1 << 20,
        memory_mib_free: (1 << 20) - 1024,
        gpus,
        ..Default::default()
    };
    let running = RunningJob {
        job: job(1, held),
        tasks: vec![TaskAllocation {
            node: 0,
            gpus: (0..held)
                .map(|index| GpuShare { index, milli: 1000 })
                .collect(),
            cpu_milli: 1000,
            memory_mib: 1024,
        }],
        start_ms: NOW - 10 * MIN,
        expected_end_ms: None,
        score: 0.0,
        revision: 0,
    };
    Snapshot {
        ctx: Cycle {
            now_ms: NOW,
            strings: vec!["gpu".into()],
            gpu_models: vec![0],
            ..Default::default()
        },
        pending,
        nodes: vec![node],
        running: vec![running],
        evicting: Vec::new(),
    }
}

/// Job 1 runs 20 min in all; job 2 30 min; job 3 5 min; job 4 (in the band test) varies.
fn runtimes(job: &Job, replay: usize) -> u64 {
    match job.id {
        1 => 20 * MIN,
        2 => 30 * MIN,
        3 => 5 * MIN,
        _ => (replay as u64 + 1) * 10 * MIN,
    }
}

fn by_id(f: &[JobForecast], id: u64) -> &JobForecast {
    f.iter().find(|x| x.job == id).unwrap()
}

#[test]
fn strictly_in_order_a_small_job_waits_behind_the_blocked_one() {
    // Job 1 holds 3 of 4 GPUs until +10 min. Job 2 needs 2, job 3 needs 1.
    let s = snap(3, vec![job(2, 2), job(3, 1)]);
    let f = forecast(&s, &[2, 3], &runtimes, ForecastOptions::default());
    let (two, three) = (by_id(&f, 2), by_id(&f, 3));
    assert_eq!(two.p50_ms, Some(NOW + 10 * MIN));
    assert_eq!(two.after, Some(1));
    assert_eq!((two.ahead, three.ahead), (0, 1));
    // Not before job 2: both start when job 1 ends.
    assert_eq!(three.p50_ms, Some(NOW + 10 * MIN));
}

#[test]
fn with_backfill_a_short_job_that_ends_before_the_reservation_starts_now() {
    let s = snap(3, vec![job(2, 2), job(3, 1)]);
    let opts = ForecastOptions {
        backfill_depth: 8,
        ..Default::default()
    };
    let f = forecast(&s, &[2, 3], &runtimes, opts);
    assert_eq!(by_id(&f, 3).p50_ms, Some(NOW));
    assert_eq!(by_id(&f, 3).after, None);
    assert_eq!(by_id(&f, 2).p50_ms, Some(NOW + 10 * MIN));
}

#[test]
fn a_job_no_node_can_hold_never_starts_and_says_why() {
    let s = snap(3, vec![job(2, 8)]);
    let f = forecast(&s, &[2], &runtimes, ForecastOptions::default());
    let two = by_id(&f, 2);
    assert_eq!((two.p50_ms, two.p90_ms), (None, None));
    assert!(two.never.as_deref().unwrap().contains("GPU"), "{two:?}");
}

#[test]
fn the_band_spreads_with_the_draws_and_p90_is_not_before_p50() {
    // Job 4 holds the 4 GPUs' worth behind job 2 (which needs all four, after job 4).
    let s = snap(4, vec![job(4, 4), job(2, 4)]);
    let f = forecast(&s, &[4, 2], &runtimes, ForecastOptions::default());
    let two = by_id(&f, 2);
    // Job 4 starts at +10 min and runs 10, 20, ... 50 min in the five replays.
    assert_eq!(two.p50_ms, Some(NOW + 10 * MIN + 30 * MIN));
    assert_eq!(two.p90_ms, Some(NOW + 10 * MIN + 50 * MIN));
    assert_eq!(two.after, Some(4));
}

#[test]
fn a_job_running_past_its_estimate_ends_a_tenth_of_its_age_later() {
    // Job 1 started 10 min ago and is drawn at 5 min: it is past its draw.
    let s = snap(4, vec![job(3, 1)]);
    let short = |_: &Job, _: usize| 5 * MIN;
    let f = forecast(&s, &[3], &short, ForecastOptions::default());
    assert_eq!(by_id(&f, 3).p50_ms, Some(NOW + MIN));
}
