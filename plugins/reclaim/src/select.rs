//! Victim search for one blocked job: the fewest candidates whose release lets the
//! job's whole gang fit (checked with `ClusterModel`), taking candidates in the order
//! given (lowest priority, most recently started first) and a victim of another queue
//! only while that queue's account (its totals, or the blocked job's flavor) is still
//! above its nominal quota.
//!
//! First a single victim is tried (the first candidate that alone frees enough);
//! otherwise candidates are added in order until the gang fits, then every victim
//! that is not needed is dropped again, highest priority first.
//!
//! Owns: which candidates become victims. Does not own who is a candidate
//! (`candidates`) or the quota check of the blocked job (`lib`).

use gantry_quota_core::Ledger;
use gantry_sdk::{ClusterModel, Cycle, Job, RunningJob};

/// A running job that may be evicted for the blocked job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    /// The running job.
    pub run: &'a RunningJob,
    /// Its queue's account of the blocked job's kind (totals or the same flavor).
    pub account: usize,
    /// GPUs it holds in that account, milli.
    pub milli: u64,
    /// Same queue as the blocked job (within-queue preemption).
    pub own: bool,
    /// Everything it holds, per account (released from the ledger when evicted).
    pub charges: &'a [(usize, u64)],
}

/// Whether `job` fits once `victims` are released from `model`.
fn fits(ctx: &Cycle, model: &ClusterModel, victims: &[Candidate<'_>], job: &Job) -> bool {
    let mut m = model.clone();
    for v in victims {
        for a in &v.run.tasks {
            m.release(a);
        }
    }
    m.fit_gang(ctx, job).is_ok()
}

/// A victim of another queue is allowed only while its account borrows.
fn allowed(ledger: &Ledger<'_>, c: &Candidate<'_>) -> bool {
    c.own || ledger.is_borrowing(c.account)
}

/// The victims for `job`, or `None` when no allowed set makes it fit.
pub(crate) fn choose<'a>(
    ctx: &Cycle,
    model: &ClusterModel,
    ledger: &Ledger<'_>,
    job: &Job,
    candidates: &[Candidate<'a>],
) -> Option<Vec<Candidate<'a>>> {
    if let Some(one) = candidates
        .iter()
        .find(|c| allowed(ledger, c) && fits(ctx, model, std::slice::from_ref(*c), job))
    {
        return Some(vec![*one]);
    }
    let mut tentative = ledger.clone();
    let mut picks: Vec<Candidate<'a>> = Vec::new();
    let mut fit = false;
    for c in candidates {
        if !allowed(&tentative, c) {
            continue;
        }
        picks.push(*c);
        tentative.sub(c.account, c.milli);
        if fits(ctx, model, &picks, job) {
            fit = true;
            break;
        }
    }
    if !fit {
        return None;
    }
    // Dropping a victim only raises its queue's use, so the others stay allowed.
    let mut i = picks.len();
    while i > 0 {
        i -= 1;
        let mut trial = picks.clone();
        trial.remove(i);
        if fits(ctx, model, &trial, job) {
            picks = trial;
        }
    }
    Some(picks)
}
