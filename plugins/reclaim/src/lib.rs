//! `reclaim`: Kueue-style quota reclaim. When a blocked job's quota account (its
//! queue's totals, or for a queue with flavors the flavor of the one GPU model the
//! job asks for) is below nominal and stays within it once the job starts, evict the
//! fewest running jobs of the other queues of its cohort whose same account is above
//! its nominal quota (borrowers of that flavor: for a flavor, only jobs holding GPUs
//! of that model) so that the job's whole gang fits: lowest priority (tier, then the
//! score it started with) and most recently started first. Optionally lower-priority
//! jobs of the same queue and account too (`within_cluster_queue`).
//!
//! Every blocked job shown (priority order) is served in turn: its victims are
//! released and the job booked in a tentative `ClusterModel`, and the quota ledger
//! updated, before the next blocked job is considered, so a victim is taken once and
//! a borrower is never cut below its nominal quota by more than one victim's size.
//! Jobs this cycle's placement started are not in `running`; the plugin counts the
//! GPUs they hold (seen on the nodes; per model for a flavor) as if they all belonged
//! to the account it reclaims for, so it never evicts for a job that would in fact
//! borrow.
//!
//! Config: the same `queues` map as `quota` (schema in `gantry-quota-core`), plus
//! `reclaim_within_cohort`, `within_cluster_queue` and `grace_s`. See `README.md`.
//!
//! Owns: the config and the quota check of the blocked job. Does not own who is a
//! candidate (`candidates`), the search among candidates (`select`), use per account
//! (`usage`) or quota arithmetic (`gantry-quota-core`).
#![deny(missing_docs)]

mod candidates;
mod select;
mod usage;

use gantry_quota_core::{Charge, Quotas, Unlisted, job_charge};
use gantry_sdk::{
    ClusterModel, Cycle, Eviction, Job, JobId, Metadata, Node, Plugin, Preemption, RunningJob,
    Stage,
};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use usage::Usage;

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
            r#"{"queues": {same map as the quota plugin, with queue totals or flavors per GPU model}, "unlisted": ignored, "reclaim_within_cohort": "any"|"lower_priority"|"never" (default "any"), "within_cluster_queue": "never"|"lower_priority" (default "never"), "grace_s": u32 seconds (default 60)}"#,
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
        let usage = Usage::new(&self.quotas, ctx, nodes, running);
        let mut ledger = usage.ledger(&self.quotas);
        let mut model = ClusterModel::new(ctx, nodes);
        let mut taken: HashSet<JobId> = HashSet::new();
        let mut out: Vec<Eviction> = Vec::new();
        for (job, &score) in blocked.iter().zip(blocked_scores) {
            // Unlisted queues, jobs without GPUs and unpinned jobs are not served.
            let Charge::Account(a) = job_charge(&self.quotas, ctx, job) else {
                continue;
            };
            let need = job.gpu_milli_total();
            // It fits already (it waits behind another job): keep its room.
            let mut trial = model.clone();
            if trial.fit_gang(ctx, job).is_ok() {
                model = trial;
                ledger.add(a, need);
                continue;
            }
            let nominal = self.quotas.account(a).map_or(0, |x| x.nominal_milli);
            let cands = self.candidates(ctx, (running, &usage), &taken, (job, score, a));
            let own_max: u64 = cands.iter().filter(|c| c.own).map(|c| c.milli).sum();
            let before = ledger.used(a) + usage.unseen(&self.quotas, a);
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
                    reason: self.reason(&ledger, job, a, after, v),
                    grace_s: self.grace_s,
                    warn_s: 0,
                });
            }
            for v in &victims {
                for t in &v.run.tasks {
                    model.release(t);
                }
                for &(x, milli) in v.charges {
                    ledger.sub(x, milli);
                }
                taken.insert(v.run.job.id);
            }
            if model.fit_gang(ctx, job).is_err() {
                return Err(format!(
                    "job {} does not fit after its victims were released",
                    job.id
                ));
            }
            ledger.add(a, need);
        }
        Ok(out)
    }
}

gantry_sdk::export_plugin!(Reclaim, stages: [preemption]);

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_flavors;
