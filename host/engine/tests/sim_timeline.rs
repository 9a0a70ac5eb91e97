//! Virtual-time scenarios whose start and end times were worked out by hand: the
//! simulator must reproduce them exactly, with the real (natively compiled) plugins.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use gantry_contract::{JobKind, ReasonCode};
use gantry_engine::sim::{
    JobEnd, NodeEvent, SimJob, SimNode, SimTask, TimelineOptions, TimelineResult, run_timeline,
};
use std::collections::BTreeMap;

fn node(name: &str, gpus: u32) -> SimNode {
    SimNode {
        name: name.into(),
        cpu_milli: 64_000,
        memory_mib: 256 * 1024,
        gpus,
        gpu_model: "A100".into(),
        gpu_memory_mib: 81_920,
        labels: BTreeMap::new(),
    }
}

fn job(name: &str, submit_s: u64, duration_s: u64, gpus: u32) -> SimJob {
    SimJob {
        name: name.into(),
        user: "ann".into(),
        account: "lab".into(),
        queue: "default".into(),
        tier: 0,
        kind: JobKind::Batch,
        preemptible: false,
        requeue: true,
        labels: BTreeMap::new(),
        submit_ms: submit_s * 1000,
        duration_ms: duration_s * 1000,
        time_limit_s: 0,
        tasks: vec![SimTask {
            count: 1,
            gpus,
            gpu_milli: 0,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_models: vec![],
        }],
    }
}

/// (name, start s, end s) of every job that ran.
fn runs(r: &TimelineResult) -> Vec<(String, u64, u64)> {
    r.jobs
        .iter()
        .filter_map(|j| Some((j.name.clone(), j.start_ms? / 1000, j.end_ms? / 1000)))
        .collect()
}

fn workload() -> Vec<SimJob> {
    let mut limited = job("F", 300, 100, 1);
    limited.time_limit_s = 60;
    vec![
        job("A", 0, 100, 2),
        job("B", 0, 50, 2),
        job("C", 10, 100, 4),
        job("D", 20, 30, 1),
        job("E-too-big", 0, 10, 8),
        limited,
    ]
}

fn simulate(
    placement_config: &str,
    preempt: bool,
    jobs: &[SimJob],
    events: &[NodeEvent],
) -> TimelineResult {
    let mut pipeline = common::native_pipeline(placement_config, preempt);
    run_timeline(
        &[node("n1", 4)],
        jobs,
        events,
        &TimelineOptions::default(),
        &mut pipeline,
        None,
        &mut |_| {},
    )
}

#[test]
fn fifo_first_fit_strict_order_matches_the_hand_worked_timeline() {
    let r = simulate("{}", false, &workload(), &[]);
    // C (4 GPUs) waits for A and B; D waits behind C even though a GPU is free at 50 s.
    assert_eq!(
        runs(&r),
        vec![
            ("A".into(), 0, 100),
            ("B".into(), 0, 50),
            ("C".into(), 100, 200),
            ("D".into(), 200, 230),
            ("F".into(), 300, 360),
        ]
    );
    assert!(
        matches!(&r.jobs[4].end, JobEnd::Rejected { by, message } if by == "host" && message.contains("8"))
    );
    assert_eq!(r.jobs[5].end, JobEnd::TimedOut);
    assert_eq!(r.jobs[0].end, JobEnd::Completed);
    let s = r.summary();
    assert_eq!((s.finished, s.rejected, s.never_started), (5, 1, 0));
    // Waits: 0, 0, 90, 180, 0 seconds.
    assert_eq!(r.waits_s(), vec![0.0, 0.0, 0.0, 90.0, 180.0]);
    // GPU-seconds: A 200, B 100, C 400, D 30, F 60.
    let used: Vec<f64> = r.jobs.iter().map(|j| j.gpu_seconds).collect();
    assert_eq!(used, vec![200.0, 100.0, 400.0, 30.0, 0.0, 60.0]);
}

