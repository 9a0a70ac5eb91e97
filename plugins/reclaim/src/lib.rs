//! `reclaim`: Kueue-style quota reclaim. When a blocked job's queue is below its
//! nominal quota (and stays within it once the job starts), evict the fewest running
//! jobs of the queues of its cohort that use more than their nominal quota
//! (borrowers) so that the job's whole gang fits: lowest priority (tier, then the
//! score it started with) and most recently started first. Optionally lower-priority
//! jobs of the same queue too (`within_cluster_queue`).
//!
//! Every blocked job shown (priority order) is served in turn: its victims are
//! released and the job booked in a tentative `ClusterModel`, and the quota ledger
//! updated, before the next blocked job is considered, so a victim is taken once and
//! a borrower is never cut below its nominal quota by more than one victim's size.
//! Jobs this cycle's placement started are not in `running`; the plugin counts the
//! GPUs they hold (seen on the nodes) as if they all belonged to the queue it
//! reclaims for, so it never evicts for a job that would in fact borrow.
//!
//! Config: the same `queues` map as `quota` (schema in `gantry-quota-core`), plus
//! `reclaim_within_cohort`, `within_cluster_queue` and `grace_s`. See `README.md`.
//!
//! Owns: who is a candidate, the quota check of the blocked job, eviction reasons.
//! Does not own the search among candidates (`select`) or quota arithmetic.
#![deny(missing_docs)]

mod select;

use gantry_quota_core::{Ledger, Quotas, Unlisted};
use gantry_sdk::cluster::fmt_gpus;
use gantry_sdk::{
    ClusterModel, Cycle, Eviction, Job, JobId, MILLI_PER_GPU, Metadata, Node, Plugin, Preemption,
    Reason, ReasonCode, RunningJob, Stage,
};
use select::Candidate;
use serde::Deserialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

/// Which borrowers of the cohort may be evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
enum WithinCohort {
    /// Any borrower's job (the default).
    #[default]
    Any,
    /// Only jobs of lower priority than the blocked job.
    LowerPriority,
    /// None (only `within_cluster_queue` applies).
    Never,
}

/// Whether jobs of the blocked job's own queue may be evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
enum WithinQueue {
    /// Never (the default).
    #[default]
    Never,
    /// Jobs of lower priority than the blocked job.
    LowerPriority,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    queues: BTreeMap<String, serde_json::Value>,
    /// Accepted so one quota object can configure both plugins; no effect here.
    unlisted: Unlisted,
    reclaim_within_cohort: WithinCohort,
    within_cluster_queue: WithinQueue,
    grace_s: u32,
}

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            queues: BTreeMap::new(),
            unlisted: Unlisted::default(),
            reclaim_within_cohort: WithinCohort::default(),
            within_cluster_queue: WithinQueue::default(),
            grace_s: 60,
        }
    }
}

/// Quota reclaim.
#[derive(Debug)]
pub struct Reclaim {
    quotas: Quotas,
    within_cohort: WithinCohort,
    within_queue: WithinQueue,
    grace_s: u32,
}

impl Default for Reclaim {
    fn default() -> Self {
        let raw = RawConfig::default();
        Self {
            quotas: Quotas::default(),
            within_cohort: raw.reclaim_within_cohort,
            within_queue: raw.within_cluster_queue,
            grace_s: raw.grace_s,
        }
    }
}

impl Plugin for Reclaim {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "reclaim",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Preemption],
            r#"{"queues": {same map as the quota plugin}, "unlisted": ignored, "reclaim_within_cohort": "any"|"lower_priority"|"never" (default "any"), "within_cluster_queue": "never"|"lower_priority" (default "never"), "grace_s": u32 seconds (default 60)}"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let raw: RawConfig = gantry_sdk::parse_config(config_json)?;
        self.quotas = Quotas::from_map(&raw.queues).map_err(|e| e.to_string())?;
        self.within_cohort = raw.reclaim_within_cohort;
        self.within_queue = raw.within_cluster_queue;
        self.grace_s = raw.grace_s;
        Ok(())
    }
}

/// Milli-GPU a running job holds.
fn held(r: &RunningJob) -> u64 {
    r.tasks
        .iter()
        .flat_map(|t| &t.gpus)
        .map(|s| u64::from(s.milli))
        .sum()
}

/// GPUs allocated on healthy GPUs of `nodes` but held by no job of `running`: what
/// this cycle's starts took (the host shows preemption the nodes after them).
fn started_this_cycle(nodes: &[Node], running: &[RunningJob]) -> u64 {
    let allocated: u64 = nodes
        .iter()
        .flat_map(|n| &n.gpus)
        .filter(|g| g.healthy)
        .map(|g| u64::from(MILLI_PER_GPU.saturating_sub(g.free_milli)))
        .sum();
    allocated.saturating_sub(running.iter().map(held).sum())
}

/// Whether priority `a` is strictly below `b`: tier first, then score.
fn lower(a: (i32, f64), b: (i32, f64)) -> bool {
    match a.0.cmp(&b.0) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a.1 < b.1,
    }
}

