//! Misbehaving plugin fixtures: stages written directly against the engine's traits
//! that return invalid output or errors. For each, the cycle must record the fault
//! (stage, plugin, kind), use the fallback pipeline's decision (native fifo,
//! first-fit, priority-preempt), apply nothing invalid, and after
//! [`QUARANTINE_AFTER`] consecutive faults stop calling the plugin
//! ([`FaultKind::Quarantined`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{frac_job, job, native_pipeline, node};
use gantry_contract::{
    Admission, Cycle, Eviction, Job, JobId, Node, NodeState, Placement, Plan, Preemption, Priority,
    Reason, ReasonCode, RunningJob, Scored, Stage, SubmitVerdict, TaskAllocation, Verdict,
};
use gantry_engine::pipeline::QUARANTINE_AFTER;
use gantry_engine::{
    AdmissionStage, CycleOutcome, FaultKind, Identified, Pipeline, PlacementStage, PluginIdent,
    PolicyFault, PreemptionStage, PriorityStage, Snapshot, StageSlot, run_cycle,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "faults/admission.rs"]
mod admission;
#[path = "faults/placement.rs"]
mod placement;
#[path = "faults/preemption.rs"]
mod preemption;
#[path = "faults/priority.rs"]
mod priority;

// ---------------------------------------------------------------- fixtures

fn ident(name: &str) -> PluginIdent {
    PluginIdent {
        name: name.into(),
        version: "0.0.1".into(),
        sha256: "test".into(),
    }
}

/// Counts calls; shared between a fixture and the test that owns it.
#[derive(Clone, Default)]
struct Calls(Arc<AtomicUsize>);

