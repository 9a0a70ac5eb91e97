//! The `backfill` placement plugin (EASY backfill on time limits) in virtual time,
//! as a wasm component and compiled natively, with `fifo` priority: both must give
//! the hand-worked timeline below, the same reasons, and the same plans.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, JobKind, Label, Node, NodeState, Placement, ReasonCode, RunningJob,
    TaskAllocation, TaskGroup,
};
use gantry_engine::sim::{JobEnd, SimJob, SimNode, SimTask, TimelineOptions, TimelineResult};
use gantry_engine::{Native, Pipeline, PlacementStage, StageSlot};
use gantry_plugin_backfill::Backfill;
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::collections::BTreeMap;

fn pipeline(wasm: bool, config: &str) -> Pipeline {
    let (priority, placement): (
        Box<dyn gantry_engine::PriorityStage>,
        Box<dyn PlacementStage>,
    ) = if wasm {
        let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
        let inst = |bytes: &[u8], config: &str| {
            rt.load(bytes)
                .unwrap()
                .instantiate(config, Limits::default())
                .unwrap()
        };
        (
            Box::new(inst(comp::FIFO, "{}")),
            Box::new(inst(comp::BACKFILL, config)),
        )
    } else {
        (
            Box::new(Native::new(gantry_plugin_fifo::Fifo, "{}").unwrap()),
            Box::new(Native::new(Backfill::default(), config).unwrap()),
        )
    };
    Pipeline {
        admission: vec![],
        priority: vec![StageSlot::new(priority, "{}")],
        placement: StageSlot::new(placement, config),
        preemption: None,
    }
}

