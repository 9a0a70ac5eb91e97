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
//! * Flavors (quotas per GPU model): 2 nodes of 8 A100 and 2 of 8 L4, both teams with
//!   8 nominal per model and borrowing limit 4 per model. Team A borrows 4 A100 and,
//!   separately, 4 L4; team B's A100 jobs reclaim exactly the 4 borrowed A100 GPUs
//!   while A's L4 jobs (also borrowing, and of lower priority) are untouched.
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

fn node(name: String, model: &str) -> SimNode {
    SimNode {
        name,
        cpu_milli: 64_000,
        memory_mib: 256 * 1024,
        gpus: 8,
        gpu_model: model.into(),
        gpu_memory_mib: 81_920,
        labels: BTreeMap::new(),
    }
}

fn nodes() -> Vec<SimNode> {
    (1..=4).map(|i| node(format!("n{i}"), "A100")).collect()
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

fn native_pipeline(queues: &str) -> Pipeline {
    let admission: Box<dyn AdmissionStage> =
        Box::new(Native::new(Quota::default(), queues).unwrap());
    let priority: Box<dyn PriorityStage> = Box::new(Native::new(Fifo, "{}").unwrap());
    let placement: Box<dyn PlacementStage> =
        Box::new(Native::new(FirstFit::default(), "{}").unwrap());
    let preemption: Box<dyn PreemptionStage> =
        Box::new(Native::new(Reclaim::default(), queues).unwrap());
    Pipeline {
        admission: vec![StageSlot::new(admission, queues)],
        priority: vec![StageSlot::new(priority, "{}")],
        placement: StageSlot::new(placement, "{}"),
        preemption: Some(StageSlot::new(preemption, queues)),
    }
}

fn wasm_pipeline(rt: &Runtime, queues: &str) -> Pipeline {
    // A generous deadline: the test machine is shared; faults are asserted absent.
    let limits = Limits {
        deadline_ms: 10_000,
        ..Limits::default()
    };
    let inst = |bytes: &[u8], config: &str| -> PluginInstance {
        rt.load(bytes).unwrap().instantiate(config, limits).unwrap()
    };
    let admission: Box<dyn AdmissionStage> = Box::new(inst(comp::QUOTA, queues));
    let priority: Box<dyn PriorityStage> = Box::new(inst(comp::FIFO, "{}"));
    let placement: Box<dyn PlacementStage> = Box::new(inst(comp::FIRST_FIT, "{}"));
    let preemption: Box<dyn PreemptionStage> = Box::new(inst(comp::RECLAIM, queues));
    Pipeline {
        admission: vec![StageSlot::new(admission, queues)],
        priority: vec![StageSlot::new(priority, "{}")],
        placement: StageSlot::new(placement, "{}"),
        preemption: Some(StageSlot::new(preemption, queues)),
    }
}

/// Runs `jobs` on 4 nodes of 8 A100 with [`QUEUES`]: see [`run_both`].
fn both_ways(jobs: &[SimJob], opts: &TimelineOptions) -> TimelineResult {
    run_both(&nodes(), QUEUES, jobs, opts)
}

/// Runs `jobs` natively and as wasm, checks both agree and have no faults, and
/// returns the native result.
fn run_both(
    nodes: &[SimNode],
    queues: &str,
    jobs: &[SimJob],
    opts: &TimelineOptions,
) -> TimelineResult {
    let run =
        |pipeline: &mut Pipeline| run_timeline(nodes, jobs, &[], opts, pipeline, None, &mut |_| {});
    let native = run(&mut native_pipeline(queues));
    let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
    let wasm = run(&mut wasm_pipeline(&rt, queues));
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

/// Quotas per GPU model: each team 8 A100 and 8 L4 nominal, borrowing limit 4 each.
const FLAVORS: &str = r#"{"queues": {
    "team-a": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4},
        "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4, "lending_limit_gpus": null}}},
    "team-b": {"cohort": "lab", "flavors": {
        "A100": {"nominal_gpus": 8, "borrowing_limit_gpus": 4},
        "L4": {"nominal_gpus": 8, "borrowing_limit_gpus": 4}}}}}"#;

/// Nodes a1, a2 (8 A100 each) then l1, l2 (8 L4 each).
fn flavor_nodes() -> Vec<SimNode> {
    let a = (1..=2).map(|i| node(format!("a{i}"), "A100"));
    a.chain((1..=2).map(|i| node(format!("l{i}"), "L4")))
        .collect()
}

fn pinned(mut j: SimJob, model: &str) -> SimJob {
    j.tasks[0].gpu_models = vec![model.into()];
    j
}

/// Ids (1-based): A's A100 jobs `a01`..`a14` (ids 1..=14) at 1..=14 s and A's L4 jobs
/// `l01`..`l14` (ids 15..=28) at 21..=34 s, all running "forever"; B's A100 jobs
/// `b01`..`b08` (ids 29..=36) at 100 s for 500 s; at 50 s A's `any` (id 37: 1 GPU of
/// any model) and `cpu` (id 38: no GPU, 10 s).
fn flavor_jobs() -> Vec<SimJob> {
    let a = (1..=14).map(|k| pinned(job(format!("a{k:02}"), "team-a", k, 100_000, 1), "A100"));
    let l = (1..=14).map(|k| pinned(job(format!("l{k:02}"), "team-a", 20 + k, 100_000, 1), "L4"));
    let b = (1..=8).map(|k| pinned(job(format!("b{k:02}"), "team-b", 100, 500, 1), "A100"));
    let extra = [
        job("any".into(), "team-a", 50, 10, 1),
        job("cpu".into(), "team-a", 50, 10, 0),
    ];
    a.chain(l).chain(b).chain(extra).collect()
}