#[test]
fn skipping_placement_backfills_the_small_job_into_the_gap() {
    let r = simulate(r#"{"strict": false}"#, false, &workload(), &[]);
    // At 50 s B frees 2 GPUs: C still does not fit, D does and ends before A frees the rest.
    assert_eq!(
        runs(&r),
        vec![
            ("A".into(), 0, 100),
            ("B".into(), 0, 50),
            ("C".into(), 100, 200),
            ("D".into(), 50, 80),
            ("F".into(), 300, 360),
        ]
    );
}

#[test]
fn eviction_frees_room_after_the_grace_period_and_the_victim_is_requeued() {
    let mut low = job("low", 0, 1000, 4);
    low.preemptible = true;
    let mut high = job("high", 100, 50, 2);
    high.tier = 1;
    let r = simulate("{}", true, &[low, high], &[]);
    // high arrives at 100 s; low is evicted with the default 30 s grace, high runs
    // 130–180, low is requeued and runs again from 180 for its full 1000 s.
    assert_eq!(r.evictions, 1);
    assert_eq!(r.jobs[1].start_ms, Some(130_000));
    assert_eq!(r.jobs[1].end_ms, Some(180_000));
    assert_eq!((r.jobs[0].evictions, r.jobs[0].requeues), (1, 1));
    assert_eq!(r.jobs[0].end_ms, Some(1_180_000));
    assert_eq!(r.jobs[0].end, JobEnd::Completed);
    // First run 130 s × 4 GPUs, second 1000 s × 4 GPUs.
    assert_eq!(r.jobs[0].gpu_seconds, 4.0 * 1130.0);
}

#[test]
fn node_failure_requeues_its_jobs_and_they_restart_when_it_returns() {
    let mut keep = job("keep", 0, 100, 4);
    keep.requeue = true;
    let events = [
        NodeEvent {
            at_ms: 40_000,
            node: "n1".into(),
            up: false,
        },
        NodeEvent {
            at_ms: 70_000,
            node: "n1".into(),
            up: true,
        },
    ];
    let r = simulate("{}", false, &[keep], &events);
    assert_eq!(r.jobs[0].start_ms, Some(0));
    assert_eq!(r.jobs[0].requeues, 1);
    assert_eq!(r.jobs[0].end_ms, Some(170_000));
    assert_eq!(r.jobs[0].end, JobEnd::Completed);
    // While the node is down the cluster has no capacity.
    let down = r.samples.iter().find(|s| s.t_ms == 40_000).unwrap();
    assert_eq!((down.gpu_milli_held, down.gpu_milli_total), (0, 0));

    let mut lose = job("lose", 0, 100, 1);
    lose.requeue = false;
    let r = simulate("{}", false, &[lose], &events[..1]);
    assert_eq!(r.jobs[0].end, JobEnd::NodeFailed);
}

#[test]
fn a_job_that_can_never_start_is_reported_with_its_last_reason() {
    // Two 3-GPU jobs on 4 GPUs, and a horizon before the first ends.
    let r = run_timeline(
        &[node("n1", 4)],
        &[job("first", 0, 100, 3), job("second", 0, 100, 3)],
        &[],
        &TimelineOptions {
            horizon_ms: Some(50_000),
            ..TimelineOptions::default()
        },
        &mut common::native_pipeline("{}", false),
        None,
        &mut |_| {},
    );
    assert_eq!(r.jobs[0].end, JobEnd::Running);
    match &r.jobs[1].end {
        JobEnd::Pending { code, message } => {
            assert_eq!(*code, Some(ReasonCode::InsufficientGpus), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn same_input_same_result() {
    let a = simulate(r#"{"strict": false}"#, false, &workload(), &[]);
    let b = simulate(r#"{"strict": false}"#, false, &workload(), &[]);
    assert_eq!(runs(&a), runs(&b));
    assert_eq!(a.samples, b.samples);
}
