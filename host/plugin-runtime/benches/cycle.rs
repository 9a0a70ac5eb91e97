//! Benchmark: one full scheduling cycle (fifo + first-fit + priority-preempt) with the
//! plugins as wasm components in the sandbox, of contract 0.1 (every list whole in every
//! call) and 0.2 (what changed since the plugin's previous call), versus the same plugin
//! crates compiled natively, in the same run.
//!
//! `cargo bench -p gantry-plugin-runtime --bench cycle` prints, per size, the median
//! and p90 cycle time over repeated runs (native, 0.1 and 0.2 take turns cycle by cycle
//! on the same snapshots; `CYCLE_BENCH_SEQUENTIAL=1` runs each in one stretch instead)
//! and each wasm/native ratio, twice: the same
//! snapshot again (a quiet cluster), and a snapshot where 1% of the pending jobs are
//! replaced and one node's GPUs change before every cycle (a busy one). Sizes: 1,000
//! pending jobs × 100 nodes × 8 GPUs, and 10,000 × 1,000 × 8.
//!
//! For finding where time goes: `CYCLE_BENCH_SPLIT=1` times one busy 1,000-job `score`
//! call of `fifo` 0.2 against the host's encoding alone and the native call;
//! `CYCLE_BENCH_PROFILE=N` (with `CYCLE_BENCH_STAGES=priority,...`) only runs busy cycles
//! of the 0.2 pipeline, for `perf record` with `GANTRY_WASM_PERFMAP=1`.

use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, JobKind, Label, Node, NodeState, RunningJob, TaskAllocation,
    TaskGroup, next_revision,
};
use gantry_engine::{Interner, Native, Pipeline, Snapshot, StageSlot, run_cycle};
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::time::{Duration, Instant};

#[path = "cycle/diagnostics.rs"]
mod diagnostics;
use diagnostics::{split, travel};

