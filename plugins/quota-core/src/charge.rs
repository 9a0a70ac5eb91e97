//! Which quota account a job, or a queue's use, is charged to.
//!
//! A queue with totals charges everything to its one account. A queue with flavors
//! charges a job to the flavor of the one GPU model it is restricted to: admission
//! cannot steer placement, so a job is only charged to a flavor when every GPU task
//! of it allows exactly that model (the same one for all tasks) and the model is a
//! flavor of the queue. Other GPU jobs of a flavored queue are [`Charge::Unpinned`];
//! jobs without GPUs are [`Charge::Free`]. A flavored queue's use comes per model
//! from `QueueStatus::gpu_milli_used_by_model` (entries past the end of a shorter
//! list count as 0; use on a model that is not a flavor of the queue is not counted).
//!
//! Owns: that mapping. Does not own the arithmetic (`ledger`) or what the plugins do
//! with an unpinned job (reject at submit, hold in a cycle, skip in reclaim).

use crate::ledger::Ledger;
use crate::quotas::Quotas;
use gantry_sdk::{Cycle, Job, QueueStatus};

/// Where a job's GPUs are charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Charge {
    /// Its queue is not configured.
    Unlisted,
    /// It needs no GPU: under no quota.
    Free,
    /// The account (queue totals or one flavor) its GPUs count against.
    Account(usize),
    /// A GPU job of a flavored queue not restricted to exactly one of its flavors.
    Unpinned(Unpinned),
}

/// Why a job of a flavored queue cannot be charged to one flavor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpinned {
    /// The queue.
    pub queue: String,
    /// Its flavors (GPU models), in name order.
    pub flavors: Vec<String>,
    /// What the job asks for, in words ("allows any model", ...).
    pub asked: String,
}

impl std::fmt::Display for Unpinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "queue {} has quotas per GPU model ({}); ask for one of them with gpu_models ({})",
            self.queue,
            self.flavors.join(", "),
            self.asked
        )
    }
}

impl std::error::Error for Unpinned {}

/// The account `job` is charged to.
pub fn job_charge(quotas: &Quotas, ctx: &Cycle, job: &Job) -> Charge {
    let Some(q) = quotas.index(ctx.text(job.queue)) else {
        return Charge::Unlisted;
    };
    if job.gpu_milli_total() == 0 {
        return Charge::Free;
    }
    if let Some(a) = quotas.totals_account(q) {
        return Charge::Account(a);
    }
    let unpinned = |asked: String| {
        Charge::Unpinned(Unpinned {
            queue: ctx.text(job.queue).to_string(),
            flavors: quotas
                .flavor_names(q)
                .into_iter()
                .map(String::from)
                .collect(),
            asked,
        })
    };
    let groups = job.tasks.iter().filter(|t| t.gpu_milli_per_task() > 0);
    if groups.clone().any(|t| t.gpu_model_mask == 0) {
        return unpinned("the job allows any model".into());
    }
    let mask = groups.fold(0u64, |m, t| m | t.gpu_model_mask);
    let names: Vec<&str> = (0..64usize)
        .filter(|i| mask & (1u64 << i) != 0)
        .map(|i| {
            ctx.gpu_models
                .get(i)
                .map_or("a model the cluster does not have", |&m| ctx.text(m))
        })
        .collect();
    match names.as_slice() {
        [one] => match ctx.gpu_models.get(mask.trailing_zeros() as usize) {
            Some(&m) => match quotas.flavor_account(q, ctx.text(m)) {
                Some(a) => Charge::Account(a),
                None => unpinned(format!("the job asks for {one}, which is not one of them")),
            },
            None => unpinned("the job asks for a model the cluster does not have".into()),
        },
        _ => unpinned(format!(
            "the job allows {}; all its GPU tasks must ask for the same single model",
            names.join("|")
        )),
    }
}

/// Adds one queue's use (from the cycle's queue status) to its accounts.
pub fn add_queue_status(ledger: &mut Ledger<'_>, ctx: &Cycle, status: &QueueStatus) {
    let quotas = ledger.quotas();
    let Some(q) = quotas.index(ctx.text(status.queue)) else {
        return;
    };
    if let Some(a) = quotas.totals_account(q) {
        ledger.add(a, status.gpu_milli_used);
        return;
    }
    for (&model, &milli) in ctx.gpu_models.iter().zip(&status.gpu_milli_used_by_model) {
        if let Some(a) = quotas.flavor_account(q, ctx.text(model)) {
            ledger.add(a, milli);
        }
    }
}

/// A ledger with the use of every configured queue of the cycle.
pub fn ledger_from_cycle<'a>(quotas: &'a Quotas, ctx: &Cycle) -> Ledger<'a> {
    let mut ledger = Ledger::new(quotas);
    for status in &ctx.queues {
        add_queue_status(&mut ledger, ctx, status);
    }
    ledger
}
