//! One scheduling cycle on an immutable snapshot (DESIGN.md §2): admission chain,
//! priority chain, host sort by (tier, score, submit time, id), placement, preemption.
//! Every plugin call that faults, or whose output breaks the contract, is recorded and
//! replaced by the fallback pipeline's answer (or, without one, by the safe built-in
//! behaviour: admit, score 0, start nothing, evict nothing). Every job left pending
//! gets a reason.
//!
//! Owns: stage order, chaining, sorting, fallback, reasons. Does not own: how the plan
//! is applied (the daemon) or the rules of validity (`validate`).

use crate::pipeline::{FaultKind, FaultRecord, Pipeline, PluginIdent, PolicyFault, StageSlot};
use crate::snapshot::Snapshot;
use crate::validate::{validate_evictions, validate_plan};
use gantry_contract::{
    Eviction, Job, JobId, Plan, Reason, ReasonCode, Scored, Stage, TaskAllocation, Verdict,
};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// How many of the highest-priority blocked jobs the preemption stage is shown.
pub const PREEMPTION_HEAD: usize = 64;

/// A job the cycle starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartDecision {
    /// The job.
    pub job: JobId,
    /// One allocation per task.
    pub tasks: Vec<TaskAllocation>,
    /// Effective tier.
    pub tier: i32,
    /// Effective score.
    pub score: f64,
    /// The placement plugin that decided it.
    pub placed_by: String,
}

/// Why a job stays pending after this cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReason {
    /// The stage that left it pending.
    pub stage: Stage,
    /// Machine-readable code.
    pub code: ReasonCode,
    /// Human message.
    pub message: String,
    /// The plugin that gave the reason ("host" for the host's own).
    pub plugin: String,
}

/// Everything a cycle decided.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CycleOutcome {
    /// The cycle's id.
    pub cycle_id: u64,
    /// Admitted jobs in priority order.
    pub order: Vec<JobId>,
    /// Jobs to start.
    pub starts: Vec<StartDecision>,
    /// Jobs to evict.
    pub evictions: Vec<Eviction>,
    /// Reason for every pending job not started.
    pub pending: Vec<(JobId, PendingReason)>,
    /// Faults, in call order.
    pub faults: Vec<FaultRecord>,
}

