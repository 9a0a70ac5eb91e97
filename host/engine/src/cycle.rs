//! One scheduling cycle on an immutable snapshot (`ARCHITECTURE.md`, "Where each decision is made"): admission chain,
//! priority chain, host sort by (tier, score, submit time, id), placement, preemption.
//! Every plugin call that faults, or whose output breaks the contract, is recorded and
//! replaced by the fallback pipeline's answer (or, without one, by the safe built-in
//! behaviour: admit, score 0, start nothing, evict nothing). Every job left pending
//! gets a reason.
//!
//! Owns: stage order, the host sort, reasons of pending jobs. Does not own: calling a
//! stage with checks and fallback (`stage_calls`), how the plan is applied (the
//! daemon) or the rules of validity (`validate`).

pub use crate::pending_reason::PendingReason;
use crate::pipeline::{FaultRecord, Pipeline};
use crate::snapshot::Snapshot;
use crate::stage_calls::{admission, placement, preemption, priority};
use gantry_contract::{Eviction, Job, JobId, Reason, ReasonCode, Scored, Stage, TaskAllocation};
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

/// Everything a cycle decided.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CycleOutcome {
    /// The cycle's id.
    pub cycle_id: u64,
    /// Admitted jobs in priority order.
    pub order: Vec<JobId>,
    /// Effective (tier, score) of each job in `order`, same positions.
    #[serde(default)]
    pub priorities: Vec<(i32, f64)>,
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
    let note_of: HashMap<JobId, String> = admitted
        .iter()
        .zip(&scored)
        .filter_map(|(j, s)| s.note.clone().map(|n| (j.id, n)))
        .collect();
    let score_of: HashMap<JobId, f64> = admitted
        .iter()
        .zip(&scored)
        .map(|(j, s)| (j.id, s.score))
        .collect();
    out.priorities = ordered
        .iter()
        .map(|j| (j.tier, score_of.get(&j.id).copied().unwrap_or_default()))
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
                priority_note: note_of.get(&job.id).cloned(),
            },
        ));
    }
    out
}

/// Host order: tier (high first), score (high first), submit time, id.
fn sort_jobs(jobs: &[Job], scored: &[Scored]) -> Vec<Job> {
    let mut ordered: Vec<(Job, f64)> = jobs
        .iter()
        .zip(scored)
        .map(|(j, s)| {
            let mut j = j.clone();
            if let Some(tier) = s.tier.filter(|t| *t != j.tier) {
                // No longer the job its producer numbered: compared field by field.
                j.tier = tier;
                j.revision = 0;
            }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_contract::{Gpu, GpuShare, Node, Start, TaskAllocation};

    #[test]
    fn a_job_whose_tier_the_priority_stage_changed_loses_its_number() {
        let job = |id, tier| Job {
            id,
            tier,
            revision: 40 + id,
            ..Job::default()
        };
        let scored = |tier| Scored {
            score: 0.0,
            tier,
            note: None,
        };
        let jobs = [job(1, 0), job(2, 3), job(3, 0)];
        let ordered = sort_jobs(&jobs, &[scored(Some(5)), scored(Some(3)), scored(None)]);
        let revision = |id| ordered.iter().find(|j| j.id == id).unwrap().revision;
        assert_eq!(revision(1), 0, "tier 0 -> 5: not the numbered job");
        assert_eq!(revision(2), 42, "the same tier again: unchanged");
        assert_eq!(revision(3), 43);
    }

    #[test]
    fn a_node_the_starts_book_on_loses_its_number() {
        let node = |id| Node {
            id,
            gpus: vec![Gpu {
                index: 0,
                model: 0,
                memory_mib: 1,
                free_milli: 1000,
                healthy: true,
                parent: None,
            }],
            revision: 9,
            ..Node::default()
        };
        let mut nodes = vec![node(0), node(1)];
        let start = Start {
            job: 1,
            tasks: vec![TaskAllocation {
                node: 1,
                gpus: vec![GpuShare {
                    index: 0,
                    milli: 1000,
                }],
                cpu_milli: 0,
                memory_mib: 0,
            }],
        };
        crate::stage_calls::apply_starts(&mut nodes, &[start]);
        assert_eq!((nodes[0].revision, nodes[1].revision), (9, 0));
        assert_eq!(nodes[1].gpus[0].free_milli, 0);
    }
}
