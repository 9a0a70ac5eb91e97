//! `quota` (admission) and `reclaim` (preemption) on the virtual clock, with `fifo`
//! and strict `first-fit`, natively and as wasm components: both must give the same,
//! hand-worked results.
//!
//! * Kueue's documented example: two teams with 16 GPUs nominal each in cohort `lab`,
//!   borrowing limit 8, on 4 nodes of 8 GPUs. Team A fills 24 GPUs and is held at its
//!   borrowing limit; team B's jobs then reclaim A's borrowed GPUs after the grace
//!   period; A's evicted jobs are requeued and held until B gives quota back.
//! * No ping-pong: the same cohort over 2,500 periodic cycles while B keeps arriving;
//!   no job is evicted twice and evictions never exceed A's 8 borrowed jobs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{JobKind, ReasonCode};
use gantry_engine::sim::{
    JobEnd, SimJob, SimNode, SimTask, TimelineOptions, TimelineResult, run_timeline,
};
use gantry_engine::{
    AdmissionStage, Native, Pipeline, PlacementStage, PreemptionStage, PriorityStage, StageSlot,
};
use gantry_plugin_fifo::Fifo;
use gantry_plugin_first_fit::FirstFit;
use gantry_plugin_quota::Quota;
use gantry_plugin_reclaim::Reclaim;
use gantry_plugin_runtime::{Limits, PluginInstance, Runtime, RuntimeOptions};
use std::collections::BTreeMap;

/// Both plugins get the same object: `unlisted` has no effect on `reclaim`.
const QUEUES: &str = r#"{"queues": {
    "team-a": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"},
    "team-b": {"nominal_gpus": 16, "borrowing_limit_gpus": 8, "cohort": "lab"}},
    "unlisted": "admit"}"#;

fn nodes() -> Vec<SimNode> {
    (1..=4)
        .map(|i| SimNode {
            name: format!("n{i}"),
            cpu_milli: 64_000,
            memory_mib: 256 * 1024,
            gpus: 8,
            gpu_model: "A100".into(),
            gpu_memory_mib: 81_920,
            labels: BTreeMap::new(),
        })
        .collect()
}

