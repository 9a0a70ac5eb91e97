//! Property tests: random clusters (1–6 nodes of 0–8 GPUs, two models, some nodes
//! draining or down, some GPUs unhealthy), some running jobs booked consistently with
//! the nodes' free counts, and random pending gangs (1–3 groups of 1–3 tasks, 0–8
//! whole GPUs or 1–999 milli, model masks). One cycle with fifo + first-fit (strict
//! and not) and optionally priority-preempt must keep every invariant that
//! `common::check_outcome` checks (capacity per GPU/CPU/memory, no shared whole GPU,
//! complete gangs, models, node state, health, starts ⊆ pending, one reason each),
//! plus order, strictness and eviction rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use gantry_contract::{
    ClusterModel, Gpu, GpuShare, Job, JobId, Node, NodeState, ReasonCode, RunningJob,
    TaskAllocation, TaskGroup,
};
use gantry_engine::{CycleOutcome, Snapshot, run_cycle};
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone)]
struct NodeSpec {
    /// (model symbol, healthy) per GPU.
    gpus: Vec<(u32, bool)>,
    state: NodeState,
    cpu_milli: u32,
    memory_mib: u64,
}

#[derive(Debug, Clone)]
struct RunningSpec {
    node_pick: usize,
    gpu_offset: usize,
    /// Whole GPUs, or milli when `whole` is 0; both 0 is a CPU-only task.
    whole: u32,
    milli: u32,
    cpu_milli: u32,
    memory_mib: u64,
    tier: i32,
    preemptible: bool,
    score: f64,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0usize..=8,
        select(vec![common::A100, common::H100]),
        prop::bool::weighted(0.2),
        prop::collection::vec(prop::bool::weighted(0.9), 8),
        prop_oneof![
            6 => Just(NodeState::Up),
            1 => Just(NodeState::Draining),
            1 => Just(NodeState::Down),
        ],
        select(vec![8_000u32, 32_000, 64_000]),
        select(vec![64 * 1024u64, 256 * 1024]),
    )
        .prop_map(|(n, model, mixed, healthy, state, cpu_milli, memory_mib)| {
            let other = if model == common::A100 {
                common::H100
            } else {
                common::A100
            };
            let gpus = (0..n)
                .map(|i| {
                    let m = if mixed && i % 2 == 1 { other } else { model };
                    (m, healthy[i])
                })
                .collect();
            NodeSpec {
                gpus,
                state,
                cpu_milli,
                memory_mib,
            }
        })
}

fn running_spec() -> impl Strategy<Value = RunningSpec> {
    (
        any::<usize>(),
        any::<usize>(),
        prop_oneof![
            (1u32..=4).prop_map(|w| (w, 0)),
            (1u32..=999).prop_map(|m| (0, m)),
            Just((0, 0)),
        ],
        0u32..=8,
        0u64..=32,
        -1i32..=1,
        prop::bool::weighted(0.7),
        -10_000i32..=0,
    )
        .prop_map(
            |(node_pick, gpu_offset, (whole, milli), cpu, mem, tier, preemptible, score)| {
                RunningSpec {
                    node_pick,
                    gpu_offset,
                    whole,
                    milli,
                    cpu_milli: cpu * 1000,
                    memory_mib: mem * 1024,
                    tier,
                    preemptible,
                    score: f64::from(score),
                }
            },
        )
}

fn task_group() -> impl Strategy<Value = TaskGroup> {
    (
        1u32..=3,
        prop_oneof![
            3 => (0u32..=2).prop_map(|g| (g, 0)),
            1 => (0u32..=8).prop_map(|g| (g, 0)),
            2 => (1u32..=999).prop_map(|m| (0, m)),
        ],
        0u32..=8,
        0u64..=64,
        prop_oneof![2 => Just(0u64), 1 => 1u64..8],
    )
        .prop_map(|(count, (gpus, gpu_milli), cpu, mem, mask)| TaskGroup {
            count,
            gpus,
            gpu_milli,
            cpu_milli: cpu * 1000,
            memory_mib: mem * 1024,
            gpu_model_mask: mask,
        })
}