/// A deterministic pseudo-random sequence (no extra dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A cluster half full of running jobs and `pending` jobs of 1-8 GPUs with realistic
/// names, users, accounts and labels (interned, as the daemon does). Jobs are numbered
/// as the daemon numbers them (`Job::revision`, `RunningJob::revision`), nodes are not.
fn snapshot(pending: usize, nodes: usize) -> Snapshot {
    let mut rng = Lcg(42);
    let mut s = Interner::new();
    let models = [s.intern("A100"), s.intern("H100")];
    let names: Vec<u32> = (0..50)
        .map(|i| s.intern(&format!("train-llm-{i}")))
        .collect();
    let users: Vec<u32> = (0..40).map(|i| s.intern(&format!("user{i}"))).collect();
    let accounts: Vec<u32> = (0..8).map(|i| s.intern(&format!("team{i}"))).collect();
    let queue = s.intern("default");
    let (lk, lv) = (
        s.intern("project"),
        (0..20)
            .map(|i| s.intern(&format!("p{i}")))
            .collect::<Vec<_>>(),
    );
    let mut node_list: Vec<Node> = (0..nodes as u32)
        .map(|id| Node {
            id,
            name: s.intern(&format!("gpu-node-{id:04}")),
            state: NodeState::Up,
            labels: vec![Label {
                key: lk,
                value: lv[id as usize % lv.len()],
            }],
            cpu_milli_total: 128_000,
            cpu_milli_free: 128_000,
            memory_mib_total: 1_024_000,
            memory_mib_free: 1_024_000,
            gpus: (0..8)
                .map(|index| Gpu {
                    index,
                    model: models[id as usize % 2],
                    memory_mib: 81_920,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            revision: 0,
        })
        .collect();
    let job = |id: u64, gpus: u32, rng: &mut Lcg| Job {
        id,
        name: names[rng.next(names.len() as u64) as usize],
        user: users[rng.next(users.len() as u64) as usize],
        account: accounts[rng.next(accounts.len() as u64) as usize],
        queue,
        tier: 0,
        submit_ms: 1_700_000_000_000 + id * 1000,
        time_limit_s: 3600 * (1 + rng.next(24)),
        kind: JobKind::Batch,
        preemptible: rng.next(2) == 0,
        labels: vec![Label {
            key: lk,
            value: lv[rng.next(lv.len() as u64) as usize],
        }],
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            gpu_milli: 0,
            cpu_milli: 8_000,
            memory_mib: 64_000,
            gpu_model_mask: 0,
        }],
        revision: next_revision(),
    };
    // Fill half of every node with running 4-GPU jobs.
    let mut running = Vec::new();
    for n in &mut node_list {
        let id = 1_000_000 + u64::from(n.id);
        for g in n.gpus.iter_mut().take(4) {
            g.free_milli = 0;
        }
        n.cpu_milli_free -= 8_000;
        n.memory_mib_free -= 64_000;
        running.push(RunningJob {
            job: job(id, 4, &mut rng),
            tasks: vec![TaskAllocation {
                node: n.id,
                gpus: (0..4)
                    .map(|index| GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: 8_000,
                memory_mib: 64_000,
            }],
            start_ms: 1_700_000_000_000,
            expected_end_ms: Some(1_700_000_000_000 + 3_600_000),
            score: 0.0,
            revision: next_revision(),
        });
    }
    let pending_jobs: Vec<Job> = (0..pending as u64)
        .map(|i| job(i + 1, 1 + rng.next(4) as u32, &mut rng))
        .collect();
    let ctx = Cycle {
        id: 1,
        now_ms: 1_700_000_100_000,
        seed: 1,
        gpu_models: models.to_vec(),
        strings: Vec::new(),
        ..Default::default()
    };
    let mut snap = Snapshot {
        ctx,
        pending: pending_jobs,
        nodes: node_list,
        running,
        evicting: Vec::new(),
    };
    snap.ctx.strings = s.into_strings();
    snap
}

fn native_pipeline() -> Pipeline {
    Pipeline {
        admission: Vec::new(),
        priority: vec![StageSlot::new(
            Box::new(Native::new(gantry_plugin_fifo::Fifo, "{}").expect("fifo")),
            "{}",
        )],
        placement: StageSlot::new(
            Box::new(
                Native::new(gantry_plugin_first_fit::FirstFit::default(), "{}").expect("first-fit"),
            ),
            "{}",
        ),
        preemption: Some(StageSlot::new(
            Box::new(
                Native::new(
                    gantry_plugin_priority_preempt::PriorityPreempt::default(),
                    "{}",
                )
                .expect("preempt"),
            ),
            "{}",
        )),
    }
}

/// The pipeline with the stages named in `wasm` as components (of contract `v01` or
/// 0.2), the rest native.
fn mixed_pipeline(rt: &Runtime, wasm: &[&str], v01: bool) -> Pipeline {
    let limits = Limits {
        deadline_ms: 10_000,
        memory_mib: 1024,
    };
    let inst = |bytes: &[u8]| {
        rt.load(bytes)
            .expect("load")
            .instantiate("{}", limits)
            .expect("instantiate")
    };
    let pick = |v02: &'static [u8], old: &'static [u8]| if v01 { old } else { v02 };
    let mut p = native_pipeline();
    if wasm.contains(&"priority") {
        p.priority = vec![StageSlot::new(
            Box::new(inst(pick(
                gantry_components::FIFO,
                gantry_components::FIFO_V01,
            ))),
            "{}",
        )];
    }
    if wasm.contains(&"placement") {
        p.placement = StageSlot::new(
            Box::new(inst(pick(
                gantry_components::FIRST_FIT,
                gantry_components::FIRST_FIT_V01,
            ))),
            "{}",
        );
    }
    if wasm.contains(&"preemption") {
        p.preemption = Some(StageSlot::new(
            Box::new(inst(pick(
                gantry_components::PRIORITY_PREEMPT,
                gantry_components::PRIORITY_PREEMPT_V01,
            ))),
            "{}",
        ));
    }
    p
}

const ALL: &[&str] = &["priority", "placement", "preemption"];

/// `snap` with 1% of its pending jobs replaced by new ones and node `turn`'s GPUs changed.
fn churn(snap: &mut Snapshot, turn: usize, next_id: &mut u64) {
    let n = snap.pending.len();
    for k in 0..(n / 100).max(1) {
        let at = (turn * 37 + k * 101) % n;
        let mut j = snap.pending.remove(at);
        j.id = *next_id;
        j.revision = next_revision();
        *next_id += 1;
        snap.pending.push(j);
    }
    let nodes = snap.nodes.len();
    let node = &mut snap.nodes[turn % nodes];
    for g in &mut node.gpus {
        g.free_milli = if g.free_milli == 0 { 1000 } else { 0 };
    }
}

/// Median, p90, starts of the last cycle and faults over all cycles, of one pipeline.
type Stats = (Duration, Duration, usize, usize);

/// Times `pipelines` on the same sequence of snapshots, one cycle each in turn (in a
/// rotating order), so that a slower or faster stretch of the machine falls on all of
/// them alike.
fn measure_paired(
    snap: &Snapshot,
    pipelines: &mut [&mut Pipeline],
    budget: Duration,
    busy: bool,
) -> Vec<Stats> {
    let mut snap = snap.clone();
    let mut next_id = 10_000_000;
    let k = pipelines.len();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); k];
    let mut started = vec![0; k];
    let mut faults = vec![0; k];
    let start = Instant::now();
    let mut turn = 0;
    while turn < 5 || (start.elapsed() < budget && turn < 200) {
        if busy {
            churn(&mut snap, turn, &mut next_id);
        }
        for step in 0..k {
            let i = (turn + step) % k;
            let t = Instant::now();
            let out = run_cycle(&snap, pipelines[i], None);
            times[i].push(t.elapsed());
            started[i] = out.starts.len();
            faults[i] += out.faults.len();
        }
        turn += 1;
    }
    (0..k)
        .map(|i| {
            let t = &mut times[i];
            t.sort();
            (t[t.len() / 2], t[t.len() * 9 / 10], started[i], faults[i])
        })
        .collect()
}

