//! Contract 0.2 against the same plugins compiled in: random sequences of cluster events
//! (submits, ends, drains, GPU faults, re-numbered symbols; jobs numbered as the daemon
//! numbers them in half of the sequences) through `fifo` + `first-fit` +
//! `priority-preempt` as 0.2 components and natively, which must decide identically every
//! cycle while most of each list travels as "unchanged"; and the fault injector (a 0.2
//! placement plugin that traps, overruns, hogs memory or answers invalid plans at random)
//! whose every fault is followed by a full resend and, when it behaves, the native plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_contract::{
    Cycle, Gpu, Job, JobKind, Label, Node, NodeState, RunningJob, TaskAllocation, TaskGroup,
    next_revision,
};
use gantry_engine::{CycleOutcome, Interner, Native, Pipeline, Snapshot, StageSlot, run_cycle};
use gantry_fixture_fault_injector::{Action, action};
use gantry_plugin_runtime::{Limits, PluginInstance, Runtime, RuntimeOptions};

struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// The cluster as text (symbols are made per cycle, as the daemon's snapshot does).
struct World {
    nodes: Vec<(String, NodeState, Vec<bool>, Vec<u32>)>, // name, state, healthy, free milli
    pending: Vec<(Job, String, String)>,                  // job (symbols unset), user, project
    running: Vec<(RunningJob, String, String)>,
    next_id: u64,
    now_ms: u64,
    /// Whether jobs are numbered as the daemon numbers them (`Job::revision`, a new number
    /// when submitted and when started), so that the host keeps them without comparing.
    numbered: bool,
}

const USERS: [&str; 5] = ["alice", "bob", "carol", "dave", "erin"];

impl World {
    fn new(rng: &mut Lcg, numbered: bool) -> Self {
        let nodes = (0..6)
            .map(|i| {
                let gpus = 4 + 4 * rng.below(2) as usize;
                (
                    format!("n{i}"),
                    NodeState::Up,
                    vec![true; gpus],
                    vec![1000; gpus],
                )
            })
            .collect();
        Self {
            nodes,
            pending: Vec::new(),
            running: Vec::new(),
            next_id: 1,
            now_ms: 1_700_000_000_000,
            numbered,
        }
    }

    /// Random events between two cycles.
    fn step(&mut self, rng: &mut Lcg) {
        self.now_ms += 10_000;
        for _ in 0..rng.below(5) {
            let job = Job {
                id: self.next_id,
                tier: rng.below(3) as i32,
                submit_ms: self.now_ms,
                time_limit_s: 600 * (1 + rng.below(6)),
                kind: JobKind::Batch,
                preemptible: rng.below(3) != 0,
                tasks: vec![TaskGroup {
                    count: 1 + rng.below(2) as u32,
                    gpus: 1 + rng.below(3) as u32,
                    cpu_milli: 1000,
                    memory_mib: 1024,
                    ..TaskGroup::default()
                }],
                revision: self.revision(),
                ..Job::default()
            };
            let user = USERS[rng.below(USERS.len() as u64) as usize].to_string();
            self.pending.push((job, user, format!("p{}", rng.below(4))));
            self.next_id += 1;
        }
        // Some running jobs end.
        let mut ended = Vec::new();
        self.running.retain(|r| {
            let keep = rng.below(4) != 0;
            if !keep {
                ended.push(r.0.tasks.clone());
            }
            keep
        });
        for tasks in ended {
            self.free(&tasks);
        }
        // Now and then a node drains or comes back, or a GPU fails or recovers.
        if rng.below(5) == 0 {
            let n = rng.below(self.nodes.len() as u64) as usize;
            self.nodes[n].1 = match self.nodes[n].1 {
                NodeState::Up => NodeState::Draining,
                _ => NodeState::Up,
            };
        }
        if rng.below(6) == 0 {
            let n = rng.below(self.nodes.len() as u64) as usize;
            let g = rng.below(self.nodes[n].2.len() as u64) as usize;
            self.nodes[n].2[g] = !self.nodes[n].2[g];
        }
    }

    fn revision(&self) -> u64 {
        if self.numbered { next_revision() } else { 0 }
    }

    fn free(&mut self, tasks: &[TaskAllocation]) {
        for t in tasks {
            for share in &t.gpus {
                self.nodes[t.node as usize].3[share.index as usize] += share.milli;
            }
        }
    }