fn job_spec() -> impl Strategy<Value = (Vec<TaskGroup>, i32, u64, bool)> {
    (
        prop::collection::vec(task_group(), 1..=3),
        -1i32..=2,
        0u64..10_000,
        any::<bool>(),
    )
}

/// Books `spec` on `node` the way a past cycle might have (any free GPUs, starting at
/// an offset so that use is fragmented), or returns `None` when it does not fit.
fn book_running(node: &mut Node, spec: &RunningSpec) -> Option<TaskAllocation> {
    if node.cpu_milli_free < spec.cpu_milli || node.memory_mib_free < spec.memory_mib {
        return None;
    }
    let n = node.gpus.len();
    let rotated: Vec<usize> = (0..n).map(|i| (i + spec.gpu_offset) % n.max(1)).collect();
    let shares: Vec<GpuShare> = if spec.whole > 0 {
        let free: Vec<usize> = rotated
            .iter()
            .copied()
            .filter(|&i| node.gpus[i].free_milli == 1000)
            .take(spec.whole as usize)
            .collect();
        if free.len() < spec.whole as usize {
            return None;
        }
        free.iter()
            .map(|&i| GpuShare {
                index: node.gpus[i].index,
                milli: 1000,
            })
            .collect()
    } else if spec.milli > 0 {
        let i = rotated
            .iter()
            .copied()
            .find(|&i| node.gpus[i].free_milli >= spec.milli)?;
        vec![GpuShare {
            index: node.gpus[i].index,
            milli: spec.milli,
        }]
    } else {
        vec![]
    };
    for s in &shares {
        if let Some(g) = node.gpus.iter_mut().find(|g| g.index == s.index) {
            g.free_milli -= s.milli;
        }
    }
    node.cpu_milli_free -= spec.cpu_milli;
    node.memory_mib_free -= spec.memory_mib;
    Some(TaskAllocation {
        node: node.id,
        gpus: shares,
        cpu_milli: spec.cpu_milli,
        memory_mib: spec.memory_mib,
    })
}

fn build(
    nodes: &[NodeSpec],
    running: &[RunningSpec],
    jobs: &[(Vec<TaskGroup>, i32, u64, bool)],
) -> Snapshot {
    let mut built: Vec<Node> = nodes
        .iter()
        .enumerate()
        .map(|(i, spec)| Node {
            id: i as u32 * 10 + 1,
            name: 0,
            state: spec.state,
            labels: vec![],
            cpu_milli_total: spec.cpu_milli,
            cpu_milli_free: spec.cpu_milli,
            memory_mib_total: spec.memory_mib,
            memory_mib_free: spec.memory_mib,
            gpus: spec
                .gpus
                .iter()
                .enumerate()
                .map(|(g, &(model, healthy))| Gpu {
                    // Sparse device indices: lookups must go by index, not position.
                    index: g as u32 * 2,
                    model,
                    memory_mib: 81_920,
                    free_milli: 1000,
                    healthy,
                    parent: None,
                })
                .collect(),
            revision: 0,
        })
        .collect();
    let mut run = Vec::new();
    for (k, spec) in running.iter().enumerate() {
        let n = spec.node_pick % built.len();
        if built[n].state == NodeState::Down {
            continue;
        }
        let Some(alloc) = book_running(&mut built[n], spec) else {
            continue;
        };
        let group = TaskGroup {
            count: 1,
            gpus: spec.whole,
            gpu_milli: if spec.whole > 0 { 0 } else { spec.milli },
            cpu_milli: spec.cpu_milli,
            memory_mib: spec.memory_mib,
            gpu_model_mask: 0,
        };
        run.push(RunningJob {
            job: Job {
                id: 1000 + k as JobId,
                tier: spec.tier,
                preemptible: spec.preemptible,
                submit_ms: k as u64,
                tasks: vec![group],
                ..Default::default()
            },
            tasks: vec![alloc],
            start_ms: 100 + k as u64,
            expected_end_ms: None,
            score: spec.score,
            revision: 0,
        });
    }
    let pending = jobs
        .iter()
        .enumerate()
        .map(|(i, (tasks, tier, submit_ms, preemptible))| Job {
            id: i as JobId + 1,
            tier: *tier,
            submit_ms: *submit_ms,
            preemptible: *preemptible,
            tasks: tasks.clone(),
            ..Default::default()
        })
        .collect();
    let mut snap = common::snapshot(built, pending);
    snap.running = run;
    snap
}

