//! `quota`: Kueue-style ClusterQueue admission. Each configured queue has a nominal
//! GPU quota, in total or per GPU model ("flavors"); queues of a cohort lend each
//! other unused nominal quota of the same flavor (up to a lending limit) and borrow up
//! to a borrowing limit. A pending job is admitted when it fits its queue's (or its
//! flavor's) unused nominal quota, or what the cohort can lend within the borrowing
//! limit; otherwise it is held with a message naming the quota and numbers.
//!
//! In a queue with flavors a GPU job is charged to the flavor of the one GPU model all
//! its GPU tasks are restricted to; other GPU jobs of such a queue are rejected at
//! submit (and held, should one reach a cycle). Jobs without GPUs are always admitted.
//!
//! Each cycle: pass 1 admits, in the order given (submit order), every job that fits
//! its account's nominal quota; pass 2 then considers the rest, in the same order, as
//! borrowers. A borrower is held while the same flavor (or the totals) of another
//! queue of its cohort had a job admitted in pass 1 (that queue is below nominal with
//! pending work: it is served first). What a pass admits counts against quota for
//! every later job of the call. Use comes from `ctx.queues` (GPUs held by running
//! jobs, per model for flavors); admission never sees running jobs.
//!
//! At submit, a job larger than its account could ever hold (nominal + what it could
//! borrow) is rejected. The arithmetic lives in `gantry-quota-core`, shared with
//! `reclaim`. Config and semantics: `README.md`.
//!
//! Owns: the two passes, verdicts and submit checks. Does not own the arithmetic,
//! which flavor a job is charged to, or wording (`gantry-quota-core`), nor evictions
//! (`reclaim`).
#![deny(missing_docs)]

use gantry_quota_core::message::{describe, label, never_fits, peer_first};
use gantry_quota_core::{Charge, Outcome, Quotas, Unlisted, job_charge, ledger_from_cycle};
use gantry_sdk::cluster::fmt_gpus;
use gantry_sdk::{
    Admission, Cycle, Job, LogLevel, Metadata, Plugin, Reason, ReasonCode, Stage, SubmitVerdict,
    Verdict,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The plugin's config as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    queues: BTreeMap<String, serde_json::Value>,
    unlisted: Unlisted,
}

/// Kueue-style quota admission.
#[derive(Debug, Default)]
pub struct Quota {
    quotas: Quotas,
    unlisted: Unlisted,
}

/// Most borrowing admissions named in the one log line of a call.
const LOGGED_BORROWERS: usize = 10;

impl Plugin for Quota {
    fn metadata(&self) -> Metadata {
        gantry_sdk::metadata(
            "quota",
            env!("CARGO_PKG_VERSION"),
            &[Stage::Admission],
            r#"{"queues": {"<queue>": {"nominal_gpus": number (required unless flavors), "borrowing_limit_gpus": number|null (default null: no limit), "lending_limit_gpus": number|null (default null: all unused nominal), "cohort": string|null (default null: no borrowing or lending), "flavors": {"<gpu model>": {"nominal_gpus": number (required), "borrowing_limit_gpus": number|null, "lending_limit_gpus": number|null}} (instead of the queue-level nominal_gpus and limits; default none: totals over all models)}}, "unlisted": "admit"|"hold"|"reject" (default "admit")}; GPUs, fractions rounded to milli"#,
        )
    }

    fn configure(&mut self, config_json: &str) -> Result<(), String> {
        let raw: RawConfig = gantry_sdk::parse_config(config_json)?;
        self.quotas = Quotas::from_map(&raw.queues).map_err(|e| e.to_string())?;
        self.unlisted = raw.unlisted;
        Ok(())
    }
}

impl Quota {
    fn unlisted_verdict(&self, name: &str) -> Verdict {
        match self.unlisted {
            Unlisted::Admit => Verdict::Admit,
            other => Verdict::Hold(Reason::new(
                ReasonCode::HeldByPolicy,
                format!(
                    "queue {name} has no quota configured and unlisted queues are held (config `unlisted`: \"{}\")",
                    other.as_str()
                ),
            )),
        }
    }
}

fn hold(message: String) -> Option<Verdict> {
    Some(Verdict::Hold(Reason::new(
        ReasonCode::HeldByPolicy,
        message,
    )))
}

