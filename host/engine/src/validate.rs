//! The host never trusts a plan: every start and eviction a plugin returns is checked
//! against the snapshot before anything is applied.
//!
//! Owns: the rules (start only admitted jobs, once; every task of a gang; resources
//! exist, are up, healthy and free; no GPU above 1000 milli; model constraints;
//! evict only running, preemptible jobs, once, for a blocked job). Does not own what
//! happens to a rejected plan (the cycle falls back).

use gantry_contract::{
    BookError, ClusterModel, Cycle, Eviction, Job, JobId, Node, NodeId, Plan, RunningJob, Start,
};
use std::collections::{HashMap, HashSet};

/// One broken rule in a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanViolation {
    /// A start for a job that was not offered to placement.
    UnknownJob(JobId),
    /// The same job started twice.
    DuplicateStart(JobId),
    /// A gang started with the wrong number of tasks.
    IncompleteGang {
        /// The job.
        job: JobId,
        /// Tasks the job has.
        expected: usize,
        /// Allocations in the start.
        got: usize,
    },
    /// A task does not fit what is free, or does not match its request.
    Booking {
        /// The job.
        job: JobId,
        /// Task index.
        task: usize,
        /// What is wrong.
        error: BookError,
    },
    /// An eviction of a job that is not running.
    UnknownVictim(JobId),
    /// An eviction of a job that may not be preempted.
    NotPreemptible(JobId),
    /// The same job evicted twice, or one already being evicted.
    DuplicateEviction(JobId),
    /// An eviction on behalf of a job that is not blocked.
    NotBlocked(JobId),
    /// An eviction whose warning is longer than [`gantry_contract::MAX_WARN_S`].
    WarningTooLong {
        /// The victim.
        job: JobId,
        /// The warning asked for, in seconds.
        warn_s: u32,
    },
}

impl std::fmt::Display for PlanViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownJob(j) => {
                write!(f, "start for job {j}, which was not offered to placement")
            }
            Self::DuplicateStart(j) => write!(f, "job {j} started twice"),
            Self::IncompleteGang { job, expected, got } => {
                write!(
                    f,
                    "job {job} has {expected} tasks but the start places {got} (gangs are all or nothing)"
                )
            }
            Self::Booking { job, task, error } => write!(f, "job {job} task {task}: {error}"),
            Self::UnknownVictim(j) => write!(f, "eviction of job {j}, which is not running"),
            Self::NotPreemptible(j) => write!(f, "eviction of job {j}, which is not preemptible"),
            Self::DuplicateEviction(j) => write!(f, "job {j} evicted twice"),
            Self::NotBlocked(j) => write!(f, "eviction on behalf of job {j}, which is not blocked"),
            Self::WarningTooLong { job, warn_s } => write!(
                f,
                "eviction of job {job} warns {warn_s} s ahead, over {} s",
                gantry_contract::MAX_WARN_S
            ),
        }
    }
}

