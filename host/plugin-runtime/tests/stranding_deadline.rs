//! The `stranding` placement component inside the daemon's default limits (100 ms, 256 MiB)
//! on a 1,000-node cluster: 8,000 GPUs of three models, half of them busy with 3,000 running
//! jobs, and a queue of 200 jobs of many shapes (whole GPUs, shares, CPU-only, gangs, model
//! pins, varied CPU and memory, so the learnt target has hundreds of shapes). Every call must
//! return a plan, not a deadline fault, and the plan must be valid: nothing booked twice and
//! no node over its free CPU, memory or GPU. The time per call is printed; the benchmark
//! figure is in `docs/fgd-replay/README.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, Node, NodeState, Placement, RunningJob, TaskAllocation, TaskGroup,
};
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::collections::HashMap;
use std::time::Instant;

const NODES: u32 = 1000;

fn group(count: u32, gpus: u32, gpu_milli: u32, cpu: u32, mem: u64, mask: u64) -> TaskGroup {
    TaskGroup {
        count,
        gpus,
        gpu_milli,
        cpu_milli: cpu,
        memory_mib: mem,
        gpu_model_mask: mask,
    }
}

/// Node `i`: model `i % 3`, 8 GPUs; every other node half busy (GPUs 0–3 taken, GPU 4 at
/// 470 milli, a quarter of its CPU and memory used).
fn cluster() -> (Cycle, Vec<Node>, Vec<RunningJob>) {
    let mut strings: Vec<String> = vec!["T4".into(), "V100M16".into(), "A10".into()];
    strings.extend((0..NODES).map(|i| format!("node-{i:04}")));
    let ctx = Cycle {
        strings,
        gpu_models: vec![0, 1, 2],
        seed: 7,
        ..Default::default()
    };
    let (mut nodes, mut running) = (Vec::new(), Vec::new());
    for i in 0..NODES {
        let busy = i % 2 == 0;
        let gpus = (0..8)
            .map(|index| Gpu {
                index,
                model: i % 3,
                memory_mib: 16_000,
                free_milli: match (busy, index) {
                    (true, 0..=3) => 0,
                    (true, 4) => 530,
                    _ => 1000,
                },
                healthy: true,
                parent: None,
            })
            .collect();
        nodes.push(Node {
            id: i,
            name: 3 + i,
            state: NodeState::Up,
            cpu_milli_total: 96_000,
            cpu_milli_free: if busy { 72_000 } else { 96_000 },
            memory_mib_total: 393_216,
            memory_mib_free: if busy { 294_912 } else { 393_216 },
            gpus,
            ..Default::default()
        });
        if busy {
            for (k, (gpus, milli, shares)) in [
                (2, 0, vec![(0, 1000), (1, 1000)]),
                (2, 0, vec![(2, 1000), (3, 1000)]),
                (0, 470, vec![(4, 470)]),
            ]
            .into_iter()
            .enumerate()
            {
                let id = 1_000_000 + u64::from(i) * 3 + k as u64;
                running.push(RunningJob {
                    job: Job {
                        id,
                        tasks: vec![group(1, gpus, milli, 8_000, 32_768, 0)],
                        ..Default::default()
                    },
                    tasks: vec![TaskAllocation {
                        node: i,
                        gpus: shares
                            .into_iter()
                            .map(|(index, milli)| GpuShare { index, milli })
                            .collect(),
                        cpu_milli: 8_000,
                        memory_mib: 32_768,
                    }],
                    start_ms: 0,
                    expected_end_ms: None,
                    score: 0.0,
                    revision: 0,
                });
            }
        }
    }
    (ctx, nodes, running)
}

/// 200 pending jobs cycling through whole-GPU, sharing, CPU-only, gang and pinned shapes.
fn queue() -> Vec<Job> {
    (0..200u64)
        .map(|id| {
            let cpu = 2_000 + 500 * (id as u32 % 23);
            let mem = 4_096 * (1 + id % 17);
            let tasks = match id % 6 {
                0 => vec![group(1, 1, 0, cpu, mem, 0)],
                1 => vec![group(
                    1,
                    0,
                    [160, 250, 470, 810][id as usize % 4],
                    cpu,
                    mem,
                    0,
                )],
                2 => vec![group(1, 0, 0, cpu, mem, 0)],
                3 => vec![group(2, 4, 0, cpu, mem, 0)],
                4 => vec![group(1, 2, 0, cpu, mem, 0b10)],
                _ => vec![group(1, 0, 300, cpu, mem, 0b101)],
            };
            Job {
                id,
                tasks,
                submit_ms: 1_000 + id,
                ..Default::default()
            }
        })
        .collect()
}

#[test]
fn stranding_places_a_cycle_on_1000_nodes_within_the_daemon_deadline() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let limits = Limits::default();
    assert_eq!(limits.deadline_ms, 100, "the daemon's default deadline");
    let mut plugin = rt
        .load(comp::STRANDING)
        .unwrap()
        .instantiate("{}", limits)
        .unwrap();
    let (ctx, nodes, running) = cluster();
    let jobs = queue();
    let mut slowest_ms = 0.0f64;
    for _ in 0..3 {
        let t0 = Instant::now();
        let plan = plugin
            .place(&ctx, &jobs, &nodes, &running)
            .unwrap_or_else(|e| panic!("a 1,000-node cycle failed: {e}"));
        slowest_ms = slowest_ms.max(t0.elapsed().as_secs_f64() * 1e3);
        assert!(plan.starts.len() > 100, "{} started", plan.starts.len());
        assert_eq!(plan.starts.len() + plan.pending.len(), jobs.len());
        // Valid: no GPU share beyond what is free, no node beyond its CPU and memory.
        let by_id: HashMap<u32, &Node> = nodes.iter().map(|n| (n.id, n)).collect();
        let mut taken: HashMap<(u32, u32), u32> = HashMap::new();
        let mut cpu: HashMap<u32, u32> = HashMap::new();
        let mut mem: HashMap<u32, u64> = HashMap::new();
        for t in plan.starts.iter().flat_map(|s| &s.tasks) {
            *cpu.entry(t.node).or_default() += t.cpu_milli;
            *mem.entry(t.node).or_default() += t.memory_mib;
            for g in &t.gpus {
                *taken.entry((t.node, g.index)).or_default() += g.milli;
            }
        }
        for ((node, index), milli) in taken {
            let free = by_id[&node].gpus[index as usize].free_milli;
            assert!(milli <= free, "node {node} GPU {index}: {milli} > {free}");
        }
        for (node, c) in cpu {
            assert!(c <= by_id[&node].cpu_milli_free, "node {node} CPU");
            assert!(
                mem[&node] <= by_id[&node].memory_mib_free,
                "node {node} memory"
            );
        }
    }
    println!(
        "stranding on {NODES} nodes, 200 pending, 3,000 running: slowest call {slowest_ms:.1} ms"
    );
}