    /// This cycle's snapshot, interning strings in a shuffled order.
    fn snapshot(&self, cycle: u64, rng: &mut Lcg) -> Snapshot {
        let mut s = Interner::new();
        let mut words: Vec<String> = USERS.iter().map(|u| u.to_string()).collect();
        words.extend((0..4).map(|i| format!("p{i}")));
        words.extend(["A100", "project", "default", "train"].map(String::from));
        let turn = rng.below(words.len() as u64) as usize;
        words.rotate_left(turn);
        for w in &words {
            s.intern(w);
        }
        let model = s.intern("A100");
        let mut job = |j: &Job, user: &str, project: &str| Job {
            name: s.intern("train"),
            user: s.intern(user),
            account: s.intern(user),
            queue: s.intern("default"),
            labels: vec![Label {
                key: s.intern("project"),
                value: s.intern(project),
            }],
            ..j.clone()
        };
        let pending = self.pending.iter().map(|(j, u, p)| job(j, u, p)).collect();
        let running = self
            .running
            .iter()
            .map(|(r, u, p)| RunningJob {
                job: job(&r.job, u, p),
                ..r.clone()
            })
            .collect();
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (name, state, healthy, free))| Node {
                id: i as u32,
                name: s.intern(name),
                state: *state,
                cpu_milli_total: 64_000,
                cpu_milli_free: 64_000,
                memory_mib_total: 512_000,
                memory_mib_free: 512_000,
                gpus: (0..free.len())
                    .map(|g| Gpu {
                        index: g as u32,
                        model,
                        memory_mib: 81_920,
                        free_milli: free[g],
                        healthy: healthy[g],
                        parent: None,
                    })
                    .collect(),
                ..Node::default()
            })
            .collect();
        Snapshot {
            ctx: Cycle {
                id: cycle,
                now_ms: self.now_ms,
                seed: cycle * 7,
                gpu_models: vec![model],
                strings: s.into_strings(),
                ..Cycle::default()
            },
            pending,
            nodes,
            running,
            evicting: Vec::new(),
        }
    }

    /// Applies what a cycle decided: starts book their GPUs, evictions end at once.
    fn apply(&mut self, out: &CycleOutcome) {
        for e in &out.evictions {
            if let Some(at) = self.running.iter().position(|r| r.0.job.id == e.job) {
                let (r, _, _) = self.running.remove(at);
                self.free(&r.tasks);
            }
        }
        for s in &out.starts {
            self.start(s.job, &s.tasks, s.score);
        }
    }

    fn start(&mut self, id: u64, tasks: &[TaskAllocation], score: f64) {
        let Some(at) = self.pending.iter().position(|p| p.0.id == id) else {
            return;
        };
        let (job, user, project) = self.pending.remove(at);
        for t in tasks {
            for share in &t.gpus {
                self.nodes[t.node as usize].3[share.index as usize] -= share.milli;
            }
        }
        let run = RunningJob {
            job,
            tasks: tasks.to_vec(),
            start_ms: self.now_ms,
            expected_end_ms: None,
            score,
            revision: self.revision(),
        };
        self.running.push((run, user, project));
    }
}

fn instance(rt: &Runtime, bytes: &[u8], config: &str) -> Box<PluginInstance> {
    let limits = Limits {
        deadline_ms: 300,
        memory_mib: 64,
    };
    Box::new(rt.load(bytes).unwrap().instantiate(config, limits).unwrap())
}

fn native() -> Pipeline {
    Pipeline {
        admission: Vec::new(),
        priority: vec![StageSlot::new(
            Box::new(Native::new(gantry_plugin_fifo::Fifo, "{}").unwrap()),
            "{}",
        )],
        placement: StageSlot::new(
            Box::new(Native::new(gantry_plugin_first_fit::FirstFit::default(), "{}").unwrap()),
            "{}",
        ),
        preemption: Some(StageSlot::new(
            Box::new(
                Native::new(
                    gantry_plugin_priority_preempt::PriorityPreempt::default(),
                    "{}",
                )
                .unwrap(),
            ),
            "{}",
        )),
    }
}

/// What must be identical: starts with their allocations, evictions, reasons.
fn decisions(out: &CycleOutcome) -> String {
    let starts: Vec<_> = out.starts.iter().map(|s| (s.job, &s.tasks)).collect();
    let evictions: Vec<_> = out.evictions.iter().map(|e| (e.job, e.for_job)).collect();
    format!(
        "{:?}\n{starts:?}\n{evictions:?}\n{:?}",
        out.order, out.pending
    )
}