fn sim_job(name: &str, submit_s: u64, duration_s: u64, limit_s: u64, gpus: u32) -> SimJob {
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
        time_limit_s: limit_s,
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

/// One 4-GPU node. A (2 GPUs, 100 s) and B (2 GPUs, 300 s) start at 0. BIG (4 GPUs,
/// limit 200 s) arrives at 10 s and is reserved for 300 s, when B's limit ends. At
/// 100 s A ends: S1 (1 GPU, limit 150 s, ends 250 s) and S2 (1 GPU, limit 200 s,
/// ends exactly 300 s) run ahead of BIG; LONG (limit 400 s) would run past 300 s on
/// GPUs BIG needs and NOLIM has no limit, so both wait. BIG starts at 300 s exactly,
/// ends at 500 s; LONG (50 s) and NOLIM (10 s) then start.
fn workload() -> Vec<SimJob> {
    vec![
        sim_job("A", 0, 100, 100, 2),
        sim_job("B", 0, 300, 300, 2),
        sim_job("BIG", 10, 200, 200, 4),
        sim_job("S1", 20, 150, 150, 1),
        sim_job("LONG", 30, 50, 400, 1),
        sim_job("NOLIM", 40, 10, 0, 1),
        sim_job("S2", 50, 200, 200, 1),
    ]
}

fn cluster() -> Vec<SimNode> {
    vec![SimNode {
        name: "n1".into(),
        cpu_milli: 64_000,
        memory_mib: 256 * 1024,
        gpus: 4,
        gpu_model: "A100".into(),
        gpu_memory_mib: 81_920,
        labels: BTreeMap::new(),
    }]
}

fn simulate(wasm: bool, horizon_s: Option<u64>) -> TimelineResult {
    let opts = TimelineOptions {
        horizon_ms: horizon_s.map(|s| s * 1000),
        ..TimelineOptions::default()
    };
    gantry_engine::sim::run_timeline(
        &cluster(),
        &workload(),
        &[],
        &opts,
        &mut pipeline(wasm, "{}"),
        None,
        &mut |_| {},
    )
}

/// (name, start s, end s) of every job that ran.
fn runs(r: &TimelineResult) -> Vec<(String, u64, u64)> {
    r.jobs
        .iter()
        .filter_map(|j| Some((j.name.clone(), j.start_ms? / 1000, j.end_ms? / 1000)))
        .collect()
}

fn pending(r: &TimelineResult, i: usize) -> (ReasonCode, String) {
    match &r.jobs[i].end {
        JobEnd::Pending { code, message } => (code.unwrap(), message.clone()),
        other => panic!("{} is {other:?}", r.jobs[i].name),
    }
}

#[test]
fn short_jobs_run_ahead_of_the_reserved_big_job_which_starts_on_time() {
    let expected: Vec<(String, u64, u64)> = [
        ("A", 0, 100),
        ("B", 0, 300),
        ("BIG", 300, 500),
        ("S1", 100, 250),
        ("LONG", 500, 550),
        ("NOLIM", 500, 510),
        ("S2", 100, 300),
    ]
    .iter()
    .map(|&(n, s, e)| (n.to_string(), s, e))
    .collect();
    let native = simulate(false, None);
    let wasm = simulate(true, None);
    assert_eq!(runs(&native), expected);
    assert_eq!(runs(&wasm), expected);
    assert!(native.faults.is_empty() && wasm.faults.is_empty());
    assert!(native.jobs.iter().all(|j| j.end == JobEnd::Completed));
}

#[test]
fn reasons_after_the_cycle_at_100_s_name_the_reservation() {
    for wasm in [false, true] {
        // Stop before the next event (S1 ends at 250 s): the reasons of the 100 s cycle.
        let r = simulate(wasm, Some(120));
        let (code, big) = pending(&r, 2);
        assert_eq!(code, ReasonCode::InsufficientGpus);
        assert_eq!(
            big,
            "needs 4 GPUs of model any; 2 free of 4 (2 whole GPUs free); reserved to start \
             at +3m20s (1970-01-01T00:05:00Z) on node n1 when job 2 ends",
            "wasm: {wasm}"
        );
        let (code, long) = pending(&r, 4);
        assert_eq!(code, ReasonCode::BlockedByHigherPriority);
        assert_eq!(
            long,
            "fits now but would delay job 3's reserved start at +3m20s \
             (1970-01-01T00:05:00Z): with its time limit of 6m40s it would still hold \
             resources reserved for job 3 then"
        );
        let (_, nolim) = pending(&r, 5);
        assert!(
            nolim.starts_with("has no time limit, so it cannot be backfilled"),
            "{nolim}"
        );
        assert_eq!(r.jobs[3].start_ms, Some(100_000));
        assert_eq!(r.jobs[6].start_ms, Some(100_000));
    }
}

/// A mixed snapshot: racks, GPU groups, partly used GPUs, a drained node, running
/// jobs with and without limits, gangs and fractions.
fn snapshot() -> (Cycle, Vec<Job>, Vec<Node>, Vec<RunningJob>) {
    let strings = [
        "",
        "A100",
        "rack",
        "r1",
        "r2",
        "gantry.io/gpu-groups",
        "0-3|4-7",
    ];
    let mut strings: Vec<String> = strings.iter().map(|s| s.to_string()).collect();
    strings.extend((0..6).map(|i| format!("node-{i}")));
    let ctx = Cycle {
        id: 3,
        now_ms: 1_700_000_000_000,
        strings,
        gpu_models: vec![1],
        ..Default::default()
    };
    let nodes: Vec<Node> = (0..6u32)
        .map(|id| Node {
            id,
            name: 7 + id,
            state: if id == 5 {
                NodeState::Draining
            } else {
                NodeState::Up
            },
            labels: vec![
                Label {
                    key: 2,
                    value: 3 + id % 2,
                },
                Label { key: 5, value: 6 },
            ],
            cpu_milli_total: 64_000,
            cpu_milli_free: 60_000,
            memory_mib_total: 512_000,
            memory_mib_free: 500_000,
            gpus: (0..8)
                .map(|index| Gpu {
                    index,
                    model: 1,
                    memory_mib: 81_920,
                    free_milli: match (id, index) {
                        (0, 0..=5) | (1, 0..=3) | (2, 2) => 0,
                        (3, 1) => 500,
                        _ => 1000,
                    },
                    healthy: true,
                    parent: None,
                })
                .collect(),
            revision: 0,
        })
        .collect();
    let hold = |id: u64, node: u32, gpus: std::ops::Range<u32>, end_s: Option<u64>| RunningJob {
        job: Job {
            id,
            time_limit_s: end_s.unwrap_or(0),
            ..Default::default()
        },
        tasks: vec![TaskAllocation {
            node,
            gpus: gpus.map(|index| GpuShare { index, milli: 1000 }).collect(),
            cpu_milli: 4_000,
            memory_mib: 12_000,
        }],
        start_ms: ctx.now_ms - 1000,
        expected_end_ms: end_s.map(|s| ctx.now_ms + s * 1000),
        score: 0.0,
        revision: 0,
    };
    let running = vec![
        hold(900, 0, 0..6, Some(1800)),
        hold(901, 1, 0..4, Some(3600)),
        hold(902, 2, 2..3, None),
    ];
    let job = |id: u64, count: u32, gpus: u32, milli: u32, limit_s: u64| Job {
        id,
        submit_ms: id,
        time_limit_s: limit_s,
        tasks: vec![TaskGroup {
            count,
            gpus,
            gpu_milli: milli,
            cpu_milli: 2_000,
            memory_mib: 8_000,
            gpu_model_mask: 0,
        }],
        ..Default::default()
    };
    let jobs = vec![
        job(1, 1, 4, 0, 3600),
        job(2, 4, 8, 0, 7200), // 32 GPUs: blocked, reserved
        job(3, 4, 0, 250, 600),
        job(4, 2, 4, 0, 1200),
        job(5, 1, 2, 0, 0),
        job(6, 8, 1, 0, 900),
        job(7, 1, 0, 500, 86_400),
        job(8, 2, 8, 0, 600),
    ];
    (ctx, jobs, nodes, running)
}

#[test]
fn wasm_plans_match_native_plans_in_every_mode() {
    let rt = Runtime::new(RuntimeOptions { cache_dir: None }).unwrap();
    let loaded = rt.load(comp::BACKFILL).unwrap();
    assert_eq!(loaded.metadata().name, "backfill");
    let (ctx, jobs, nodes, running) = snapshot();
    let mut plans = Vec::new();
    for config in [
        "{}",
        r#"{"scoring": "spread"}"#,
        r#"{"scoring": "topology", "conservative": 2}"#,
        r#"{"max_jobs": 3, "window_s": 600}"#,
    ] {
        let mut wasm = loaded.instantiate(config, Limits::default()).unwrap();
        let mut native = Native::new(Backfill::default(), config).unwrap();
        let w = wasm.place(&ctx, &jobs, &nodes, &running).unwrap();
        let n = Placement::place(&mut native, &ctx, &jobs, &nodes, &running).unwrap();
        assert_eq!(w, n, "{config}");
        assert!(
            !w.starts.is_empty() && !w.pending.is_empty(),
            "{config}: {w:?}"
        );
        gantry_engine::validate_plan(&ctx, &jobs, &nodes, &w).unwrap();
        plans.push(format!("{w:?}"));
    }
    plans.sort();
    plans.dedup();
    assert_eq!(plans.len(), 4, "the configs decide differently");
    let err = loaded
        .instantiate(r#"{"window": 5}"#, Limits::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("window"), "{err}");
}