const A100_LIMIT: &str = "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 4 of \
                          limit 4 from cohort lab; job needs 1, which would make it borrow 5";
const L4_LIMIT: &str = "queue team-a flavor L4: 8 of 8 GPUs nominal in use, borrowing 4 of \
                        limit 4 from cohort lab; job needs 1, which would make it borrow 5";

fn held(message: &str) -> JobEnd {
    JobEnd::Pending {
        code: Some(ReasonCode::HeldByPolicy),
        message: message.into(),
    }
}

#[test]
fn flavors_borrow_and_reclaim_per_gpu_model_on_the_hand_worked_timeline() {
    let opts = TimelineOptions {
        horizon_ms: Some(1_000_000),
        ..TimelineOptions::default()
    };
    let r = run_both(&flavor_nodes(), FLAVORS, &flavor_jobs(), &opts);
    // A100: a01..a08 within nominal, a09..a12 borrow team-b's idle A100 (limit 4).
    // L4, separately: l01..l08 within nominal, l09..l12 borrow 4.
    for k in 1..=12u64 {
        assert_eq!(start_s(&r, k as usize - 1), Some(k), "a{k:02}");
        assert_eq!(start_s(&r, k as usize + 13), Some(20 + k), "l{k:02}");
        assert_eq!(r.jobs[k as usize + 13].end, JobEnd::Running, "l{k:02}");
        assert_eq!(r.jobs[k as usize + 13].evictions, 0, "l{k:02}");
        // Untouched: l k ran from 20 + k s to the last event at 660 s.
        assert_eq!(r.jobs[k as usize + 13].gpu_seconds, (640 - k) as f64);
    }
    // a13, a14 and l13, l14 are held at their flavor's borrowing limit (at 660 s, the
    // last cycle, A is back at 12 A100).
    for i in [12, 13] {
        assert_eq!(start_s(&r, i), None);
        assert_eq!(r.jobs[i].end, held(A100_LIMIT), "a{:02}", i + 1);
        assert_eq!(start_s(&r, i + 14), None);
        assert_eq!(r.jobs[i + 14].end, held(L4_LIMIT), "l{:02}", i + 1);
    }
    // At 100 s b01..b04 start on a2's 4 free A100; b05..b08 are blocked and each
    // reclaims one borrowed A100 job, latest first: a12, a11, a10, a09 (A's L4 jobs,
    // borrowing and of even lower priority, hold no A100). After the 60 s grace they
    // stop and are requeued, and b05..b08 start at 160 s.
    for k in 1..=8u64 {
        let i = 28 + k as usize - 1;
        let expect = if k <= 4 { 100 } else { 160 };
        assert_eq!(start_s(&r, i), Some(expect), "b{k:02}");
        assert_eq!(r.jobs[i].end, JobEnd::Completed, "b{k:02}");
        assert_eq!(r.jobs[i].end_ms, Some((expect + 500) * 1000), "b{k:02}");
    }
    let evicted: Vec<usize> = (0..r.jobs.len())
        .filter(|&i| r.jobs[i].evictions > 0)
        .map(|i| i + 1)
        .collect();
    assert_eq!(evicted, vec![9, 10, 11, 12]);
    assert_eq!(r.evictions, 4);
    assert!(
        r.jobs
            .iter()
            .all(|j| j.evictions <= 1 && j.requeues == j.evictions)
    );
    // Requeued at 160 s, a09..a12 wait while B uses its whole A100 nominal; at 600 s
    // b01..b04 end, B lends 4 A100 again and they restart: a k ran k..160 and
    // 600..660. a01..a08 ran k..660.
    for k in 1..=12u64 {
        let want = if k <= 8 { 660 - k } else { (160 - k) + 60 };
        assert_eq!(r.jobs[k as usize - 1].gpu_seconds, want as f64, "a{k:02}");
        assert_eq!(r.jobs[k as usize - 1].end, JobEnd::Running, "a{k:02}");
    }
    // Not pinned to one flavor: rejected at submit. Without GPUs: admitted freely.
    assert_eq!(
        r.jobs[36].end,
        JobEnd::Rejected {
            by: "quota".into(),
            message: "queue team-a has quotas per GPU model (A100, L4); ask for one of them \
                      with gpu_models (the job allows any model)"
                .into()
        }
    );
    assert_eq!(start_s(&r, 37), Some(50));
    assert_eq!(r.jobs[37].end, JobEnd::Completed);
    assert_eq!(r.end_ms, 660_000);
}

#[test]
fn reclaimed_a100_borrowers_are_held_per_flavor_while_b_uses_its_a100_nominal() {
    let opts = TimelineOptions {
        horizon_ms: Some(300_000),
        ..TimelineOptions::default()
    };
    let r = run_both(&flavor_nodes(), FLAVORS, &flavor_jobs(), &opts);
    // Last cycle at 160 s: B runs 4 A100 and admits its other 4, so the cohort lends
    // no A100; A's L4 jobs still borrow 4 and l13, l14 stay at the L4 limit.
    let short = "queue team-a flavor A100: 8 of 8 GPUs nominal in use, borrowing 0 of limit 4 \
                 from cohort lab; cohort lab can lend 0 more; job needs 1, which would borrow \
                 1 more";
    for i in 8..=13 {
        assert_eq!(r.jobs[i].end, held(short), "a{:02}", i + 1);
    }
    for i in 8..=11 {
        assert_eq!(r.jobs[i].end_ms, Some(160_000), "a{:02}", i + 1);
    }
    for i in [26, 27] {
        assert_eq!(r.jobs[i].end, held(L4_LIMIT), "l{:02}", i - 13);
    }
}
