//! What the running jobs hold per quota account, read from their allocations, and
//! what this cycle's starts took (allocated on the nodes but held by no running job).
//!
//! A running job of a queue with totals is charged all the GPUs it holds; one of a
//! flavored queue is charged, per GPU share, to the flavor of that GPU's model (the
//! model comes from the node the share is on; a model that is not a flavor of the
//! queue is not counted). This cycle's starts are not in `running`, so the plugin
//! only sees the GPUs they took: in total, and per model.
//!
//! Owns: those two readings. Does not own the quota arithmetic (`gantry-quota-core`)
//! or who may be evicted (`candidates`).

use gantry_quota_core::{Ledger, Quotas};
use gantry_sdk::{Cycle, MILLI_PER_GPU, Node, NodeId, RunningJob, Symbol};
use std::collections::{BTreeMap, HashMap};

/// Milli-GPU a running job holds.
pub(crate) fn held(r: &RunningJob) -> u64 {
    r.tasks
        .iter()
        .flat_map(|t| &t.gpus)
        .map(|s| u64::from(s.milli))
        .sum()
}

/// Use of the running jobs per account, and this cycle's starts.
#[derive(Debug)]
pub(crate) struct Usage {
    /// Per running job, same order as `running`: (account, milli) it holds.
    pub charges: Vec<Vec<(usize, u64)>>,
    /// GPUs this cycle's starts took, all models.
    unseen_total: u64,
    /// GPUs this cycle's starts took per GPU model name.
    unseen_by_model: BTreeMap<String, u64>,
}

impl Usage {
    /// Reads `running` and `nodes` (as they are after this cycle's starts).
    pub fn new(quotas: &Quotas, ctx: &Cycle, nodes: &[Node], running: &[RunningJob]) -> Self {
        let by_id: HashMap<NodeId, &Node> = nodes.iter().map(|n| (n.id, n)).collect();
        let model_of = |node: NodeId, index: u32| -> Option<Symbol> {
            by_id
                .get(&node)
                .and_then(|n| n.gpus.iter().find(|g| g.index == index))
                .map(|g| g.model)
        };
        let mut held_by_model: BTreeMap<String, u64> = BTreeMap::new();
        let mut charges = Vec::with_capacity(running.len());
        for r in running {
            let mut mine: Vec<(usize, u64)> = Vec::new();
            let q = quotas.index(ctx.text(r.job.queue));
            if let Some(a) = q.and_then(|q| quotas.totals_account(q)) {
                mine.push((a, held(r)));
            }
            for t in &r.tasks {
                for s in &t.gpus {
                    let Some(model) = model_of(t.node, s.index).map(|m| ctx.text(m)) else {
                        continue;
                    };
                    *held_by_model.entry(model.to_string()).or_default() += u64::from(s.milli);
                    let Some(a) = q.and_then(|q| quotas.flavor_account(q, model)) else {
                        continue;
                    };
                    match mine.iter_mut().find(|(x, _)| *x == a) {
                        Some((_, m)) => *m += u64::from(s.milli),
                        None => mine.push((a, u64::from(s.milli))),
                    }
                }
            }
            charges.push(mine);
        }
        let mut allocated_by_model: BTreeMap<String, u64> = BTreeMap::new();
        for g in nodes.iter().flat_map(|n| &n.gpus).filter(|g| g.healthy) {
            *allocated_by_model
                .entry(ctx.text(g.model).to_string())
                .or_default() += u64::from(MILLI_PER_GPU.saturating_sub(g.free_milli));
        }
        let allocated: u64 = allocated_by_model.values().sum();
        let unseen_by_model = allocated_by_model
            .into_iter()
            .map(|(m, a)| {
                let h = held_by_model.get(&m).copied().unwrap_or(0);
                (m, a.saturating_sub(h))
            })
            .collect();
        Self {
            charges,
            unseen_total: allocated.saturating_sub(running.iter().map(held).sum()),
            unseen_by_model,
        }
    }

    /// A ledger charged with what the running jobs hold.
    pub fn ledger<'a>(&self, quotas: &'a Quotas) -> Ledger<'a> {
        let mut ledger = Ledger::new(quotas);
        for &(a, milli) in self.charges.iter().flatten() {
            ledger.add(a, milli);
        }
        ledger
    }

    /// GPUs this cycle's starts took that may count against `account`: all of them
    /// for totals, those of the flavor's model for a flavor.
    pub fn unseen(&self, quotas: &Quotas, account: usize) -> u64 {
        match quotas.account(account).and_then(|a| a.flavor.as_deref()) {
            None => self.unseen_total,
            Some(model) => self.unseen_by_model.get(model).copied().unwrap_or(0),
        }
    }
}