/// Checks every start of `plan` in order against `nodes`, as if applied one after
/// another. Returns every violation found.
///
/// Only the nodes the plan books on are modelled (a booking never looks at another
/// node), so a cycle that starts one job on a large cluster checks one node, not all.
pub fn validate_plan(
    ctx: &Cycle,
    offered: &[Job],
    nodes: &[Node],
    plan: &Plan,
) -> Result<(), Vec<PlanViolation>> {
    let by_id: HashMap<JobId, &Job> = offered.iter().map(|j| (j.id, j)).collect();
    let named: HashSet<NodeId> = plan
        .starts
        .iter()
        .flat_map(|s| &s.tasks)
        .map(|t| t.node)
        .collect();
    let booked_on: Vec<Node> = nodes
        .iter()
        .filter(|n| named.contains(&n.id))
        .cloned()
        .collect();
    let mut model = ClusterModel::new(ctx, &booked_on);
    let mut started: HashSet<JobId> = HashSet::new();
    let mut violations = Vec::new();
    for start in &plan.starts {
        if let Err(v) = check_start(&mut model, &by_id, &mut started, start) {
            violations.push(v);
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

fn check_start(
    model: &mut ClusterModel,
    by_id: &HashMap<JobId, &Job>,
    started: &mut HashSet<JobId>,
    start: &Start,
) -> Result<(), PlanViolation> {
    let job = by_id
        .get(&start.job)
        .ok_or(PlanViolation::UnknownJob(start.job))?;
    if !started.insert(start.job) {
        return Err(PlanViolation::DuplicateStart(start.job));
    }
    let expected = job.task_count();
    if start.tasks.len() != expected {
        return Err(PlanViolation::IncompleteGang {
            job: job.id,
            expected,
            got: start.tasks.len(),
        });
    }
    let mut booked = Vec::with_capacity(expected);
    for (task, (group, alloc)) in job.expanded_tasks().zip(&start.tasks).enumerate() {
        if let Err(error) = model.take(group, alloc) {
            for a in &booked {
                model.release(a);
            }
            return Err(PlanViolation::Booking {
                job: job.id,
                task,
                error,
            });
        }
        booked.push(alloc.clone());
    }
    Ok(())
}

/// A job that did not consent to preemption may still be evicted when it is an
/// interactive job whose GPUs the host measured below this utilization (percent) at its
/// latest sample: idle-GPU reclaim (`plugins/idle-reclaim`). A busy notebook never is.
pub const IDLE_EVICTION_CEILING_PERCENT: u32 = 10;

fn idle_interactive(ctx: &gantry_contract::Cycle, r: &RunningJob) -> bool {
    r.job.kind == gantry_contract::JobKind::Interactive
        && r.job
            .gpu_usage(ctx)
            .is_some_and(|u| u.latest_below(IDLE_EVICTION_CEILING_PERCENT))
}

/// Checks evictions: victims running, preemptible (or idle interactive jobs), not already
/// being evicted, each once, each for a blocked job.
pub fn validate_evictions(
    ctx: &gantry_contract::Cycle,
    evictions: &[Eviction],
    running: &[RunningJob],
    already_evicting: &HashSet<JobId>,
    blocked: &HashSet<JobId>,
) -> Result<(), Vec<PlanViolation>> {
    let by_id: HashMap<JobId, &RunningJob> = running.iter().map(|r| (r.job.id, r)).collect();
    let mut seen = HashSet::new();
    let mut violations = Vec::new();
    for e in evictions {
        let v = match by_id.get(&e.job) {
            None => Some(PlanViolation::UnknownVictim(e.job)),
            Some(r) if !r.job.preemptible && !idle_interactive(ctx, r) => {
                Some(PlanViolation::NotPreemptible(e.job))
            }
            Some(_) if already_evicting.contains(&e.job) || !seen.insert(e.job) => {
                Some(PlanViolation::DuplicateEviction(e.job))
            }
            Some(_) if !blocked.contains(&e.for_job) => Some(PlanViolation::NotBlocked(e.for_job)),
            Some(_) if e.warn_s > gantry_contract::MAX_WARN_S => {
                Some(PlanViolation::WarningTooLong {
                    job: e.job,
                    warn_s: e.warn_s,
                })
            }
            Some(_) => None,
        };
        violations.extend(v);
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_contract::gpu_usage::{GPU_BUSY_LABEL, GPU_SAMPLED_SINCE_LABEL};
    use gantry_contract::{Cycle, Job, JobKind, Label, Reason, ReasonCode};

    /// A running, non-preemptible job of `kind` whose latest GPU sample was `percent`
    /// (`None`: never sampled); strings 0 and 1 are the label keys, then its values.
    fn running(ctx: &mut Cycle, id: u64, kind: JobKind, percent: Option<u8>) -> RunningJob {
        let mut job = Job {
            id,
            kind,
            ..Default::default()
        };
        if let Some(p) = percent {
            for (key, value) in [(0, "1000".to_string()), (1, format!("{p}@2000"))] {
                ctx.strings.push(value);
                job.labels.push(Label {
                    key,
                    value: (ctx.strings.len() - 1) as u32,
                });
            }
        }
        RunningJob {
            job,
            tasks: Vec::new(),
            start_ms: 0,
            expected_end_ms: None,
            score: 0.0,
            revision: 0,
        }
    }

    fn evict(job: u64) -> Eviction {
        Eviction {
            job,
            for_job: 9,
            reason: Reason::new(ReasonCode::Preempted, "idle".to_string()),
            grace_s: 1,
            warn_s: 0,
        }
    }

    #[test]
    fn a_warning_longer_than_an_hour_is_an_invalid_answer() {
        let mut ctx = Cycle {
            strings: vec![GPU_SAMPLED_SINCE_LABEL.into(), GPU_BUSY_LABEL.into()],
            ..Default::default()
        };
        let run = vec![running(&mut ctx, 1, JobKind::Interactive, Some(2))];
        let (blocked, none): (HashSet<JobId>, _) = ([9].into(), HashSet::new());
        let warned = |warn_s| Eviction { warn_s, ..evict(1) };
        let hour = gantry_contract::MAX_WARN_S;
        assert!(validate_evictions(&ctx, &[warned(hour)], &run, &none, &blocked).is_ok());
        assert_eq!(
            validate_evictions(&ctx, &[warned(u32::MAX)], &run, &none, &blocked),
            Err(vec![PlanViolation::WarningTooLong {
                job: 1,
                warn_s: u32::MAX
            }])
        );
    }

    #[test]
    fn a_job_that_did_not_consent_is_evicted_only_as_an_idle_interactive_one() {
        let mut ctx = Cycle {
            strings: vec![GPU_SAMPLED_SINCE_LABEL.into(), GPU_BUSY_LABEL.into()],
            ..Default::default()
        };
        let run = vec![
            running(&mut ctx, 1, JobKind::Interactive, Some(2)),
            running(&mut ctx, 2, JobKind::Interactive, Some(60)),
            running(&mut ctx, 3, JobKind::Interactive, None),
            running(&mut ctx, 4, JobKind::Batch, Some(0)),
        ];
        let blocked: HashSet<JobId> = [9].into();
        let none = HashSet::new();
        assert!(validate_evictions(&ctx, &[evict(1)], &run, &none, &blocked).is_ok());
        for busy_unmeasured_or_batch in [2, 3, 4] {
            let v = validate_evictions(
                &ctx,
                &[evict(busy_unmeasured_or_batch)],
                &run,
                &none,
                &blocked,
            );
            assert_eq!(
                v,
                Err(vec![PlanViolation::NotPreemptible(
                    busy_unmeasured_or_batch
                )])
            );
        }
    }
}