/// Runs one cycle. `fallback` answers for a stage whose live plugin fails. A stage
/// with nothing to decide (no pending, admitted or blocked jobs) is not called.
pub fn run_cycle(
    snap: &Snapshot,
    live: &mut Pipeline,
    mut fallback: Option<&mut Pipeline>,
) -> CycleOutcome {
    let mut out = CycleOutcome {
        cycle_id: snap.ctx.id,
        ..Default::default()
    };
    if snap.pending.is_empty() {
        return out;
    }
    let (filtered, holds) = admission(snap, live, fallback.as_deref_mut(), &mut out.faults);
    out.pending.extend(holds);
    // Without admission plugins every pending job is admitted: no copy.
    let admitted: &[Job] = filtered.as_deref().unwrap_or(&snap.pending);
    if admitted.is_empty() {
        return out;
    }
    let scored = priority(
        snap,
        admitted,
        live,
        fallback.as_deref_mut(),
        &mut out.faults,
    );
    let ordered = sort_jobs(admitted, &scored);
    out.order = ordered.iter().map(|j| j.id).collect();
    let score_of: HashMap<JobId, f64> = admitted
        .iter()
        .zip(&scored)
        .map(|(j, s)| (j.id, s.score))
        .collect();

    let (plan, placed_by) = placement(
        snap,
        &ordered,
        live,
        fallback.as_deref_mut(),
        &mut out.faults,
    );
    let started: HashSet<JobId> = plan.starts.iter().map(|s| s.job).collect();
    let tier_of: HashMap<JobId, i32> = ordered.iter().map(|j| (j.id, j.tier)).collect();
    for s in &plan.starts {
        out.starts.push(StartDecision {
            job: s.job,
            tasks: s.tasks.clone(),
            tier: tier_of.get(&s.job).copied().unwrap_or_default(),
            score: score_of.get(&s.job).copied().unwrap_or_default(),
            placed_by: placed_by.clone(),
        });
    }
    let blocked: Vec<&Job> = ordered
        .iter()
        .filter(|j| !started.contains(&j.id))
        .collect();
    let head: Vec<Job> = blocked
        .iter()
        .take(PREEMPTION_HEAD)
        .map(|j| (*j).clone())
        .collect();
    let stopped_at = plan.stopped_at;
    let mut reasons: HashMap<JobId, Reason> = plan
        .pending
        .into_iter()
        .map(|p| (p.job, p.reason))
        .collect();

    let evictions = preemption(
        snap,
        &plan.starts,
        &head,
        &score_of,
        live,
        fallback,
        &mut out.faults,
    );
    for e in &evictions {
        reasons.insert(
            e.for_job,
            Reason::new(
                ReasonCode::WaitingForPreemption,
                format!("evicting job {} to make room", e.job),
            ),
        );
    }
    for ev in &snap.evicting {
        if !started.contains(&ev.for_job) {
            reasons.insert(
                ev.for_job,
                Reason::new(
                    ReasonCode::WaitingForPreemption,
                    format!("job {} is being evicted to make room", ev.job),
                ),
            );
        }
    }
    out.evictions = evictions;
    // Jobs after the one placement stopped at wait behind it (strict order).
    let mut behind: Option<JobId> = None;
    for job in &blocked {
        let reason = reasons.remove(&job.id).unwrap_or_else(|| match behind {
            Some(first) => Reason::new(
                ReasonCode::BlockedByHigherPriority,
                format!("waiting behind job {first}, which has higher priority"),
            ),
            None => Reason::new(
                ReasonCode::Other,
                format!("placement plugin {placed_by} did not start it and gave no reason"),
            ),
        });
        if stopped_at == Some(job.id) {
            behind = Some(job.id);
        }
        out.pending.push((
            job.id,
            PendingReason {
                stage: Stage::Placement,
                code: reason.code,
                message: reason.message,
                plugin: placed_by.clone(),
            },
        ));
    }
    out
}

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
fn call_slot<S: ?Sized, T>(
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
    let r = f(&mut slot.plugin).and_then(|v| check(&v).map(|()| v));
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

type Holds = Vec<(JobId, PendingReason)>;

fn admission(
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
                }
            }
            Err(f) => return Err((ident, f)),
        }
    }
    Ok(scored)
}

fn priority(
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

/// Host order: tier (high first), score (high first), submit time, id.
fn sort_jobs(jobs: &[Job], scored: &[Scored]) -> Vec<Job> {
    let mut ordered: Vec<(Job, f64)> = jobs
        .iter()
        .zip(scored)
        .map(|(j, s)| {
            let mut j = j.clone();
            j.tier = s.tier.unwrap_or(j.tier);
            (j, s.score)
        })
        .collect();
    ordered.sort_by(|(a, sa), (b, sb)| {
        b.tier
            .cmp(&a.tier)
            .then_with(|| sb.total_cmp(sa))
            .then(a.submit_ms.cmp(&b.submit_ms))
            .then(a.id.cmp(&b.id))
    });
    ordered.into_iter().map(|(j, _)| j).collect()
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

fn placement(
    snap: &Snapshot,
    ordered: &[Job],
    live: &mut Pipeline,
    fallback: Option<&mut Pipeline>,
    faults: &mut Vec<FaultRecord>,
) -> (Plan, String) {
    let ident = live.placement.plugin.ident().clone();
    match checked_place(snap, ordered, &mut live.placement) {
        Ok(plan) => (plan, ident.name),
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
                    Ok(plan) => return (plan, fb_ident.name),
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

fn preemption(
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
            validate_evictions(ev, &snap.running, &evicting, &blocked_ids).map_err(|v| {
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
/// cluster as it will be).
pub fn apply_starts(nodes: &mut [gantry_contract::Node], starts: &[gantry_contract::Start]) {
    let pos: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    for a in starts.iter().flat_map(|s| &s.tasks) {
        let Some(&i) = pos.get(&a.node) else { continue };
        let n = &mut nodes[i];
        n.cpu_milli_free = n.cpu_milli_free.saturating_sub(a.cpu_milli);
        n.memory_mib_free = n.memory_mib_free.saturating_sub(a.memory_mib);
        for share in &a.gpus {
            if let Some(g) = n.gpus.iter_mut().find(|g| g.index == share.index) {
                g.free_milli = g.free_milli.saturating_sub(share.milli);
            }
        }
    }
}
