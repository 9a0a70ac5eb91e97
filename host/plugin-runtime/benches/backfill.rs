//! Benchmark: the `backfill` placement plugin on 10,000 pending jobs × 1,000 nodes ×
//! 8 GPUs (half of every node held by running jobs that end over the next day, some
//! without a time limit; pending jobs of 1-8 GPUs, fractions and 2-node gangs, most
//! with time limits), as a wasm component in the sandbox versus compiled natively,
//! on the same snapshot, in the same run. Also one whole cycle (fifo + backfill).
//!
//! `cargo bench -p gantry-plugin-runtime --bench backfill` prints, per config, the
//! median and p90 time of one `place` call, the wasm/native ratio, and how many jobs
//! started and were reserved. Target: under 50 ms in wasm, wasm ≤ 1.5× native.

use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, JobKind, Label, Node, NodeState, Placement, Plan, RunningJob,
    TaskAllocation, TaskGroup,
};
use gantry_engine::{Interner, Native, Pipeline, PlacementStage, Snapshot, StageSlot, run_cycle};
use gantry_plugin_backfill::Backfill;
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::time::{Duration, Instant};

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

const NOW_MS: u64 = 1_700_000_000_000;

fn group(count: u32, gpus: u32, gpu_milli: u32) -> TaskGroup {
    TaskGroup {
        count,
        gpus,
        gpu_milli,
        cpu_milli: 8_000 * gpus.max(1),
        memory_mib: 64_000 * u64::from(gpus.max(1)),
        gpu_model_mask: 0,
    }
}