impl Reclaim {
    /// Candidates for `job` of queue `q`: other queues' jobs of the cohort first, then
    /// its own queue's; lowest priority, then most recently started, first.
    fn candidates<'a>(
        &self,
        ctx: &Cycle,
        running: &'a [RunningJob],
        taken: &HashSet<JobId>,
        (job, score, q): (&Job, f64, usize),
    ) -> Vec<Candidate<'a>> {
        let peers: HashSet<usize> = self.quotas.cohort_peers(q).collect();
        let mut out: Vec<Candidate<'a>> = running
            .iter()
            .filter(|r| r.job.preemptible && !taken.contains(&r.job.id))
            .filter_map(|r| {
                let p = self.quotas.index(ctx.text(r.job.queue))?;
                let below = lower((r.job.tier, r.score), (job.tier, score));
                let ok = if p == q {
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
                    queue: p,
                    milli: held(r),
                    own: p == q,
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

    fn reason(
        &self,
        ledger: &Ledger<'_>,
        job: &Job,
        q: usize,
        after: u64,
        v: &Candidate<'_>,
    ) -> Reason {
        let name = |i: usize| self.quotas.queue(i).map_or("?", |x| x.name.as_str());
        let nominal = |i: usize| self.quotas.queue(i).map_or(0, |x| x.nominal_milli);
        let message = if v.own {
            format!(
                "preempted by job {} of the same queue {}, which has higher priority (tier {}) and fits its nominal quota ({} of {} GPUs after it starts)",
                job.id,
                name(q),
                job.tier,
                fmt_gpus(after),
                fmt_gpus(nominal(q)),
            )
        } else {
            let cohort = self
                .quotas
                .queue(q)
                .and_then(|x| x.cohort.as_deref())
                .unwrap_or("");
            format!(
                "reclaiming quota for job {} of queue {} ({} of {} GPUs nominal after it starts): queue {} of cohort {cohort} uses {} GPUs, {} above its nominal {}",
                job.id,
                name(q),
                fmt_gpus(after),
                fmt_gpus(nominal(q)),
                name(v.queue),
                fmt_gpus(ledger.used(v.queue)),
                fmt_gpus(ledger.borrowed(v.queue)),
                fmt_gpus(nominal(v.queue)),
            )
        };
        Reason::new(ReasonCode::Preempted, message)
    }
}

impl Preemption for Reclaim {
    fn preempt(
        &mut self,
        ctx: &Cycle,
        blocked: &[Job],
        blocked_scores: &[f64],
        nodes: &[Node],
        running: &[RunningJob],
    ) -> Result<Vec<Eviction>, String> {
        if self.quotas.is_empty() {
            return Ok(Vec::new());
        }
        let mut ledger = Ledger::new(&self.quotas);
        for r in running {
            ledger.add_named(ctx.text(r.job.queue), held(r));
        }
        let unseen = started_this_cycle(nodes, running);
        let mut model = ClusterModel::new(ctx, nodes);
        let mut taken: HashSet<JobId> = HashSet::new();
        let mut out: Vec<Eviction> = Vec::new();
        for (job, &score) in blocked.iter().zip(blocked_scores) {
            let need = job.gpu_milli_total();
            let Some(q) = self.quotas.index(ctx.text(job.queue)) else {
                continue;
            };
            if need == 0 {
                continue;
            }
            // It fits already (it waits behind another job): keep its room.
            let mut trial = model.clone();
            if trial.fit_gang(ctx, job).is_ok() {
                model = trial;
                ledger.add(q, need);
                continue;
            }
            let nominal = self.quotas.queue(q).map_or(0, |x| x.nominal_milli);
            let cands = self.candidates(ctx, running, &taken, (job, score, q));
            let own_max: u64 = cands.iter().filter(|c| c.own).map(|c| c.milli).sum();
            let before = ledger.used(q) + unseen;
            // Never for a job that would borrow, even with every own candidate gone.
            if before + need > nominal + own_max {
                continue;
            }
            let Some(victims) = select::choose(ctx, &model, &ledger, job, &cands) else {
                continue;
            };
            let own: u64 = victims.iter().filter(|v| v.own).map(|v| v.milli).sum();
            let after = (before + need).saturating_sub(own);
            if after > nominal {
                continue;
            }
            for v in &victims {
                out.push(Eviction {
                    job: v.run.job.id,
                    for_job: job.id,
                    reason: self.reason(&ledger, job, q, after, v),
                    grace_s: self.grace_s,
                });
            }
            for v in &victims {
                for a in &v.run.tasks {
                    model.release(a);
                }
                ledger.sub(v.queue, v.milli);
                taken.insert(v.run.job.id);
            }
            if model.fit_gang(ctx, job).is_err() {
                return Err(format!(
                    "job {} does not fit after its victims were released",
                    job.id
                ));
            }
            ledger.add(q, need);
        }
        Ok(out)
    }
}

gantry_sdk::export_plugin!(Reclaim, stages: [preemption]);

#[cfg(test)]
mod tests;
