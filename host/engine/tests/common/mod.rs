//! Helpers shared by the engine's integration tests: native pipelines built from the
//! bundled plugins, small cluster and job builders, and an independent checker of
//! what a cycle started (it re-derives capacity from the snapshot instead of trusting
//! the engine's own validator).
#![allow(dead_code)]

use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, JobId, Node, NodeState, TaskAllocation, TaskGroup,
};
use gantry_engine::{
    CycleOutcome, Native, Pipeline, PlacementStage, PreemptionStage, PriorityStage, Snapshot,
    StageSlot,
};
use gantry_plugin_fifo::Fifo;
use gantry_plugin_first_fit::FirstFit;
use gantry_plugin_priority_preempt::PriorityPreempt;
use std::collections::{HashMap, HashSet};

/// A native `first-fit` placement slot with `config` (e.g. `{"strict": false}`).
pub fn first_fit(config: &str) -> StageSlot<dyn PlacementStage> {
    let native = Native::new(FirstFit::default(), config).expect("first-fit config");
    StageSlot::new(Box::new(native), config)
}

/// A native `fifo` priority slot.
pub fn fifo() -> StageSlot<dyn PriorityStage> {
    StageSlot::new(
        Box::new(Native::new(Fifo, "{}").expect("fifo config")),
        "{}",
    )
}

/// A native `priority-preempt` slot with `config` (e.g. `{"grace_s": 5}`).
pub fn priority_preempt(config: &str) -> StageSlot<dyn PreemptionStage> {
    let native = Native::new(PriorityPreempt::default(), config).expect("priority-preempt config");
    StageSlot::new(Box::new(native), config)
}

/// fifo + first-fit (`placement_config`), with priority-preempt when `preempt`.
pub fn native_pipeline(placement_config: &str, preempt: bool) -> Pipeline {
    Pipeline {
        admission: vec![],
        priority: vec![fifo()],
        placement: first_fit(placement_config),
        preemption: preempt.then(|| priority_preempt("{}")),
    }
}

/// The string table and model list used by the hand-built snapshots: models
/// `A100` (index 0, symbol 1), `H100` (index 1, symbol 2), `L4` (index 2, symbol 3,
/// present in the model list but on no node unless a test puts it there).
pub fn ctx() -> Cycle {
    Cycle {
        id: 7,
        now_ms: 1_000_000,
        seed: 42,
        strings: vec!["".into(), "A100".into(), "H100".into(), "L4".into()],
        gpu_models: vec![1, 2, 3],
        ..Default::default()
    }
}

/// Symbol of model `A100` in [`ctx`] (mask bit 0).
pub const A100: u32 = 1;
/// Symbol of model `H100` in [`ctx`] (mask bit 1).
pub const H100: u32 = 2;
/// Symbol of model `L4` in [`ctx`] (mask bit 2; on no node unless a test puts it there).
pub const L4: u32 = 3;