impl Calls {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

type PlaceFn = dyn FnMut(&[Job]) -> Result<Plan, PolicyFault> + Send;

/// A placement stage that returns whatever its script says.
struct BadPlacement {
    ident: PluginIdent,
    calls: Calls,
    script: Box<PlaceFn>,
}

impl Identified for BadPlacement {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Placement<PolicyFault> for BadPlacement {
    fn place(
        &mut self,
        _ctx: &Cycle,
        jobs: &[Job],
        _nodes: &[Node],
        _running: &[RunningJob],
    ) -> Result<Plan, PolicyFault> {
        self.calls.hit();
        (self.script)(jobs)
    }
}

type ScoreFn = dyn FnMut(&[Job]) -> Result<Vec<Scored>, PolicyFault> + Send;

/// A priority stage that returns whatever its script says.
struct ScriptedPriority {
    ident: PluginIdent,
    calls: Calls,
    script: Box<ScoreFn>,
}

impl Identified for ScriptedPriority {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Priority<PolicyFault> for ScriptedPriority {
    fn score(
        &mut self,
        _ctx: &Cycle,
        jobs: &[Job],
        _previous: &[f64],
    ) -> Result<Vec<Scored>, PolicyFault> {
        self.calls.hit();
        (self.script)(jobs)
    }
}

type AdmitFn = dyn FnMut(&[Job]) -> Result<Vec<Verdict>, PolicyFault> + Send;

/// An admission stage that returns whatever its script says.
struct ScriptedAdmission {
    ident: PluginIdent,
    calls: Calls,
    script: Box<AdmitFn>,
}

impl Identified for ScriptedAdmission {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Admission<PolicyFault> for ScriptedAdmission {
    fn check_submit(&mut self, _ctx: &Cycle, _job: &Job) -> Result<SubmitVerdict, PolicyFault> {
        Ok(SubmitVerdict::Accept)
    }
    fn admit(&mut self, _ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, PolicyFault> {
        self.calls.hit();
        (self.script)(jobs)
    }
}

type PreemptFn = dyn FnMut(&[Job]) -> Result<Vec<Eviction>, PolicyFault> + Send;

/// A preemption stage that returns whatever its script says.
struct BadPreemption {
    ident: PluginIdent,
    calls: Calls,
    script: Box<PreemptFn>,
}

impl Identified for BadPreemption {
    fn ident(&self) -> &PluginIdent {
        &self.ident
    }
}

impl Preemption<PolicyFault> for BadPreemption {
    fn preempt(
        &mut self,
        _ctx: &Cycle,
        blocked: &[Job],
        _blocked_scores: &[f64],
        _nodes: &[Node],
        _running: &[RunningJob],
    ) -> Result<Vec<Eviction>, PolicyFault> {
        self.calls.hit();
        (self.script)(blocked)
    }
}

fn bad_placement(
    script: impl FnMut(&[Job]) -> Result<Plan, PolicyFault> + Send + 'static,
) -> (StageSlot<dyn PlacementStage>, Calls) {
    let calls = Calls::default();
    let stage = BadPlacement {
        ident: ident("bad-placement"),
        calls: calls.clone(),
        script: Box::new(script),
    };
    (StageSlot::new(Box::new(stage), "{}"), calls)
}

fn priority_slot(
    name: &str,
    script: impl FnMut(&[Job]) -> Result<Vec<Scored>, PolicyFault> + Send + 'static,
) -> (StageSlot<dyn PriorityStage>, Calls) {
    let calls = Calls::default();
    let stage = ScriptedPriority {
        ident: ident(name),
        calls: calls.clone(),
        script: Box::new(script),
    };
    (StageSlot::new(Box::new(stage), "{}"), calls)
}

fn admission_slot(
    name: &str,
    script: impl FnMut(&[Job]) -> Result<Vec<Verdict>, PolicyFault> + Send + 'static,
) -> (StageSlot<dyn AdmissionStage>, Calls) {
    let calls = Calls::default();
    let stage = ScriptedAdmission {
        ident: ident(name),
        calls: calls.clone(),
        script: Box::new(script),
    };
    (StageSlot::new(Box::new(stage), "{}"), calls)
}

fn bad_preemption(
    script: impl FnMut(&[Job]) -> Result<Vec<Eviction>, PolicyFault> + Send + 'static,
) -> (StageSlot<dyn PreemptionStage>, Calls) {
    let calls = Calls::default();
    let stage = BadPreemption {
        ident: ident("bad-preemption"),
        calls: calls.clone(),
        script: Box::new(script),
    };
    (StageSlot::new(Box::new(stage), "{}"), calls)
}

/// A well-behaved priority stage: largest GPU demand first.
fn largest_first() -> StageSlot<dyn PriorityStage> {
    priority_slot("largest-first", |jobs| {
        Ok(jobs
            .iter()
            .map(|j| Scored {
                score: j.gpu_milli_total() as f64,
                tier: None,
                note: None,
            })
            .collect())
    })
    .0
}

/// A well-behaved admission stage: holds job `held`, admits the rest.
fn hold_job(name: &str, held: JobId) -> StageSlot<dyn AdmissionStage> {
    admission_slot(name, move |jobs| {
        Ok(jobs
            .iter()
            .map(|j| {
                if j.id == held {
                    Verdict::Hold(Reason::new(ReasonCode::HeldByPolicy, "over quota"))
                } else {
                    Verdict::Admit
                }
            })
            .collect())
    })
    .0
}

fn boom() -> PolicyFault {
    PolicyFault::new(FaultKind::PluginError, "boom")
}

/// Node 0: 4 A100, GPU 3 unhealthy. Node 1: 4 H100. Node 2: 4 A100, draining.
/// Pending: 1 (2 GPUs), 2 (gang 2 x 1 GPU), 3 (600 milli), 4 (1 A100), 5 (500 milli).
fn cluster() -> Snapshot {
    let mut n0 = node(0, 4, common::A100);
    n0.gpus[3].healthy = false;
    let n1 = node(1, 4, common::H100);
    let mut n2 = node(2, 4, common::A100);
    n2.state = NodeState::Draining;
    let mut j4 = job(4, 1, 1);
    j4.tasks[0].gpu_model_mask = 0b1;
    common::snapshot(
        vec![n0, n1, n2],
        vec![
            job(1, 1, 2),
            job(2, 2, 1),
            frac_job(3, 1, 600),
            j4,
            frac_job(5, 1, 500),
        ],
    )
}

/// What the fallback alone decides on `snap`.
fn clean(snap: &Snapshot, fallback: fn() -> Pipeline) -> CycleOutcome {
    let out = run_cycle(snap, &mut fallback(), None);
    assert!(out.faults.is_empty(), "clean run faulted: {:?}", out.faults);
    out
}

fn fallback_pipeline() -> Pipeline {
    native_pipeline("{}", true)
}

fn starts_of(out: &CycleOutcome) -> Vec<(JobId, Vec<TaskAllocation>)> {
    out.starts
        .iter()
        .map(|s| (s.job, s.tasks.clone()))
        .collect()
}

fn codes_of(out: &CycleOutcome) -> Vec<(JobId, ReasonCode)> {
    let mut v: Vec<(JobId, ReasonCode)> = out.pending.iter().map(|(j, r)| (*j, r.code)).collect();
    v.sort_by_key(|(j, _)| *j);
    v
}

/// The outcome equals the fallback's own decision and breaks no invariant.
fn assert_fallback_decision(snap: &Snapshot, out: &CycleOutcome, want: &CycleOutcome) {
    assert_eq!(out.order, want.order, "order");
    assert_eq!(starts_of(out), starts_of(want), "starts");
    assert_eq!(codes_of(out), codes_of(want), "pending reason codes");
    let ev = |o: &CycleOutcome| -> Vec<(JobId, JobId)> {
        o.evictions.iter().map(|e| (e.job, e.for_job)).collect()
    };
    assert_eq!(ev(out), ev(want), "evictions");
    let problems = common::check_outcome(snap, out);
    assert!(problems.is_empty(), "invariants broken: {problems:#?}");
}

/// Exactly one fault, from `plugin` at `stage`, of `kind`, with fallback.
fn assert_one_fault(out: &CycleOutcome, stage: Stage, plugin: &str, kind: FaultKind) {
    assert_eq!(out.faults.len(), 1, "faults: {:#?}", out.faults);
    let f = &out.faults[0];
    assert_eq!(f.stage, stage, "{f:?}");
    assert_eq!(f.plugin.name, plugin, "{f:?}");
    assert_eq!(f.fault.kind, kind, "{f:?}");
    assert!(f.fell_back, "{f:?}");
}

/// Runs `QUARANTINE_AFTER` cycles that fault with `kind`, then one more that must
/// not call the plugin and must record `Quarantined`; the fallback decides every time.
fn assert_quarantined_after_three(
    snap: &Snapshot,
    mut live: Pipeline,
    calls: &Calls,
    stage: Stage,
    plugin: &str,
    kind: FaultKind,
) {
    let want = clean(snap, fallback_pipeline);
    let mut fb = fallback_pipeline();
    for cycle in 1..=QUARANTINE_AFTER as usize {
        let out = run_cycle(snap, &mut live, Some(&mut fb));
        assert_one_fault(&out, stage, plugin, kind);
        assert_fallback_decision(snap, &out, &want);
        assert_eq!(calls.get(), cycle, "the plugin is called in cycle {cycle}");
    }
    let out = run_cycle(snap, &mut live, Some(&mut fb));
    assert_one_fault(&out, stage, plugin, FaultKind::Quarantined);
    assert_fallback_decision(snap, &out, &want);
    assert_eq!(
        calls.get(),
        QUARANTINE_AFTER as usize,
        "a quarantined plugin is not called"
    );
}

fn live_with_placement(slot: StageSlot<dyn PlacementStage>) -> Pipeline {
    Pipeline {
        admission: vec![],
        priority: vec![common::fifo()],
        placement: slot,
        preemption: None,
    }
}

#[test]
fn quarantine_threshold_is_three() {
    assert_eq!(QUARANTINE_AFTER, 3);
}