fn measure(snap: &Snapshot, pipeline: &mut Pipeline, budget: Duration, busy: bool) -> Stats {
    measure_paired(snap, &mut [pipeline], budget, busy)[0]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let rt = Runtime::new(RuntimeOptions::default()).expect("runtime");
    if std::env::var("CYCLE_BENCH_STATS").is_ok() {
        let snap = snapshot(10_000, 1_000);
        travel(&rt, &snap, 40);
        return;
    }
    if std::env::var("CYCLE_BENCH_SPLIT").is_ok() {
        split(&rt);
        return;
    }
    // CYCLE_BENCH_PROFILE=N: only busy cycles of the 0.2 pipeline at N pending jobs, for
    // `perf record` (no table).
    if let Some(pending) = std::env::var("CYCLE_BENCH_PROFILE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let snap = snapshot(pending, pending / 10);
        // CYCLE_BENCH_STAGES=priority,placement: only those as components.
        let stages = std::env::var("CYCLE_BENCH_STAGES").unwrap_or_default();
        let wasm: Vec<&str> = match stages.as_str() {
            "" => ALL.to_vec(),
            s => s.split(',').collect(),
        };
        let mut v02 = mixed_pipeline(&rt, &wasm, false);
        run_cycle(&snap, &mut v02, None);
        for _ in 0..20 {
            let (med, _, _, _) = measure(&snap, &mut v02, Duration::from_secs(5), true);
            println!("0.2 busy median {:.3} ms", ms(med));
        }
        return;
    }
    println!(
        "one scheduling cycle: fifo + first-fit (strict) + priority-preempt; median and p90 of repeated runs"
    );
    // CYCLE_BENCH_MODE=quiet|busy and CYCLE_BENCH_PENDING=N narrow the run.
    let mode = std::env::var("CYCLE_BENCH_MODE").unwrap_or_default();
    let only: Option<usize> = std::env::var("CYCLE_BENCH_PENDING")
        .ok()
        .and_then(|v| v.parse().ok());
    // CYCLE_BENCH_SEQUENTIAL=1: each pipeline's cycles in one stretch, one pipeline after
    // the other (how the tables before 2026-12-04's second session were measured).
    let sequential = std::env::var("CYCLE_BENCH_SEQUENTIAL").is_ok();
    for busy in [false, true] {
        if (mode == "quiet" && busy) || (mode == "busy" && !busy) {
            continue;
        }
        println!(
            "\n{}",
            if busy {
                "busy: 1% of pending jobs replaced and one node changed before each cycle"
            } else {
                "quiet: the same snapshot again"
            }
        );
        println!(
            "{:>8} {:>6} | {:>17} | {:>17} {:>6} | {:>17} {:>6} | starts",
            "pending", "nodes", "native med/p90", "0.1 med/p90", "ratio", "0.2 med/p90", "ratio"
        );
        for (pending, nodes) in [(1_000, 100), (10_000, 1_000)] {
            if only.is_some_and(|n| n != pending) {
                continue;
            }
            let snap = snapshot(pending, nodes);
            let mut native = native_pipeline();
            let mut v01 = mixed_pipeline(&rt, ALL, true);
            let mut v02 = mixed_pipeline(&rt, ALL, false);
            // Warm up (the first wasm call pays lazy initialisation and a full send).
            for p in [&mut native, &mut v01, &mut v02] {
                run_cycle(&snap, p, None);
            }
            let budget = Duration::from_secs(12);
            let all = if sequential {
                [&mut native, &mut v01, &mut v02]
                    .map(|p| measure(&snap, p, budget / 3, busy))
                    .to_vec()
            } else {
                measure_paired(&snap, &mut [&mut native, &mut v01, &mut v02], budget, busy)
            };
            let [
                (n_med, n_p90, n_starts, n_faults),
                (a_med, a_p90, a_starts, a_faults),
                (b_med, b_p90, b_starts, b_faults),
            ] = all[..]
            else {
                unreachable!("three pipelines measured")
            };
            assert_eq!(n_starts, a_starts, "0.1 and native must decide the same");
            assert_eq!(n_starts, b_starts, "0.2 and native must decide the same");
            assert_eq!(n_faults + a_faults + b_faults, 0, "no faults expected");
            println!(
                "{pending:>8} {nodes:>6} | {:>7.2} {:>6.2} ms | {:>7.2} {:>6.2} ms {:>5.2}x | {:>7.2} {:>6.2} ms {:>5.2}x | {n_starts}",
                ms(n_med),
                ms(n_p90),
                ms(a_med),
                ms(a_p90),
                ms(a_med) / ms(n_med),
                ms(b_med),
                ms(b_p90),
                ms(b_med) / ms(n_med),
            );
            for stage in ALL {
                for (label, old) in [("0.1", true), ("0.2", false)] {
                    let mut one = mixed_pipeline(&rt, &[stage], old);
                    run_cycle(&snap, &mut one, None);
                    let paired = measure_paired(
                        &snap,
                        &mut [&mut native, &mut one],
                        Duration::from_secs(4),
                        busy,
                    );
                    let (native_med, med) = (paired[0].0, paired[1].0);
                    println!(
                        "{:>17} only {stage:<10} as {label}: {:>8.2} ms (+{:.2} ms over native in the same run)",
                        "",
                        ms(med),
                        ms(med) - ms(native_med)
                    );
                }
            }
        }
    }
}
