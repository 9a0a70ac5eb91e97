//! Unit tests of the plugin: reservations and backfill (`reserve`), node and GPU
//! choice (`scoring`), and a property test that every plan books (`props`). Helpers
//! here build small clusters whose running jobs really hold what they say.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod props;
mod reserve;
mod scoring;

use crate::Backfill;
use gantry_sdk::{
    Cycle, Gpu, GpuShare, Job, JobId, Label, Node, NodeState, Placement, Plan, Plugin, Reason,
    RunningJob, TaskAllocation, TaskGroup,
};

/// Now in every test: 1,000 s after the epoch.
pub const NOW: u64 = 1_000_000;

/// Symbols of [`ctx`]'s string table.
pub const A100: u32 = 1;
pub const RACK: u32 = 2;
pub const R1: u32 = 3;
pub const R2: u32 = 4;
pub const GROUPS: u32 = 5;
pub const G0_3_4_7: u32 = 6;
/// Node `i` is named by symbol `NAME0 + i` ("n0", "n1", ...).
pub const NAME0: u32 = 7;

pub fn ctx() -> Cycle {
    let mut strings: Vec<String> = [
        "",
        "A100",
        "rack",
        "r1",
        "r2",
        "gantry.io/gpu-groups",
        "0-3|4-7",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    strings.extend((0..16).map(|i| format!("n{i}")));
    Cycle {
        id: 1,
        now_ms: NOW,
        strings,
        gpu_models: vec![A100],
        ..Default::default()
    }
}

pub fn node(id: u32, gpus: u32) -> Node {
    Node {
        id,
        name: NAME0 + id,
        state: NodeState::Up,
        cpu_milli_total: 64_000,
        cpu_milli_free: 64_000,
        memory_mib_total: 512_000,
        memory_mib_free: 512_000,
        gpus: (0..gpus)
            .map(|index| Gpu {
                index,
                model: A100,
                memory_mib: 81_920,
                free_milli: 1000,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

pub fn label(n: &mut Node, key: u32, value: u32) {
    n.labels.push(Label { key, value });
}

/// `count` tasks of `gpus` whole GPUs (1 core, 1 GiB each), time limit `limit_s`.
pub fn job(id: JobId, count: u32, gpus: u32, limit_s: u64) -> Job {
    Job {
        id,
        submit_ms: id,
        time_limit_s: limit_s,
        tasks: vec![TaskGroup {
            count,
            gpus,
            gpu_milli: 0,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: 0,
        }],
        ..Default::default()
    }
}

/// `count` tasks of `milli` of one GPU.
pub fn frac(id: JobId, count: u32, milli: u32, limit_s: u64) -> Job {
    let mut j = job(id, count, 0, limit_s);
    j.tasks[0].gpu_milli = milli;
    j
}

/// A running job `id` holding whole GPUs `indices` of node `node` (taken off its free
/// resources), ending `end_in_s` after now (None: no time limit).
pub fn run(
    nodes: &mut [Node],
    id: JobId,
    node: u32,
    indices: &[u32],
    end_in_s: Option<u64>,
) -> RunningJob {
    let n = nodes.iter_mut().find(|n| n.id == node).unwrap();
    for &i in indices {
        n.gpus[i as usize].free_milli = 0;
    }
    n.cpu_milli_free -= 1000;
    n.memory_mib_free -= 1024;
    let limit = end_in_s.unwrap_or(0);
    let mut j = job(id, 1, indices.len() as u32, limit);
    j.submit_ms = 0;
    RunningJob {
        job: j,
        tasks: vec![TaskAllocation {
            node,
            gpus: indices
                .iter()
                .map(|&index| GpuShare { index, milli: 1000 })
                .collect(),
            cpu_milli: 1000,
            memory_mib: 1024,
        }],
        start_ms: NOW - 1000,
        expected_end_ms: end_in_s.map(|s| NOW + s * 1000),
        score: 0.0,
        revision: 0,
    }
}

pub fn place(config: &str, jobs: &[Job], nodes: &[Node], running: &[RunningJob]) -> Plan {
    let mut p = Backfill::default();
    p.configure(config).unwrap();
    p.place(&ctx(), jobs, nodes, running).unwrap()
}

pub fn started(plan: &Plan) -> Vec<JobId> {
    plan.starts.iter().map(|s| s.job).collect()
}

/// (node, GPU indices) of every task of a started job.
pub fn tasks_of(plan: &Plan, job: JobId) -> Vec<(u32, Vec<u32>)> {
    let s = plan.starts.iter().find(|s| s.job == job).unwrap();
    s.tasks
        .iter()
        .map(|t| (t.node, t.gpus.iter().map(|g| g.index).collect()))
        .collect()
}

pub fn reason(plan: &Plan, job: JobId) -> &Reason {
    &plan
        .pending
        .iter()
        .find(|p| p.job == job)
        .unwrap_or_else(|| panic!("job {job} is not pending: {plan:?}"))
        .reason
}
