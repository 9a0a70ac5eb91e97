//! The calls a cycle makes to each stage, with checking and fallback: a plugin call
//! that faults or breaks the contract is recorded once on its slot (so repeated
//! faults quarantine it) and answered by the fallback pipeline, or by the safe
//! built-in behaviour (admit, score 0, start nothing, evict nothing).
//!
//! Owns: per-stage call, validation hook, fallback. Does not own the order of stages
//! or the reasons of pending jobs (`cycle`).

use crate::node_count::hold_back_unspread;
use crate::pending_reason::PendingReason;
use crate::pipeline::{
    FaultKind, FaultRecord, Identified, Pipeline, PluginIdent, PolicyFault, StageSlot,
};
use crate::snapshot::Snapshot;
use crate::validate::{validate_evictions, validate_plan};
use gantry_contract::{Eviction, Job, JobId, Plan, Reason, ReasonCode, Scored, Stage, Verdict};
use std::collections::{HashMap, HashSet};

fn fault(stage: Stage, plugin: &PluginIdent, fault: PolicyFault, fell_back: bool) -> FaultRecord {
    FaultRecord {
        stage,
        plugin: plugin.clone(),
        fault,
        fell_back,
    }
}

/// Calls `f` on a slot unless it is quarantined, checks the output with `check`, and
/// records the outcome once (a contract violation counts as a fault of the plugin).
fn call_slot<S: Identified + ?Sized, T>(
    slot: &mut StageSlot<S>,
    f: impl FnOnce(&mut S) -> Result<T, PolicyFault>,
    check: impl FnOnce(&T) -> Result<(), PolicyFault>,
) -> Result<T, PolicyFault> {
    if slot.quarantined() {
        return Err(PolicyFault::new(
            FaultKind::Quarantined,
            format!(
                "quarantined after {} faults in a row",
                slot.consecutive_faults
            ),
        ));
    }
    let r = f(&mut slot.plugin).and_then(|v| match check(&v) {
        Ok(()) => Ok(v),
        Err(fault) => {
            slot.plugin.answer_rejected();
            Err(fault)
        }
    });
    slot.record(&r);
    r
}

fn invalid(message: String) -> PolicyFault {
    PolicyFault::new(FaultKind::InvalidOutput, message)
}

fn same_len<T>(what: &'static str, n: usize) -> impl FnOnce(&Vec<T>) -> Result<(), PolicyFault> {
    move |v| {
        if v.len() == n {
            Ok(())
        } else {
            Err(invalid(format!("{} {what} for {n} jobs", v.len())))
        }
    }
}

pub(crate) type Holds = Vec<(JobId, PendingReason)>;

pub(crate) fn admission(
    snap: &Snapshot,
    live: &mut Pipeline,
    mut fallback: Option<&mut Pipeline>,
    faults: &mut Vec<FaultRecord>,
) -> (Option<Vec<Job>>, Holds) {
    if live.admission.is_empty() {
        return (None, Vec::new());
    }
    let mut jobs: Vec<Job> = snap.pending.clone();
    let mut holds = Vec::new();
    for i in 0..live.admission.len() {
        let slot = &mut live.admission[i];
        let ident = slot.plugin.ident().clone();
        let n = jobs.len();
        let (verdicts, decided_by) =
            match call_slot(slot, |p| p.admit(&snap.ctx, &jobs), same_len("verdicts", n)) {
                Ok(v) => (v, ident.name.clone()),
                Err(f) => {
                    let fb = fallback.as_deref_mut().and_then(|p| p.admission.get_mut(i));
                    faults.push(fault(Stage::Admission, &ident, f, fb.is_some()));
                    match fb {
                        Some(s) => {
                            let fb_ident = s.plugin.ident().clone();
                            match call_slot(
                                s,
                                |p| p.admit(&snap.ctx, &jobs),
                                same_len("verdicts", n),
                            ) {
                                Ok(v) => (v, fb_ident.name),
                                Err(f2) => {
                                    faults.push(fault(Stage::Admission, &fb_ident, f2, false));
                                    (vec![Verdict::Admit; n], "host".to_string())
                                }
                            }
                        }
                        None => (vec![Verdict::Admit; n], "host".to_string()),
                    }
                }
            };
        let mut kept = Vec::with_capacity(n);
        for (job, verdict) in jobs.into_iter().zip(verdicts) {
            match verdict {
                Verdict::Admit => kept.push(job),
                Verdict::Hold(r) => holds.push((
                    job.id,
                    PendingReason {
                        stage: Stage::Admission,
                        code: r.code,
                        message: r.message,
                        plugin: decided_by.clone(),
                        priority_note: None,
                    },
                )),
            }
        }
        jobs = kept;
    }
    (Some(jobs), holds)
}