#[test]
fn random_event_sequences_decide_as_the_native_twins() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let mut wasm = native();
    wasm.priority = vec![StageSlot::new(
        instance(&rt, gantry_components::FIFO, "{}"),
        "{}",
    )];
    wasm.placement = StageSlot::new(instance(&rt, gantry_components::FIRST_FIT, "{}"), "{}");
    wasm.preemption = Some(StageSlot::new(
        instance(&rt, gantry_components::PRIORITY_PREEMPT, "{}"),
        "{}",
    ));
    let mut twin = native();
    let mut evicted = 0;
    for seed in 1..=4 {
        let mut rng = Lcg(seed);
        let mut world = World::new(&mut rng, seed % 2 == 0);
        let mut started = 0;
        for cycle in 1..=60 {
            world.step(&mut rng);
            let snap = world.snapshot(seed * 1000 + cycle, &mut rng);
            let a = run_cycle(&snap, &mut twin, None);
            let b = run_cycle(&snap, &mut wasm, None);
            assert!(
                b.faults.is_empty(),
                "seed {seed} cycle {cycle}: {:?}",
                b.faults
            );
            assert_eq!(decisions(&a), decisions(&b), "seed {seed} cycle {cycle}");
            started += a.starts.len();
            evicted += a.evictions.len();
            world.apply(&a);
        }
        assert!(started > 20, "seed {seed}: only {started} starts");
    }
    assert!(evicted > 0, "the sequences exercise preemption too");
}

#[test]
fn every_fault_is_followed_by_a_full_resend_and_a_correct_plan() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let config = r#"{"fault_rate": 0.35, "seed": 3}"#;
    let mut injector = instance(&rt, gantry_components::FAULT_INJECTOR, config);
    // Built with the SDK's default (0.3.0: 0.2's deltas, plus `gpu.parent`).
    assert_eq!(injector.contract(), "0.3.0");
    let mut twin = Native::new(gantry_plugin_first_fit::FirstFit::default(), "{}").unwrap();
    let mut rng = Lcg(11);
    let mut world = World::new(&mut rng, false);
    let (mut faults, mut behaved, mut seen_faults) = (0u64, 0, 0u64);
    let mut last_faulted = false;
    for cycle in 1..=80 {
        world.step(&mut rng);
        let snap = world.snapshot(cycle, &mut rng);
        let before = injector.mirror_stats();
        let got = gantry_contract::Placement::place(
            &mut *injector,
            &snap.ctx,
            &snap.pending,
            &snap.nodes,
            &snap.running,
        );
        let want = gantry_contract::Placement::place(
            &mut twin,
            &snap.ctx,
            &snap.pending,
            &snap.nodes,
            &snap.running,
        )
        .unwrap();
        match action(0.35, 3, snap.ctx.seed, snap.ctx.id) {
            Action::Behave => {
                assert_eq!(got.unwrap(), want, "cycle {cycle}");
                behaved += 1;
            }
            Action::InvalidPlan => {
                // Valid as a WIT answer; the engine's validator refuses it (see the
                // engine's tests) and calls `answer_rejected`: the same as a fault here.
                let plan = got.unwrap();
                assert_ne!(plan, want, "cycle {cycle}");
                gantry_engine::Identified::answer_rejected(&mut *injector);
                faults += 1;
            }
            other => {
                assert!(got.is_err(), "cycle {cycle}: {other:?} did not fault");
                faults += 1;
            }
        }
        let after = injector.mirror_stats();
        assert_eq!(after.calls, before.calls + 1);
        // A full resend happens on the first call and on the call after a fault only.
        let resent = after.full_resends > before.full_resends;
        assert_eq!(
            resent,
            cycle == 1 || last_faulted,
            "cycle {cycle}: {after:?}"
        );
        last_faulted = faults > seen_faults;
        seen_faults = faults;
        for s in &want.starts {
            world.start(s.job, &s.tasks, 0.0);
        }
    }
    let stats = injector.mirror_stats();
    assert!(
        faults >= 10 && behaved >= 30,
        "faults {faults}, behaved {behaved}"
    );
    let followed = faults - u64::from(last_faulted);
    assert_eq!(
        stats.full_resends,
        1 + followed,
        "one full send at first and one after each fault: {stats:?}"
    );
    assert!(stats.kept > stats.fresh, "{stats:?}");
}