/// An up node with `gpus` free, healthy GPUs of `model`, 64 cores and 512 GiB.
pub fn node(id: u32, gpus: u32, model: u32) -> Node {
    Node {
        id,
        state: NodeState::Up,
        cpu_milli_total: 64_000,
        cpu_milli_free: 64_000,
        memory_mib_total: 512 * 1024,
        memory_mib_free: 512 * 1024,
        gpus: (0..gpus)
            .map(|index| Gpu {
                index,
                model,
                memory_mib: 81_920,
                free_milli: 1000,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

/// A job of one group: `count` tasks of `gpus` whole GPUs, 1 core and 1 GiB each.
pub fn job(id: JobId, count: u32, gpus: u32) -> Job {
    Job {
        id,
        submit_ms: 1_000 * id,
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

/// A job of one group: `count` tasks of `milli` of one GPU each.
pub fn frac_job(id: JobId, count: u32, milli: u32) -> Job {
    let mut j = job(id, count, 0);
    j.tasks[0].gpu_milli = milli;
    j
}

/// A whole-GPU allocation on `node` for the default task shape of [`job`].
pub fn whole(node: u32, indices: &[u32]) -> TaskAllocation {
    TaskAllocation {
        node,
        gpus: indices
            .iter()
            .map(|&index| GpuShare { index, milli: 1000 })
            .collect(),
        cpu_milli: 1000,
        memory_mib: 1024,
    }
}

/// A fractional allocation on `node` for the default task shape of [`frac_job`].
pub fn frac(node: u32, index: u32, milli: u32) -> TaskAllocation {
    TaskAllocation {
        node,
        gpus: vec![GpuShare { index, milli }],
        cpu_milli: 1000,
        memory_mib: 1024,
    }
}

/// A snapshot of `nodes` and `pending` with nothing running.
pub fn snapshot(nodes: Vec<Node>, pending: Vec<Job>) -> Snapshot {
    Snapshot {
        ctx: ctx(),
        pending,
        nodes,
        running: vec![],
        evicting: vec![],
    }
}

/// Independently checks what `out` starts against `snap`: capacity per GPU (running
/// use + new starts ≤ 1000 milli, whole GPUs not shared), CPU and memory against the
/// nodes' totals, gang completeness and task shapes, model masks, node state and GPU
/// health, starts ⊆ pending, and one reason for each pending job not started.
/// Returns every problem found (empty when all hold).
pub fn check_outcome(snap: &Snapshot, out: &CycleOutcome) -> Vec<String> {
    let mut problems = Vec::new();
    let pending: HashMap<JobId, &Job> = snap.pending.iter().map(|j| (j.id, j)).collect();
    let nodes: HashMap<u32, &Node> = snap.nodes.iter().map(|n| (n.id, n)).collect();

    // Per-GPU use: (milli in total, shares, whole shares), per node CPU and memory.
    let mut gpu_use: HashMap<(u32, u32), (u32, u32, u32)> = HashMap::new();
    let mut cpu_use: HashMap<u32, u64> = HashMap::new();
    let mut mem_use: HashMap<u32, u64> = HashMap::new();
    let mut add = |a: &TaskAllocation| {
        for s in &a.gpus {
            let e = gpu_use.entry((a.node, s.index)).or_default();
            e.0 += s.milli;
            e.1 += 1;
            e.2 += u32::from(s.milli == 1000);
        }
        *cpu_use.entry(a.node).or_default() += u64::from(a.cpu_milli);
        *mem_use.entry(a.node).or_default() += a.memory_mib;
    };
    for r in &snap.running {
        r.tasks.iter().for_each(&mut add);
    }
    for s in &out.starts {
        s.tasks.iter().for_each(&mut add);
    }

    let mut started = HashSet::new();
    for s in &out.starts {
        if !started.insert(s.job) {
            problems.push(format!("job {} started twice", s.job));
        }
        let Some(job) = pending.get(&s.job) else {
            problems.push(format!("job {} started but was not pending", s.job));
            continue;
        };
        if s.tasks.len() != job.task_count() {
            problems.push(format!(
                "job {} has {} tasks but {} allocations",
                s.job,
                job.task_count(),
                s.tasks.len()
            ));
            continue;
        }
        for (t, (group, a)) in job.expanded_tasks().zip(&s.tasks).enumerate() {
            problems.extend(
                check_task(snap, &nodes, group, a)
                    .into_iter()
                    .map(|p| format!("job {} task {t}: {p}", s.job)),
            );
        }
    }

    for ((node, index), (milli, shares, whole)) in &gpu_use {
        if *milli > 1000 {
            problems.push(format!("node {node} GPU {index} booked {milli} milli"));
        }
        if *whole > 0 && *shares > 1 {
            problems.push(format!(
                "node {node} GPU {index} is held whole and shared ({shares} holders)"
            ));
        }
    }
    for n in &snap.nodes {
        let cpu = cpu_use.get(&n.id).copied().unwrap_or_default();
        let mem = mem_use.get(&n.id).copied().unwrap_or_default();
        if cpu > u64::from(n.cpu_milli_total) {
            problems.push(format!("node {} CPU {cpu} > {}", n.id, n.cpu_milli_total));
        }
        if mem > n.memory_mib_total {
            problems.push(format!(
                "node {} memory {mem} > {}",
                n.id, n.memory_mib_total
            ));
        }
    }

    let mut reasons: HashMap<JobId, usize> = HashMap::new();
    for (id, _) in &out.pending {
        *reasons.entry(*id).or_default() += 1;
        if started.contains(id) {
            problems.push(format!("job {id} both started and given a pending reason"));
        }
        if !pending.contains_key(id) {
            problems.push(format!("reason for job {id}, which is not pending"));
        }
    }
    for j in &snap.pending {
        let n = reasons.get(&j.id).copied().unwrap_or_default();
        if !started.contains(&j.id) && n != 1 {
            problems.push(format!("pending job {} has {n} reasons", j.id));
        }
    }
    problems
}

fn check_task(
    snap: &Snapshot,
    nodes: &HashMap<u32, &Node>,
    group: &TaskGroup,
    a: &TaskAllocation,
) -> Vec<String> {
    let mut p = Vec::new();
    let Some(node) = nodes.get(&a.node) else {
        return vec![format!("unknown node {}", a.node)];
    };
    if node.state != NodeState::Up {
        p.push(format!("node {} is {:?}", a.node, node.state));
    }
    if a.cpu_milli != group.cpu_milli || a.memory_mib != group.memory_mib {
        p.push("CPU or memory differ from the request".into());
    }
    let want_shares = if group.gpus > 0 {
        group.gpus as usize
    } else {
        usize::from(group.gpu_milli > 0)
    };
    if a.gpus.len() != want_shares {
        p.push(format!("{} GPU shares, wanted {want_shares}", a.gpus.len()));
    }
    let mut seen = HashSet::new();
    for s in &a.gpus {
        if !seen.insert(s.index) {
            p.push(format!("GPU {} listed twice", s.index));
        }
        let want_milli = if group.gpus > 0 {
            1000
        } else {
            group.gpu_milli
        };
        if s.milli != want_milli {
            p.push(format!("GPU {} share {} != {want_milli}", s.index, s.milli));
        }
        let Some(gpu) = node.gpus.iter().find(|g| g.index == s.index) else {
            p.push(format!("node {} has no GPU {}", a.node, s.index));
            continue;
        };
        if !gpu.healthy {
            p.push(format!("GPU {} on node {} is unhealthy", s.index, a.node));
        }
        if !group.allows_model(snap.ctx.model_index(gpu.model)) {
            p.push(format!(
                "GPU {} on node {} is model {}, mask {:#b}",
                s.index,
                a.node,
                snap.ctx.text(gpu.model),
                group.gpu_model_mask
            ));
        }
    }
    p
}