fn run_priority_chain(
    snap: &Snapshot,
    jobs: &[Job],
    pipeline: &mut Pipeline,
) -> Result<Vec<Scored>, (PluginIdent, PolicyFault)> {
    let mut scored: Vec<Scored> = jobs
        .iter()
        .map(|_| Scored {
            score: 0.0,
            tier: None,
            note: None,
        })
        .collect();
    for slot in &mut pipeline.priority {
        let ident = slot.plugin.ident().clone();
        let previous: Vec<f64> = scored.iter().map(|s| s.score).collect();
        let n = jobs.len();
        let check = |v: &Vec<Scored>| {
            if v.len() != n {
                Err(invalid(format!("{} scores for {n} jobs", v.len())))
            } else if v.iter().any(|s| !s.score.is_finite()) {
                Err(invalid("a score is NaN or infinite".into()))
            } else {
                Ok(())
            }
        };
        match call_slot(slot, |p| p.score(&snap.ctx, jobs, &previous), check) {
            Ok(v) => {
                for (s, new) in scored.iter_mut().zip(v) {
                    s.score = new.score;
                    s.tier = new.tier.or(s.tier);
                    s.note = new.note.or(s.note.take());
                }
            }
            Err(f) => return Err((ident, f)),
        }
    }
    Ok(scored)
}

pub(crate) fn priority(
    snap: &Snapshot,
    jobs: &[Job],
    live: &mut Pipeline,
    fallback: Option<&mut Pipeline>,
    faults: &mut Vec<FaultRecord>,
) -> Vec<Scored> {
    match run_priority_chain(snap, jobs, live) {
        Ok(s) => s,
        Err((ident, f)) => {
            faults.push(fault(Stage::Priority, &ident, f, fallback.is_some()));
            let zero = || {
                jobs.iter()
                    .map(|_| Scored {
                        score: 0.0,
                        tier: None,
                        note: None,
                    })
                    .collect()
            };
            match fallback.map(|p| run_priority_chain(snap, jobs, p)) {
                Some(Ok(s)) => s,
                Some(Err((ident, f))) => {
                    faults.push(fault(Stage::Priority, &ident, f, false));
                    zero()
                }
                None => zero(),
            }
        }
    }
}

fn checked_place(
    snap: &Snapshot,
    ordered: &[Job],
    slot: &mut StageSlot<dyn crate::pipeline::PlacementStage>,
) -> Result<Plan, PolicyFault> {
    let check = |plan: &Plan| {
        validate_plan(&snap.ctx, ordered, &snap.nodes, plan)
            .map(|_| ())
            .map_err(|violations| {
                let text: Vec<String> = violations.iter().take(3).map(|v| v.to_string()).collect();
                invalid(format!("plan rejected: {}", text.join("; ")))
            })
    };
    call_slot(
        slot,
        |p| p.place(&snap.ctx, ordered, &snap.nodes, &snap.running),
        check,
    )
}