fn job(name: String, queue: &str, submit_s: u64, duration_s: u64, gpus: u32) -> SimJob {
    SimJob {
        name,
        user: queue.into(),
        account: queue.into(),
        queue: queue.into(),
        tier: 0,
        kind: JobKind::Batch,
        preemptible: true,
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

fn native_pipeline() -> Pipeline {
    let admission: Box<dyn AdmissionStage> =
        Box::new(Native::new(Quota::default(), QUEUES).unwrap());
    let priority: Box<dyn PriorityStage> = Box::new(Native::new(Fifo, "{}").unwrap());
    let placement: Box<dyn PlacementStage> =
        Box::new(Native::new(FirstFit::default(), "{}").unwrap());
    let preemption: Box<dyn PreemptionStage> =
        Box::new(Native::new(Reclaim::default(), QUEUES).unwrap());
    Pipeline {
        admission: vec![StageSlot::new(admission, QUEUES)],
        priority: vec![StageSlot::new(priority, "{}")],
        placement: StageSlot::new(placement, "{}"),
        preemption: Some(StageSlot::new(preemption, QUEUES)),
    }
}

fn wasm_pipeline(rt: &Runtime) -> Pipeline {
    // A generous deadline: the test machine is shared; faults are asserted absent.
    let limits = Limits {
        deadline_ms: 10_000,
        ..Limits::default()
    };
    let inst = |bytes: &[u8], config: &str| -> PluginInstance {
        rt.load(bytes).unwrap().instantiate(config, limits).unwrap()
    };
    let admission: Box<dyn AdmissionStage> = Box::new(inst(comp::QUOTA, QUEUES));
    let priority: Box<dyn PriorityStage> = Box::new(inst(comp::FIFO, "{}"));
    let placement: Box<dyn PlacementStage> = Box::new(inst(comp::FIRST_FIT, "{}"));
    let preemption: Box<dyn PreemptionStage> = Box::new(inst(comp::RECLAIM, QUEUES));
    Pipeline {
        admission: vec![StageSlot::new(admission, QUEUES)],
        priority: vec![StageSlot::new(priority, "{}")],
        placement: StageSlot::new(placement, "{}"),
        preemption: Some(StageSlot::new(preemption, QUEUES)),
    }
}

/// Runs `jobs` natively and as wasm, checks both agree and have no faults, and
/// returns the native result.
fn both_ways(jobs: &[SimJob], opts: &TimelineOptions) -> TimelineResult {
    let run = |pipeline: &mut Pipeline| {
        run_timeline(&nodes(), jobs, &[], opts, pipeline, None, &mut |_| {})
    };
    let native = run(&mut native_pipeline());
    let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
    let wasm = run(&mut wasm_pipeline(&rt));
    assert!(
        native.faults.is_empty(),
        "native faults: {:?}",
        native.faults
    );
    assert!(wasm.faults.is_empty(), "wasm faults: {:?}", wasm.faults);
    assert_eq!(native.jobs, wasm.jobs, "native and wasm runs differ");
    assert_eq!(
        (native.cycles, native.evictions, native.end_ms),
        (wasm.cycles, wasm.evictions, wasm.end_ms)
    );
    assert_eq!(native.samples, wasm.samples);
    native
}

fn start_s(r: &TimelineResult, i: usize) -> Option<u64> {
    r.jobs[i].start_ms.map(|ms| ms / 1000)
}

/// Team A: 30 one-GPU jobs `a01`..`a30` submitted at 1..=30 s, running "forever".
/// Team B: 16 one-GPU jobs `b01`..`b16` at 100 s, 500 s each. Job ids: A k is k,
/// B k is 30 + k.
fn kueue_example() -> Vec<SimJob> {
    let a = (1..=30).map(|k| job(format!("a{k:02}"), "team-a", k, 100_000, 1));
    let b = (1..=16).map(|k| job(format!("b{k:02}"), "team-b", 100, 500, 1));
    a.chain(b).collect()
}

#[test]
fn kueue_example_borrow_reclaim_and_requeue_match_the_hand_worked_timeline() {
    let opts = TimelineOptions {
        horizon_ms: Some(1_000_000),
        ..TimelineOptions::default()
    };
    let r = both_ways(&kueue_example(), &opts);
    // A k starts at k s: 1..16 within nominal, 17..24 borrowed (B lends, limit 8).
    for k in 1..=24 {
        assert_eq!(start_s(&r, k - 1), Some(k as u64), "a{k:02}");
        assert_eq!(r.jobs[k - 1].end, JobEnd::Running, "a{k:02}");
    }
    // 25..30 are held at the borrowing limit all along (before B, and again after
    // B's jobs leave at 660 s and A borrows 8 again).
    let limit_msg = "queue team-a: 16 of 16 GPUs nominal in use, borrowing 8 of limit 8 from \
                     cohort lab; job needs 1, which would make it borrow 9";
    for k in 25..=30 {
        assert_eq!(start_s(&r, k - 1), None, "a{k:02}");
        assert_eq!(
            r.jobs[k - 1].end,
            JobEnd::Pending {
                code: Some(ReasonCode::HeldByPolicy),
                message: limit_msg.into()
            },
            "a{k:02}"
        );
    }
    // At 100 s B's first 8 start on the free node; the other 8 are blocked and reclaim
    // evicts A's 8 lowest-priority (latest submitted) jobs 17..24, one per blocked job,
    // with the 60 s grace: they stop and are requeued at 160 s, when B's 8 start.
    for k in 1..=16 {
        let expect = if k <= 8 { 100 } else { 160 };
        assert_eq!(start_s(&r, 29 + k), Some(expect), "b{k:02}");
        assert_eq!(r.jobs[29 + k].end, JobEnd::Completed, "b{k:02}");
        assert_eq!(
            r.jobs[29 + k].end_ms,
            Some((expect + 500) * 1000),
            "b{k:02}"
        );
    }
    let evicted: Vec<usize> = (0..r.jobs.len())
        .filter(|&i| r.jobs[i].evictions > 0)
        .map(|i| i + 1)
        .collect();
    assert_eq!(evicted, (17..=24).collect::<Vec<_>>());
    assert!(
        r.jobs
            .iter()
            .all(|j| j.evictions <= 1 && j.requeues == j.evictions)
    );
    assert_eq!(r.evictions, 8);
    // Requeued at 160 s, A's 17..24 are held (B uses or has admitted all 16 of its
    // nominal quota, so the cohort lends nothing) until B's first 8 end at 600 s; then
    // they borrow again and restart. GPU-seconds pin both runs, up to the last event
    // (660 s): job k ran k..160 and 600..660.
    for k in 17..=24u64 {
        let expect = (160 - k) + 60;
        assert_eq!(r.jobs[k as usize - 1].gpu_seconds, expect as f64, "a{k:02}");
    }
    for k in 1..=16u64 {
        assert_eq!(
            r.jobs[k as usize - 1].gpu_seconds,
            (660 - k) as f64,
            "a{k:02}"
        );
    }
    assert_eq!(r.end_ms, 660_000);
}

#[test]
fn evicted_borrowers_are_held_with_the_cohort_numbers_while_b_keeps_its_nominal() {
    // Stop at 300 s: A's requeued jobs are still pending, held by quota.
    let opts = TimelineOptions {
        horizon_ms: Some(300_000),
        ..TimelineOptions::default()
    };
    let r = both_ways(&kueue_example(), &opts);
    let held = "queue team-a: 16 of 16 GPUs nominal in use, borrowing 0 of limit 8 from \
                cohort lab; cohort lab can lend 0 more; job needs 1, which would borrow 1 more";
    for k in 17..=24 {
        assert_eq!(
            r.jobs[k - 1].end,
            JobEnd::Pending {
                code: Some(ReasonCode::HeldByPolicy),
                message: held.into()
            },
            "a{k:02}"
        );
        assert_eq!(
            r.jobs[k - 1].end_ms,
            Some(160_000),
            "a{k:02} stopped after the grace"
        );
    }
}

/// Team A: 40 one-GPU jobs at 1..=40 s. Team B: 12 two-GPU jobs at 200 + 30 k s
/// (k = 0..11). All run "forever". Ids: A k is k, B k is 40 + k + 1.
fn contention() -> Vec<SimJob> {
    let a = (1..=40).map(|k| job(format!("a{k:02}"), "team-a", k, 100_000, 1));
    let b = (0..12).map(|k| job(format!("b{k:02}"), "team-b", 200 + 30 * k, 100_000, 2));
    a.chain(b).collect()
}

#[test]
fn no_ping_pong_over_thousands_of_periodic_cycles() {
    let opts = TimelineOptions {
        cycle_interval_ms: Some(1_000),
        horizon_ms: Some(2_500_000),
        ..TimelineOptions::default()
    };
    let r = both_ways(&contention(), &opts);
    assert!(r.cycles >= 1_000, "only {} cycles", r.cycles);
    // A borrows 8 (jobs 17..24); each is evicted at most once, and only those.
    let borrowed = 8;
    assert!(
        r.jobs.iter().all(|j| j.evictions <= 1),
        "a job was evicted twice"
    );
    assert!(r.evictions <= borrowed, "{} evictions", r.evictions);
    let evicted: Vec<usize> = (0..r.jobs.len())
        .filter(|&i| r.jobs[i].evictions > 0)
        .map(|i| i + 1)
        .collect();
    assert_eq!(evicted, (17..=24).collect::<Vec<_>>());
    // Hand-worked: B 0..3 start on the free node at once. B 4 (320 s) reclaims A 24
    // and 23 (a 2-GPU task needs both on one node), done at 380 s; at 380 s B 4 starts
    // and B 5 and B 6 reclaim A 22+21 and 20+19 (done 440 s); at 440 s B 5 and B 6
    // start and B 7 reclaims A 18+17 (done 500 s). B 8..11 would borrow: A is back at
    // its nominal and B's nominal is full, so the cohort lends nothing and they wait.
    let b_starts: Vec<Option<u64>> = (0..12).map(|k| start_s(&r, 40 + k)).collect();
    let expect = [200, 230, 260, 290, 380, 440, 440, 500];
    let mut want: Vec<Option<u64>> = expect.iter().map(|&s| Some(s)).collect();
    want.extend([None; 4]);
    assert_eq!(b_starts, want);
    for k in 25..=40 {
        assert_eq!(start_s(&r, k - 1), None, "a{k:02} never borrows");
    }
    for k in 17..=24 {
        assert!(
            matches!(
                &r.jobs[k - 1].end,
                JobEnd::Pending {
                    code: Some(ReasonCode::HeldByPolicy),
                    ..
                }
            ),
            "a{k:02}: {:?}",
            r.jobs[k - 1].end
        );
    }
    let b_held = "queue team-b: 16 of 16 GPUs nominal in use, borrowing 0 of limit 8 from \
                  cohort lab; cohort lab can lend 0 more; job needs 2, which would borrow 2 more";
    for k in 8..12 {
        assert_eq!(
            r.jobs[40 + k].end,
            JobEnd::Pending {
                code: Some(ReasonCode::HeldByPolicy),
                message: b_held.into()
            },
            "b{k:02}"
        );
    }
}

#[test]
fn a_job_larger_than_its_queue_could_ever_hold_is_rejected_at_submit() {
    // A gang of 25 one-GPU tasks: it fits the empty cluster, not the queue.
    let mut huge = job("huge".into(), "team-b", 0, 10, 1);
    huge.tasks[0].count = 25;
    let jobs = vec![huge];
    let r = both_ways(&jobs, &TimelineOptions::default());
    assert_eq!(
        r.jobs[0].end,
        JobEnd::Rejected {
            by: "quota".into(),
            message: "job needs 25 GPUs but queue team-b can never hold more than 24 \
                      (16 nominal + borrowing limit 8 in cohort lab)"
                .into()
        }
    );
}
