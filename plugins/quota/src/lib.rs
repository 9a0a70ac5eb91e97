//! `quota`: Kueue-style ClusterQueue admission. Each configured queue has a nominal
//! GPU quota; queues of a cohort lend each other unused nominal quota (up to a lending
//! limit) and borrow up to a borrowing limit. A pending job is admitted when it fits
//! its queue's unused nominal quota, or what the cohort can lend within the queue's
//! borrowing limit; otherwise it is held with a message naming the quota and numbers.
//!
//! Each cycle: pass 1 admits, in the order given (submit order), every job that fits
//! its queue's nominal quota; pass 2 then considers the rest, in the same order, as
//! borrowers. A borrower is held while another queue of its cohort had a job admitted
//! in pass 1 (that queue is below nominal with pending work: it is served first).
//! What a pass admits counts against quota for every later job of the call. Use comes
//! from `ctx.queues` (GPUs held by running jobs); admission never sees running jobs.
//!
//! At submit, a job larger than its queue could ever hold (nominal + what it could
//! borrow) is rejected. The arithmetic lives in `gantry-quota-core`, shared with
//! `reclaim`. Config and semantics: `README.md`.
//!
//! Owns: the two passes, verdicts and submit checks. Does not own the arithmetic or
//! wording (`gantry-quota-core`), nor evictions (`reclaim`).
#![deny(missing_docs)]

use gantry_quota_core::message::{describe, never_fits, peer_first};
use gantry_quota_core::{Ledger, Outcome, Quotas, Unlisted};
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
            r#"{"queues": {"<queue>": {"nominal_gpus": number (required), "borrowing_limit_gpus": number|null (default null: no limit), "lending_limit_gpus": number|null (default null: all unused nominal), "cohort": string|null (default null: no borrowing or lending)}}, "unlisted": "admit"|"hold"|"reject" (default "admit")}; GPUs, fractions rounded to milli"#,
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

impl Admission for Quota {
    fn check_submit(&mut self, ctx: &Cycle, job: &Job) -> Result<SubmitVerdict, String> {
        let name = ctx.text(job.queue);
        Ok(match self.quotas.index(name) {
            None if self.unlisted == Unlisted::Reject => SubmitVerdict::Reject(format!(
                "queue {name} has no quota configured and unlisted queues are rejected (config `unlisted`: \"reject\")"
            )),
            None => SubmitVerdict::Accept,
            Some(q) if job.gpu_milli_total() > self.quotas.max_ever_milli(q) => {
                SubmitVerdict::Reject(never_fits(&self.quotas, q, job.gpu_milli_total()))
            }
            Some(_) => SubmitVerdict::Accept,
        })
    }

    fn admit(&mut self, ctx: &Cycle, jobs: &[Job]) -> Result<Vec<Verdict>, String> {
        let quotas = &self.quotas;
        let mut ledger = Ledger::new(quotas);
        for q in &ctx.queues {
            ledger.add_named(ctx.text(q.queue), q.gpu_milli_used);
        }
        let index: Vec<Option<usize>> = jobs
            .iter()
            .map(|j| quotas.index(ctx.text(j.queue)))
            .collect();
        let mut verdicts: Vec<Option<Verdict>> = vec![None; jobs.len()];
        // Pass 1: jobs that fit their queue's nominal quota, in order.
        let mut nominal_jobs = vec![0usize; quotas.len()];
        for ((job, idx), verdict) in jobs.iter().zip(&index).zip(verdicts.iter_mut()) {
            let need = job.gpu_milli_total();
            match *idx {
                None => *verdict = Some(self.unlisted_verdict(ctx.text(job.queue))),
                Some(q)
                    if need == 0 || ledger.assess(q, need).outcome == Outcome::WithinNominal =>
                {
                    ledger.reserve(q, need);
                    nominal_jobs[q] += 1;
                    *verdict = Some(Verdict::Admit);
                }
                Some(_) => {}
            }
        }
        // Pass 2: the rest would borrow; queues below nominal with pending work first.
        let mut borrowers: Vec<String> = Vec::new();
        for ((job, idx), verdict) in jobs.iter().zip(&index).zip(verdicts.iter_mut()) {
            let (None, Some(q)) = (verdict.as_ref(), *idx) else {
                continue;
            };
            let need = job.gpu_milli_total();
            let a = ledger.assess(q, need);
            let peer = quotas.cohort_peers(q).find(|&p| nominal_jobs[p] > 0);
            *verdict = match (a.fits(), peer) {
                (false, _) => hold(describe(quotas, &a)),
                (true, Some(p)) => hold(peer_first(&ledger, &a, p, nominal_jobs[p])),
                (true, None) => {
                    ledger.reserve(q, need);
                    if borrowers.len() < LOGGED_BORROWERS {
                        borrowers.push(format!(
                            "job {} ({} GPUs, queue {} borrows {} after it)",
                            job.id,
                            fmt_gpus(need),
                            ctx.text(job.queue),
                            fmt_gpus(ledger.borrowed(q))
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