pub(crate) fn placement(
    snap: &Snapshot,
    ordered: &[Job],
    live: &mut Pipeline,
    fallback: Option<&mut Pipeline>,
    faults: &mut Vec<FaultRecord>,
) -> (Plan, String) {
    let ident = live.placement.plugin.ident().clone();
    let spread = |plan: Plan, name: &str| hold_back_unspread(&snap.ctx, ordered, plan, name);
    match checked_place(snap, ordered, &mut live.placement) {
        Ok(plan) => (spread(plan, &ident.name), ident.name),
        Err(f) => {
            faults.push(fault(
                Stage::Placement,
                &ident,
                f.clone(),
                fallback.is_some(),
            ));
            if let Some(fb) = fallback {
                let fb_ident = fb.placement.plugin.ident().clone();
                match checked_place(snap, ordered, &mut fb.placement) {
                    Ok(plan) => return (spread(plan, &fb_ident.name), fb_ident.name),
                    Err(f2) => faults.push(fault(Stage::Placement, &fb_ident, f2, false)),
                }
            }
            let pending = ordered
                .iter()
                .map(|j| gantry_contract::Pending {
                    job: j.id,
                    reason: Reason::new(
                        ReasonCode::Other,
                        format!("placement plugin {} failed: {f}", ident.name),
                    ),
                })
                .collect();
            (
                Plan {
                    starts: Vec::new(),
                    pending,
                    stopped_at: None,
                },
                ident.name,
            )
        }
    }
}

pub(crate) fn preemption(
    snap: &Snapshot,
    starts: &[gantry_contract::Start],
    blocked: &[Job],
    score_of: &HashMap<JobId, f64>,
    live: &mut Pipeline,
    fallback: Option<&mut Pipeline>,
    faults: &mut Vec<FaultRecord>,
) -> Vec<Eviction> {
    if blocked.is_empty() || !snap.evicting.is_empty() || live.preemption.is_none() {
        return Vec::new();
    }
    // Nodes as they will be after this cycle's starts.
    let mut nodes = snap.nodes.clone();
    apply_starts(&mut nodes, starts);
    let scores: Vec<f64> = blocked
        .iter()
        .map(|j| score_of.get(&j.id).copied().unwrap_or_default())
        .collect();
    let blocked_ids: HashSet<JobId> = blocked.iter().map(|j| j.id).collect();
    let evicting: HashSet<JobId> = snap.evicting.iter().map(|e| e.job).collect();
    let mut ask = |slot: &mut StageSlot<dyn crate::pipeline::PreemptionStage>| {
        let ident = slot.plugin.ident().clone();
        let check = |ev: &Vec<Eviction>| {
            validate_evictions(&snap.ctx, ev, &snap.running, &evicting, &blocked_ids).map_err(|v| {
                let text: Vec<String> = v.iter().take(3).map(|x| x.to_string()).collect();
                invalid(format!("evictions rejected: {}", text.join("; ")))
            })
        };
        call_slot(
            slot,
            |p| p.preempt(&snap.ctx, blocked, &scores, &nodes, &snap.running),
            check,
        )
        .map_err(|f| (ident, f))
    };
    let Some(slot) = live.preemption.as_mut() else {
        return Vec::new();
    };
    match ask(slot) {
        Ok(ev) => ev,
        Err((ident, f)) => {
            let fb_slot = fallback.and_then(|p| p.preemption.as_mut());
            faults.push(fault(Stage::Preemption, &ident, f, fb_slot.is_some()));
            match fb_slot.map(&mut ask) {
                Some(Ok(ev)) => ev,
                Some(Err((ident, f))) => {
                    faults.push(fault(Stage::Preemption, &ident, f, false));
                    Vec::new()
                }
                None => Vec::new(),
            }
        }
    }
}

/// Subtracts the resources of `starts` from `nodes` (used to show preemption the
/// cluster as it will be). A node changed here is no longer the one its producer
/// numbered (`Node::revision`): it is left unnumbered, compared field by field.
pub fn apply_starts(nodes: &mut [gantry_contract::Node], starts: &[gantry_contract::Start]) {
    let pos: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    for a in starts.iter().flat_map(|s| &s.tasks) {
        let Some(&i) = pos.get(&a.node) else { continue };
        let n = &mut nodes[i];
        n.revision = 0;
        n.cpu_milli_free = n.cpu_milli_free.saturating_sub(a.cpu_milli);
        n.memory_mib_free = n.memory_mib_free.saturating_sub(a.memory_mib);
        for share in &a.gpus {
            if let Some(g) = n.gpus.iter_mut().find(|g| g.index == share.index) {
                g.free_milli = g.free_milli.saturating_sub(share.milli);
            }
        }
    }
}