fn scenario() -> impl Strategy<Value = Snapshot> {
    (
        prop::collection::vec(node_spec(), 1..=6),
        prop::collection::vec(running_spec(), 0..=12),
        prop::collection::vec(job_spec(), 0..=10),
    )
        .prop_map(|(n, r, j)| build(&n, &r, &j))
}

/// Checks beyond `check_outcome`: order, strictness, evictions.
fn check_cycle(snap: &Snapshot, out: &CycleOutcome, strict: bool, preempt: bool) -> Vec<String> {
    let mut p = common::check_outcome(snap, out);
    if !out.faults.is_empty() {
        p.push(format!("native plugins faulted: {:?}", out.faults));
    }
    let by_id: HashMap<JobId, &Job> = snap.pending.iter().map(|j| (j.id, j)).collect();

    // Order: a permutation of the pending jobs (no admission), by tier, then fifo
    // (earlier submit first), then id.
    let mut sorted: Vec<&Job> = snap.pending.iter().collect();
    sorted.sort_by(|a, b| {
        b.tier
            .cmp(&a.tier)
            .then(a.submit_ms.cmp(&b.submit_ms))
            .then(a.id.cmp(&b.id))
    });
    let want: Vec<JobId> = sorted.iter().map(|j| j.id).collect();
    if out.order != want {
        p.push(format!("order {:?}, expected {want:?}", out.order));
    }

    let started: HashSet<JobId> = out.starts.iter().map(|s| s.job).collect();
    if strict {
        let prefix: Vec<JobId> = out
            .order
            .iter()
            .copied()
            .take_while(|j| started.contains(j))
            .collect();
        if prefix.len() != started.len() {
            p.push(format!(
                "strict: started {started:?} is not a prefix of order {:?}",
                out.order
            ));
        }
        // Behind the first job left pending, every job is blocked by it (or waits
        // for preemption on its behalf, which only the first can).
        let first_blocked = out.order.iter().position(|j| !started.contains(j));
        for id in out
            .order
            .iter()
            .skip(first_blocked.map_or(usize::MAX, |i| i + 1))
        {
            let code = out
                .pending
                .iter()
                .find(|(j, _)| j == id)
                .map(|(_, r)| r.code);
            if code != Some(ReasonCode::BlockedByHigherPriority) {
                p.push(format!("strict: job {id} behind the blocker has {code:?}"));
            }
        }
    }

    if !preempt && !out.evictions.is_empty() {
        p.push("evictions without a preemption stage".into());
    }
    let running: HashMap<JobId, &RunningJob> = snap.running.iter().map(|r| (r.job.id, r)).collect();
    let mut victims = HashSet::new();
    for e in &out.evictions {
        let Some(v) = running.get(&e.job) else {
            p.push(format!("evicts job {}, which is not running", e.job));
            continue;
        };
        if !v.job.preemptible {
            p.push(format!("evicts job {}, which is not preemptible", e.job));
        }
        if !victims.insert(e.job) {
            p.push(format!("evicts job {} twice", e.job));
        }
        if started.contains(&e.for_job) {
            p.push(format!("evicts for job {}, which started", e.for_job));
        }
        match by_id.get(&e.for_job) {
            None => p.push(format!("evicts for job {}, not pending", e.for_job)),
            Some(j) => {
                // fifo: the blocked job's score is -submit_ms.
                let (jt, js) = (j.tier, -(j.submit_ms as f64));
                let lower = v.job.tier < jt || (v.job.tier == jt && v.score < js);
                if !lower {
                    p.push(format!(
                        "evicts job {} (tier {}, score {}) for job {} (tier {jt}, score {js})",
                        e.job, v.job.tier, v.score, e.for_job
                    ));
                }
            }
        }
        let code = out
            .pending
            .iter()
            .find(|(j, _)| *j == e.for_job)
            .map(|(_, r)| r.code);
        if code != Some(ReasonCode::WaitingForPreemption) {
            p.push(format!(
                "job {} has evictions but reason {code:?}",
                e.for_job
            ));
        }
    }
    if let Some(first) = out.evictions.first() {
        // priority-preempt serves the first blocked job only, and its victims make
        // room for it on the cluster as it is after this cycle's starts.
        if out.evictions.iter().any(|e| e.for_job != first.for_job) {
            p.push("evictions for more than one job".into());
        }
        let blocked = out.order.iter().find(|j| !started.contains(j));
        if blocked != Some(&first.for_job) {
            p.push(format!(
                "evictions for job {}, first blocked is {blocked:?}",
                first.for_job
            ));
        }
        if let Some(job) = by_id.get(&first.for_job) {
            let mut model = after_starts(snap, out);
            for e in &out.evictions {
                for a in running
                    .get(&e.job)
                    .map(|r| r.tasks.as_slice())
                    .unwrap_or(&[])
                {
                    model.release(a);
                }
            }
            if model.fit_gang(&snap.ctx, job).is_err() {
                p.push(format!("evictions do not make room for job {}", job.id));
            }
        }
    }
    p
}

