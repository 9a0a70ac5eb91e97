//! Benchmark: a start-time forecast of 10,000 pending jobs on 100 nodes × 8 GPUs (every
//! node half held by running jobs that end over the next day; pending jobs of 1-8 GPUs
//! and some 2-node gangs), runtimes drawn from a model holding history for half of the
//! users, five replays for the band: strictly in order (`first-fit`) and with EASY
//! backfill 32 jobs deep (`backfill`).
//!
//! `cargo bench -p gantry-engine --bench forecast` prints, per mode, the median and the
//! slowest of five forecasts and how many jobs got a start. Aim (issue 48): under 1 s.

use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, Node, NodeState, RunningJob, TaskAllocation, TaskGroup,
};
use gantry_engine::Snapshot;
use gantry_engine::forecast::{ForecastOptions, RuntimeModel, forecast};
use std::time::{Duration, Instant};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

const NOW: u64 = 1_700_000_000_000;
const NODES: u32 = 100;
const PENDING: u64 = 10_000;

fn group(count: u32, gpus: u32) -> TaskGroup {
    TaskGroup {
        count,
        gpus,
        cpu_milli: 4_000 * gpus,
        memory_mib: 16_384 * u64::from(gpus),
        ..Default::default()
    }
}

fn snapshot(rng: &mut Lcg) -> Snapshot {
    let mut nodes = Vec::new();
    let mut running = Vec::new();
    for n in 0..NODES {
        let gpus = (0..8)
            .map(|index| Gpu {
                index,
                model: 0,
                memory_mib: 81_920,
                free_milli: if index < 4 { 0 } else { 1000 },
                healthy: true,
                parent: None,
            })
            .collect();
        nodes.push(Node {
            id: n,
            state: NodeState::Up,
            cpu_milli_total: 128_000,
            cpu_milli_free: 128_000 - 16_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: (1 << 20) - 65_536,
            gpus,
            ..Default::default()
        });
        running.push(RunningJob {
            job: Job {
                id: 1_000_000 + u64::from(n),
                user: n % 20,
                time_limit_s: 86_400,
                tasks: vec![group(1, 4)],
                ..Default::default()
            },
            tasks: vec![TaskAllocation {
                node: n,
                gpus: (0..4)
                    .map(|index| GpuShare { index, milli: 1000 })
                    .collect(),
                cpu_milli: 16_000,
                memory_mib: 65_536,
            }],
            start_ms: NOW - rng.next(3_600_000),
            expected_end_ms: None,
            score: 0.0,
            revision: 0,
        });
    }
    let pending = (1..=PENDING)
        .map(|id| {
            let tasks = if id % 50 == 0 {
                vec![group(2, 8)]
            } else {
                vec![group(1, 1 + rng.next(8) as u32)]
            };
            Job {
                id,
                user: rng.next(40) as u32,
                submit_ms: NOW - 1000 + id,
                time_limit_s: 3600 * (1 + rng.next(24)),
                tasks,
                ..Default::default()
            }
        })
        .collect();
    Snapshot {
        ctx: Cycle {
            now_ms: NOW,
            strings: vec!["gpu".into()],
            gpu_models: vec![0],
            ..Default::default()
        },
        pending,
        nodes,
        running,
        evicting: Vec::new(),
    }
}

fn main() {
    let mut rng = Lcg(7);
    let snap = snapshot(&mut rng);
    let order: Vec<u64> = snap.pending.iter().map(|j| j.id).collect();
    let mut model = RuntimeModel::new();
    for user in 0..20 {
        for _ in 0..16 {
            model.observe(&[format!("u{user}")], 60_000 * (5 + rng.next(240)));
        }
    }
    let keys: Vec<Vec<String>> = (0..40).map(|u| vec![format!("u{u}")]).collect();
    let replays = ForecastOptions::default().replays;
    let runtime = |j: &Job, r: usize| {
        let u = (r as f64 + 0.5) / replays as f64;
        let keys = &keys[(j.user as usize) % keys.len()];
        model.draw(keys, j.time_limit_s * 1000, 3_600_000, u).0
    };
    println!(
        "forecast: {PENDING} pending × {NODES} nodes × 8 GPUs, {} running, {replays} replays",
        snap.running.len()
    );
    for (mode, depth) in [("strict order", 0usize), ("backfill 32 deep", 32)] {
        let opts = ForecastOptions {
            backfill_depth: depth,
            ..Default::default()
        };
        let mut times = Vec::new();
        let mut started = 0;
        for _ in 0..5 {
            let t = Instant::now();
            let f = forecast(&snap, &order, &runtime, opts);
            times.push(t.elapsed());
            started = f.iter().filter(|x| x.p50_ms.is_some()).count();
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "  {mode:>16}: median {:>7.1} ms, slowest {:>7.1} ms; {started} of {PENDING} with a p50 start",
            ms(times[2]),
            ms(times[4])
        );
    }
}
