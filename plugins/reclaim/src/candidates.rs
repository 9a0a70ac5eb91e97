//! Who may be evicted for a blocked job charged to account `a` (its queue's totals or
//! one flavor), in which order, and the eviction reason with numbers.
//!
//! Candidates are preemptible running jobs, not already chosen this call, of the
//! same account kind (totals, or the same flavor) as `a`: of the other queues of the
//! cohort (subject to `reclaim_within_cohort`), then of the job's own queue (only
//! with `within_cluster_queue: "lower_priority"`, lower priority only). For a flavor,
//! only jobs holding GPUs of that model are candidates. Order: other queues first,
//! then lowest tier, lowest score (the one it started with), most recently started,
//! highest id.
//!
//! Owns: that filter and order, and the reason text. Does not own which candidates
//! become victims (`select`) or the quota check of the blocked job (`lib`).

use crate::select::Candidate;
use crate::usage::Usage;
use crate::{Reclaim, WithinCohort, WithinQueue};
use gantry_quota_core::Ledger;
use gantry_quota_core::message::label;
use gantry_sdk::cluster::fmt_gpus;
use gantry_sdk::{Cycle, Job, JobId, Reason, ReasonCode, RunningJob};
use std::cmp::Ordering;
use std::collections::HashSet;

/// Whether priority `a` is strictly below `b`: tier first, then score.
fn lower(a: (i32, f64), b: (i32, f64)) -> bool {
    match a.0.cmp(&b.0) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a.1 < b.1,
    }
}

impl Reclaim {
    /// Candidates for `job` (priority `score`) charged to account `a`.
    pub(crate) fn candidates<'a>(
        &self,
        ctx: &Cycle,
        (running, usage): (&'a [RunningJob], &'a Usage),
        taken: &HashSet<JobId>,
        (job, score, a): (&Job, f64, usize),
    ) -> Vec<Candidate<'a>> {
        let quotas = &self.quotas;
        let Some(account) = quotas.account(a) else {
            return Vec::new();
        };
        let flavored = account.flavor.is_some();
        let peers: HashSet<usize> = quotas.cohort_peers(a).collect();
        let mut out: Vec<Candidate<'a>> = running
            .iter()
            .zip(&usage.charges)
            .filter(|(r, _)| r.job.preemptible && !taken.contains(&r.job.id))
            .filter_map(|(r, charges)| {
                let rq = quotas.index(ctx.text(r.job.queue))?;
                let p = quotas.counterpart(a, rq)?;
                let milli: u64 = charges
                    .iter()
                    .filter(|(x, _)| *x == p)
                    .map(|(_, m)| m)
                    .sum();
                if flavored && milli == 0 {
                    return None;
                }
                let below = lower((r.job.tier, r.score), (job.tier, score));
                let own = rq == account.queue;
                let ok = if own {
                    self.within_queue == WithinQueue::LowerPriority && below
                } else {
                    peers.contains(&p)
                        && match self.within_cohort {
                            WithinCohort::Any => true,
                            WithinCohort::LowerPriority => below,
                            WithinCohort::Never => false,
                        }
                };
                ok.then_some(Candidate {
                    run: r,
                    account: p,
                    milli,
                    own,
                    charges,
                })
            })
            .collect();
        out.sort_by(|a, b| {
            a.own
                .cmp(&b.own)
                .then(a.run.job.tier.cmp(&b.run.job.tier))
                .then(a.run.score.total_cmp(&b.run.score))
                .then(b.run.start_ms.cmp(&a.run.start_ms))
                .then(b.run.job.id.cmp(&a.run.job.id))
        });
        out
    }

    /// Why `v` is evicted for `job` of account `a`, which holds `after` once started.
    pub(crate) fn reason(
        &self,
        ledger: &Ledger<'_>,
        job: &Job,
        a: usize,
        after: u64,
        v: &Candidate<'_>,
    ) -> Reason {
        let quotas = &self.quotas;
        let nominal = |i: usize| quotas.account(i).map_or(0, |x| x.nominal_milli);
        let message = if v.own {
            format!(
                "preempted by job {} of the same {}, which has higher priority (tier {}) and fits its nominal quota ({} of {} GPUs after it starts)",
                job.id,
                label(quotas, a),
                job.tier,
                fmt_gpus(after),
                fmt_gpus(nominal(a)),
            )
        } else {
            format!(
                "reclaiming quota for job {} of {} ({} of {} GPUs nominal after it starts): {} of cohort {} uses {} GPUs, {} above its nominal {}",
                job.id,
                label(quotas, a),
                fmt_gpus(after),
                fmt_gpus(nominal(a)),
                label(quotas, v.account),
                quotas.cohort_of(a).unwrap_or(""),
                fmt_gpus(ledger.used(v.account)),
                fmt_gpus(ledger.borrowed(v.account)),
                fmt_gpus(nominal(v.account)),
            )
        };
        Reason::new(ReasonCode::Preempted, message)
    }
}