/// The cluster model after this cycle's starts.
fn after_starts(snap: &Snapshot, out: &CycleOutcome) -> ClusterModel {
    let mut model = ClusterModel::new(&snap.ctx, &snap.nodes);
    let by_id: HashMap<JobId, &Job> = snap.pending.iter().map(|j| (j.id, j)).collect();
    for s in &out.starts {
        if let Some(job) = by_id.get(&s.job) {
            for (g, a) in job.expanded_tasks().zip(&s.tasks) {
                let _ = model.take(g, a);
            }
        }
    }
    model
}

fn run(snap: &Snapshot, strict: bool, preempt: bool) -> CycleOutcome {
    let config = if strict {
        r#"{"strict": true}"#
    } else {
        r#"{"strict": false}"#
    };
    run_cycle(snap, &mut common::native_pipeline(config, preempt), None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn cycle_keeps_invariants(snap in scenario(), preempt in any::<bool>()) {
        for strict in [true, false] {
            let out = run(&snap, strict, preempt);
            let problems = check_cycle(&snap, &out, strict, preempt);
            prop_assert!(
                problems.is_empty(),
                "strict={strict} preempt={preempt}: {problems:#?}\noutcome: {out:#?}"
            );
        }
    }

    /// Strict first-fit starts a prefix of what non-strict starts, on the same GPUs.
    #[test]
    fn strict_starts_are_a_prefix_of_non_strict(snap in scenario()) {
        let strict = run(&snap, true, false);
        let loose = run(&snap, false, false);
        prop_assert!(strict.starts.len() <= loose.starts.len());
        for (a, b) in strict.starts.iter().zip(&loose.starts) {
            prop_assert_eq!(a.job, b.job);
            prop_assert_eq!(&a.tasks, &b.tasks);
        }
    }

    /// Same snapshot, same outcome.
    #[test]
    fn cycle_is_deterministic(snap in scenario(), strict in any::<bool>()) {
        let a = serde_json::to_string(&run(&snap, strict, true)).expect("serialize");
        let b = serde_json::to_string(&run(&snap, strict, true)).expect("serialize");
        prop_assert_eq!(a, b);
    }

    /// A reason of gpu-model-unavailable is only given when some GPU-using task group
    /// has no healthy GPU of an allowed model on any node that is up.
    #[test]
    fn model_unavailable_is_accurate(snap in scenario()) {
        let out = run(&snap, false, false);
        let by_id: HashMap<JobId, &Job> = snap.pending.iter().map(|j| (j.id, j)).collect();
        for (id, r) in &out.pending {
            if r.code != ReasonCode::GpuModelUnavailable {
                continue;
            }
            let job = by_id[id];
            let some_group_lacks_model = job
                .tasks
                .iter()
                .filter(|g| g.gpu_milli_per_task() > 0)
                .any(|g| !snap.nodes.iter().filter(|n| n.state == NodeState::Up).any(|n| {
                    n.gpus
                        .iter()
                        .any(|gpu| gpu.healthy && g.allows_model(snap.ctx.model_index(gpu.model)))
                }));
            prop_assert!(some_group_lacks_model, "job {id}: {} ({:?})", r.message, job.tasks);
        }
    }
}

/// One node of 4 free A100s and 4 busy H100s; a job whose two groups each ask one
/// GPU of a different model (A100 only, H100 only) cannot start for want of an H100,
/// which is insufficient-gpus: both models exist.
#[test]
fn per_group_models_short_of_gpus_is_insufficient_gpus() {
    let mut n = common::node(0, 8, common::A100);
    for g in &mut n.gpus[4..] {
        g.model = common::H100;
        g.free_milli = 0;
    }
    let mut job = common::job(1, 1, 1);
    let mut h100 = job.tasks[0];
    job.tasks[0].gpu_model_mask = 0b01;
    h100.gpu_model_mask = 0b10;
    job.tasks.push(h100);
    let snap = common::snapshot(vec![n], vec![job]);
    let out = run(&snap, true, false);
    assert!(out.starts.is_empty());
    assert_eq!(
        out.pending[0].1.code,
        ReasonCode::InsufficientGpus,
        "{}",
        out.pending[0].1.message
    );
}

/// A job of 2 whole GPUs (any model) plus a CPU-only sidecar group whose mask names
/// L4, on a cluster with a single GPU: the mask of a group that takes no GPU should
/// not matter, and the job is short of GPUs.
#[test]
fn cpu_only_group_mask_does_not_make_the_model_unavailable() {
    let mut job = common::job(1, 1, 2);
    let mut sidecar = job.tasks[0];
    sidecar.gpus = 0;
    sidecar.gpu_model_mask = 0b100;
    job.tasks.push(sidecar);
    let snap = common::snapshot(vec![common::node(0, 1, common::A100)], vec![job]);
    let out = run(&snap, true, false);
    assert!(out.starts.is_empty());
    assert_eq!(
        out.pending[0].1.code,
        ReasonCode::InsufficientGpus,
        "{}",
        out.pending[0].1.message
    );
}

/// The sidecar's mask does not stop the job from starting when GPUs are free (the
/// placement side of the same rule holds).
#[test]
fn cpu_only_group_mask_is_ignored_by_placement() {
    let mut job = common::job(1, 1, 1);
    let mut sidecar = job.tasks[0];
    sidecar.gpus = 0;
    sidecar.gpu_model_mask = 0b100;
    job.tasks.push(sidecar);
    let snap = common::snapshot(vec![common::node(0, 1, common::A100)], vec![job]);
    let out = run(&snap, true, false);
    assert_eq!(out.starts.len(), 1, "{:?}", out.pending);
    assert!(out.starts[0].tasks[1].gpus.is_empty());
}

#[test]
fn generated_scenarios_are_not_trivial() {
    // Guards the generators: over a fixed seed, cycles start jobs, leave jobs
    // pending for several reasons, evict, and see running jobs.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config::default());
    let (mut starts, mut running, mut evictions) = (0, 0, 0);
    let mut codes = HashSet::new();
    for _ in 0..200 {
        let snap = scenario()
            .new_tree(&mut runner)
            .expect("generate")
            .current();
        let out = run(&snap, false, true);
        starts += out.starts.len();
        running += snap.running.len();
        evictions += out.evictions.len();
        codes.extend(out.pending.iter().map(|(_, r)| r.code));
    }
    eprintln!("starts {starts} running {running} evictions {evictions} codes {codes:?}");
    assert!(starts > 100, "{starts} starts");
    assert!(running > 100, "{running} running");
    assert!(evictions > 5, "{evictions} evictions");
    for c in [
        ReasonCode::InsufficientGpus,
        ReasonCode::GpuModelUnavailable,
        ReasonCode::WaitingForPreemption,
    ] {
        assert!(codes.contains(&c), "no {c:?} in {codes:?}");
    }
}

/// The independent checker is not vacuous: corrupting a good outcome in each of the
/// ways the properties guard against is reported.
#[test]
fn checker_catches_violations() {
    let n1 = common::node(1, 2, common::H100);
    let mut n2 = common::node(2, 2, common::A100);
    n2.state = NodeState::Draining;
    let mut n0 = common::node(0, 5, common::A100);
    n0.gpus[4].healthy = false;
    let mut a100_only = common::job(3, 1, 1);
    a100_only.tasks[0].gpu_model_mask = 0b01;
    let snap = common::snapshot(
        vec![n0, n1, n2],
        vec![common::job(1, 2, 1), common::frac_job(2, 1, 600), a100_only],
    );
    let good = run(&snap, false, false);
    assert_eq!(good.starts.len(), 3, "{:?}", good.pending);
    assert!(common::check_outcome(&snap, &good).is_empty());

    type Corrupt = fn(&mut CycleOutcome);
    let cases: Vec<(&str, Corrupt)> = vec![
        ("whole GPU shared", |o| {
            o.starts[1].tasks[0].gpus[0].index = 0
        }),
        ("GPU over 1000 milli", |o| {
            o.starts[1].tasks[0].gpus[0] = GpuShare {
                index: 0,
                milli: 600,
            };
            o.starts[0].tasks[0].gpus[0].milli = 600;
        }),
        ("half a gang", |o| drop(o.starts[0].tasks.pop())),
        ("unhealthy GPU", |o| o.starts[2].tasks[0].gpus[0].index = 4),
        ("draining node", |o| o.starts[2].tasks[0].node = 2),
        ("disallowed model", |o| {
            o.starts[2].tasks[0].node = 1;
            o.starts[2].tasks[0].gpus[0].index = 0;
        }),
        ("CPU over total", |o| {
            o.starts[2].tasks[0].cpu_milli = 64_000
        }),
        ("not pending", |o| o.starts[2].job = 77),
        ("started twice", |o| {
            let again = o.starts[2].clone();
            o.starts.push(again);
        }),
        ("no reason", |o| {
            o.starts.pop();
        }),
        ("two reasons", |o| {
            let r = gantry_engine::PendingReason {
                stage: gantry_contract::Stage::Placement,
                code: ReasonCode::Other,
                message: String::new(),
                plugin: "test".into(),
                priority_note: None,
            };
            o.starts.pop();
            o.pending = vec![(3, r.clone()), (3, r)];
        }),
        ("reason for a started job", |o| {
            let r = gantry_engine::PendingReason {
                stage: gantry_contract::Stage::Placement,
                code: ReasonCode::Other,
                message: String::new(),
                plugin: "test".into(),
                priority_note: None,
            };
            o.pending = vec![(3, r)];
        }),
    ];
    for (name, corrupt) in cases {
        let mut bad = good.clone();
        corrupt(&mut bad);
        assert!(
            !common::check_outcome(&snap, &bad).is_empty(),
            "{name}: not caught in {:?}",
            bad.starts
        );
    }
}