/// One node of four free GPUs and `pending` 2-GPU jobs; `running` holds GPUs 0 and 1.
fn small(cycle: u64, pending: &[u64], running: bool) -> Snapshot {
    let mut s = Interner::new();
    let model = s.intern("A100");
    let job = |id: u64| Job {
        id,
        submit_ms: id,
        tasks: vec![TaskGroup {
            count: 1,
            gpus: 2,
            cpu_milli: 1000,
            memory_mib: 1024,
            ..TaskGroup::default()
        }],
        ..Job::default()
    };
    let taken = |g: u32| running && g < 2;
    Snapshot {
        ctx: Cycle {
            id: cycle,
            gpu_models: vec![model],
            strings: s.into_strings(),
            ..Cycle::default()
        },
        pending: pending.iter().map(|id| job(*id)).collect(),
        nodes: vec![Node {
            id: 0,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 512_000,
            memory_mib_free: 512_000,
            gpus: (0..4)
                .map(|index| Gpu {
                    index,
                    model,
                    memory_mib: 81_920,
                    free_milli: if taken(index) { 0 } else { 1000 },
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Node::default()
        }],
        running: if running {
            vec![RunningJob {
                job: job(1),
                tasks: vec![TaskAllocation {
                    node: 0,
                    gpus: (0..2)
                        .map(|index| gantry_contract::GpuShare { index, milli: 1000 })
                        .collect(),
                    cpu_milli: 1000,
                    memory_mib: 1024,
                }],
                start_ms: 0,
                expected_end_ms: None,
                score: 0.0,
                revision: 0,
            }]
        } else {
            Vec::new()
        },
        evicting: Vec::new(),
    }
}

#[test]
fn a_diverged_view_is_refused_by_the_validator_and_resent_in_full() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let mut stale = instance(&rt, gantry_components::HOSTILE_STALE_VIEW, "{}");
    assert_eq!(stale.contract(), "0.2.0");
    let place = |p: &mut PluginInstance, s: &Snapshot| {
        gantry_contract::Placement::place(p, &s.ctx, &s.pending, &s.nodes, &s.running).unwrap()
    };
    // Cycle 1: job 1 starts on GPUs 0 and 1, a valid plan.
    let first = small(1, &[1], false);
    let plan = place(&mut stale, &first);
    assert!(
        gantry_engine::validate_plan(&first.ctx, &first.pending, &first.nodes, &plan).is_ok(),
        "{plan:?}"
    );
    // Cycle 2: those GPUs are taken (the node travels fresh), job 2 arrives. The plugin
    // still sees the node as it was, books GPUs 0 and 1 again: the validator refuses it.
    let second = small(2, &[2], true);
    let plan = place(&mut stale, &second);
    let refused = gantry_engine::validate_plan(&second.ctx, &second.pending, &second.nodes, &plan);
    assert!(
        refused.is_err(),
        "a double booking must be refused: {plan:?}"
    );
    gantry_engine::Identified::answer_rejected(&mut *stale);
    // The next call resends everything.
    let before = stale.mirror_stats();
    let _ = place(&mut stale, &second);
    let after = stale.mirror_stats();
    assert_eq!(after.full_resends, before.full_resends + 1, "{after:?}");
    assert_eq!(
        after.kept, before.kept,
        "a full resend keeps nothing: {after:?}"
    );

    // In a pipeline: the engine records an invalid-output fault each cycle, resends, and
    // quarantines the slot after three in a row; a correct twin decides meanwhile.
    let mut pipe = native();
    pipe.placement = StageSlot::new(
        instance(&rt, gantry_components::HOSTILE_STALE_VIEW, "{}"),
        "{}",
    );
    let out = run_cycle(&first, &mut pipe, None);
    assert!(out.faults.is_empty(), "{:?}", out.faults);
    let mut fallback = native();
    let mut kinds = Vec::new();
    for cycle in 2..=5 {
        let snap = small(cycle, &[2, cycle + 10], true);
        let out = run_cycle(&snap, &mut pipe, Some(&mut fallback));
        kinds.extend(out.faults.iter().map(|f| f.fault.kind));
        // Whatever the faulty plugin said, what starts is valid: the fallback decided.
        assert!(
            out.starts
                .iter()
                .all(|s| s.placed_by != "hostile-stale-view")
        );
    }
    use gantry_engine::FaultKind;
    assert_eq!(
        kinds,
        [
            FaultKind::InvalidOutput,
            FaultKind::InvalidOutput,
            FaultKind::InvalidOutput,
            FaultKind::Quarantined
        ],
    );
}