fn snapshot(pending: usize, nodes: usize) -> Snapshot {
    let mut rng = Lcg(7);
    let mut s = Interner::new();
    let model = s.intern("H100");
    let (rack, groups, groups_val) = (
        s.intern("rack"),
        s.intern("gantry.io/gpu-groups"),
        s.intern("0-3|4-7"),
    );
    let racks: Vec<u32> = (0..nodes.div_ceil(40))
        .map(|i| s.intern(&format!("rack-{i}")))
        .collect();
    let user = s.intern("ann");
    let mut node_list: Vec<Node> = (0..nodes as u32)
        .map(|id| Node {
            id,
            name: s.intern(&format!("gpu-node-{id:04}")),
            state: NodeState::Up,
            labels: vec![
                Label {
                    key: rack,
                    value: racks[id as usize / 40],
                },
                Label {
                    key: groups,
                    value: groups_val,
                },
            ],
            cpu_milli_total: 128_000,
            cpu_milli_free: 128_000,
            memory_mib_total: 1_024_000,
            memory_mib_free: 1_024_000,
            gpus: (0..8)
                .map(|index| Gpu {
                    index,
                    model,
                    memory_mib: 81_920,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            revision: 0,
        })
        .collect();
    let mut running = Vec::new();
    for n in &mut node_list {
        let first = 4 * (n.id % 2);
        for g in n.gpus.iter_mut().skip(first as usize).take(4) {
            g.free_milli = 0;
        }
        n.cpu_milli_free -= 32_000;
        n.memory_mib_free -= 256_000;
        let limit_s = if rng.next(10) == 0 {
            0
        } else {
            600 * (1 + rng.next(144))
        };
        running.push(RunningJob {
            job: Job {
                id: 1_000_000 + u64::from(n.id),
                user,
                time_limit_s: limit_s,
                tasks: vec![group(1, 4, 0)],
                ..Default::default()
            },
            tasks: vec![TaskAllocation {
                node: n.id,
                gpus: (first..first + 4)
                    .map(|index| GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: 32_000,
                memory_mib: 256_000,
            }],
            start_ms: NOW_MS - 60_000,
            expected_end_ms: (limit_s > 0).then(|| NOW_MS - 60_000 + limit_s * 1000),
            score: 0.0,
            revision: 0,
        });
    }
    let pending_jobs: Vec<Job> = (0..pending as u64)
        .map(|i| {
            let tasks = match rng.next(20) {
                0 => vec![group(2, 8, 0)],
                1 | 2 => vec![group(1, 0, 250 * (1 + rng.next(3) as u32))],
                _ => vec![group(1, [1, 1, 2, 2, 4, 8][rng.next(6) as usize], 0)],
            };
            Job {
                id: i + 1,
                user,
                submit_ms: NOW_MS - 3_600_000 + i,
                time_limit_s: if rng.next(20) == 0 {
                    0
                } else {
                    900 * (1 + rng.next(96))
                },
                kind: JobKind::Batch,
                tasks,
                ..Default::default()
            }
        })
        .collect();
    Snapshot {
        ctx: Cycle {
            id: 1,
            now_ms: NOW_MS,
            seed: 1,
            gpu_models: vec![model],
            strings: s.into_strings(),
            ..Default::default()
        },
        pending: pending_jobs,
        nodes: node_list,
        running,
        evicting: Vec::new(),
    }
}

fn limits() -> Limits {
    Limits {
        deadline_ms: 10_000,
        memory_mib: 1024,
    }
}

/// Median and p90 of `f` over repeated runs within `budget`.
fn measure(mut f: impl FnMut(), budget: Duration) -> (f64, f64) {
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 200) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[times.len() * 9 / 10])
}

fn reserved(plan: &Plan) -> usize {
    plan.pending
        .iter()
        .filter(|p| p.reason.message.contains("reserved to start"))
        .count()
}

fn pipeline(placement: Box<dyn PlacementStage>, config: &str) -> Pipeline {
    Pipeline {
        admission: Vec::new(),
        priority: vec![StageSlot::new(
            Box::new(Native::new(gantry_plugin_fifo::Fifo, "{}").expect("fifo")),
            "{}",
        )],
        placement: StageSlot::new(placement, config),
        preemption: None,
    }
}

fn main() {
    let rt = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let loaded = rt.load(gantry_components::BACKFILL).expect("load backfill");
    let snap = snapshot(10_000, 1_000);
    // The host's order: fifo by submit time, which is the order built above.
    let jobs = &snap.pending;
    println!("backfill place(): 10,000 pending x 1,000 nodes x 8 GPUs; median and p90");
    println!(
        "{:<52} | {:>9} {:>9} | {:>9} {:>9} | {:>6} | starts reserved",
        "config", "native", "p90", "wasm", "p90", "ratio"
    );
    for config in [
        "{}",
        r#"{"max_jobs": 10000}"#,
        r#"{"max_jobs": 10000, "scoring": "spread"}"#,
        r#"{"max_jobs": 10000, "scoring": "topology"}"#,
        r#"{"max_jobs": 10000, "conservative": 8}"#,
    ] {
        let mut native = Native::new(Backfill::default(), config).expect("native");
        let mut wasm = loaded.instantiate(config, limits()).expect("instantiate");
        let n_plan = native
            .place(&snap.ctx, jobs, &snap.nodes, &snap.running)
            .expect("native place");
        let w_plan = wasm
            .place(&snap.ctx, jobs, &snap.nodes, &snap.running)
            .expect("wasm place");
        assert_eq!(n_plan, w_plan, "wasm and native must decide the same");
        let budget = Duration::from_secs(3);
        let (n_med, n_p90) = measure(
            || {
                native
                    .place(&snap.ctx, jobs, &snap.nodes, &snap.running)
                    .expect("native place");
            },
            budget,
        );
        let (w_med, w_p90) = measure(
            || {
                wasm.place(&snap.ctx, jobs, &snap.nodes, &snap.running)
                    .expect("wasm place");
            },
            budget,
        );
        println!(
            "{config:<52} | {n_med:>6.2} ms {n_p90:>6.2} ms | {w_med:>6.2} ms {w_p90:>6.2} ms | {:>5.2}x | {} {}",
            w_med / n_med,
            n_plan.starts.len(),
            reserved(&n_plan)
        );
    }
    // One whole cycle (fifo native + backfill), as the daemon runs it.
    let config = r#"{"max_jobs": 10000}"#;
    let mut native = pipeline(
        Box::new(Native::new(Backfill::default(), config).expect("native")),
        config,
    );
    let mut wasm = pipeline(
        Box::new(loaded.instantiate(config, limits()).expect("instantiate")),
        config,
    );
    let budget = Duration::from_secs(3);
    let (n_med, _) = measure(
        || {
            run_cycle(&snap, &mut native, None);
        },
        budget,
    );
    let (w_med, _) = measure(
        || {
            run_cycle(&snap, &mut wasm, None);
        },
        budget,
    );
    println!(
        "whole cycle (fifo + backfill {config}): native {n_med:.2} ms, wasm placement {w_med:.2} ms ({:.2}x)",
        w_med / n_med
    );
}