/// What one pending job is, for this call.
enum Slot {
    /// Its verdict is settled (unlisted, no GPU, or not pinned to one flavor).
    Settled(Verdict),
    /// Its GPUs count against this account.
    Account(usize),
}

impl Admission for Quota {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, String> {
        let name = ctx.text(job.queue);
        Ok(match job_charge(&self.quotas, ctx, job) {
            Charge::Unlisted if self.unlisted == Unlisted::Reject => {
                SubmitVerdict::Reject(format!(
                    "queue {name} has no quota configured and unlisted queues are rejected (config `unlisted`: \"reject\")"
                ))
            }
            Charge::Unlisted | Charge::Free => SubmitVerdict::Accept,
            Charge::Unpinned(u) => SubmitVerdict::Reject(u.to_string()),
            Charge::Account(a) if job.gpu_milli_total() > self.quotas.max_ever_milli(a) => {
                SubmitVerdict::Reject(never_fits(&self.quotas, a, job.gpu_milli_total()))
            }
            Charge::Account(_) => SubmitVerdict::Accept,
        })
    }

    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, String> {
        let quotas = &self.quotas;
        let mut ledger = ledger_from_cycle(quotas, ctx);
        let slots: Vec<Slot> = jobs
            .iter()
            .map(|j| match job_charge(quotas, ctx, j) {
                Charge::Unlisted => Slot::Settled(self.unlisted_verdict(ctx.text(j.queue))),
                Charge::Free => Slot::Settled(Verdict::Admit),
                Charge::Unpinned(u) => Slot::Settled(Verdict::Hold(Reason::new(
                    ReasonCode::HeldByPolicy,
                    u.to_string(),
                ))),
                Charge::Account(a) => Slot::Account(a),
            })
            .collect();
        let mut verdicts: Vec<Option<Verdict>> = vec![None; jobs.len()];
        // Pass 1: jobs that fit their account's nominal quota, in order.
        let mut nominal_jobs = vec![0usize; quotas.account_count()];
        for ((job, slot), verdict) in jobs.iter().zip(&slots).zip(verdicts.iter_mut()) {
            let need = job.gpu_milli_total();
            match *slot {
                Slot::Settled(ref v) => *verdict = Some(v.clone()),
                Slot::Account(a) if ledger.assess(a, need).outcome == Outcome::WithinNominal => {
                    ledger.reserve(a, need);
                    nominal_jobs[a] += 1;
                    *verdict = Some(Verdict::Admit);
                }
                Slot::Account(_) => {}
            }
        }
        // Pass 2: the rest would borrow; accounts below nominal with pending work first.
        let mut borrowers: Vec<String> = Vec::new();
        for ((job, slot), verdict) in jobs.iter().zip(&slots).zip(verdicts.iter_mut()) {
            let (None, &Slot::Account(a)) = (verdict.as_ref(), slot) else {
                continue;
            };
            let need = job.gpu_milli_total();
            let x = ledger.assess(a, need);
            let peer = quotas.cohort_peers(a).find(|&p| nominal_jobs[p] > 0);
            *verdict = match (x.fits(), peer) {
                (false, _) => hold(describe(quotas, &x)),
                (true, Some(p)) => hold(peer_first(&ledger, &x, p, nominal_jobs[p])),
                (true, None) => {
                    ledger.reserve(a, need);
                    if borrowers.len() < LOGGED_BORROWERS {
                        borrowers.push(format!(
                            "job {} ({} GPUs, {} borrows {} after it)",
                            job.id,
                            fmt_gpus(need),
                            label(quotas, a),
                            fmt_gpus(ledger.borrowed(a))
                        ));
                    }
                    Some(Verdict::Admit)
                }
            };
        }
        if !borrowers.is_empty() {
            gantry_sdk::log(
                LogLevel::Debug,
                &format!("admitted on borrowed quota: {}", borrowers.join(", ")),
            );
        }
        Ok(verdicts
            .into_iter()
            .map(|v| v.unwrap_or(Verdict::Admit))
            .collect())
    }
}

gantry_sdk::export_plugin!(Quota, stages: [admission]);

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_flavors;
