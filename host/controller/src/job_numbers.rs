//! Numbers the jobs of each cycle's snapshot (`Job::revision`, `RunningJob::revision`), so
//! that a contract-0.2 plugin's host keeps a job it already sent without comparing it
//! field by field (`gantry_contract::delta`).
//!
//! A job's contract view is made from its record, the snapshot's table of GPU models (the
//! bits of `gpu_model_mask`) and, for a running job, the numbers of the nodes it runs on.
//! The job table copies a record on write (`jobs_in_memory.rs`), so a record whose
//! allocation is the one converted last time is the same record: this module keeps a weak
//! pointer to each record it numbered (which keeps the allocation from being reused, and
//! makes the next write move the record elsewhere) and gives the job its previous number
//! when the allocation and the models and nodes are all as they were. Anything else gets a
//! new number; a running job without a start time (its view shows the cycle's time) none.
//!
//! Owns: that memory and the rule. Does not own the conversion (`snapshot.rs`), nor what
//! a plugin's host does with the numbers.

use gantry_api::model::JobRecord;
use gantry_contract::{NodeId, next_revision};
use gantry_engine::Snapshot;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// What each job was last numbered from.
#[derive(Debug, Default)]
pub(crate) struct JobNumbers {
    seen: HashMap<u64, Seen>,
    /// The models and nodes of the last snapshot numbered, and a number for them that
    /// changes whenever they do.
    context: Context,
    context_epoch: u64,
}

#[derive(Debug, Default, PartialEq)]
struct Context {
    models: Vec<String>,
    nodes: Vec<(NodeId, String)>,
}

#[derive(Debug)]
struct Seen {
    record: Weak<JobRecord>,
    context_epoch: u64,
    revision: u64,
}

impl JobNumbers {
    /// Numbers the pending and running jobs of `snap`, built from `records` (in id order,
    /// as the job table gives them) with the GPU model table `models` on `nodes`.
    pub(crate) fn number(
        &mut self,
        snap: &mut Snapshot,
        records: &[Arc<JobRecord>],
        models: &[String],
        nodes: &[(NodeId, &str)],
    ) {
        self.note_context(models, nodes);
        let epoch = self.context_epoch;
        let mut seen = HashMap::with_capacity(snap.pending.len() + snap.running.len());
        let record_of = |id: u64| {
            records
                .binary_search_by_key(&id, |r| r.id)
                .ok()
                .map(|at| &records[at])
        };
        let mut revision_of = |record: &Arc<JobRecord>, numbered: &mut HashMap<u64, Seen>| {
            let id = record.id;
            let revision = match self.seen.remove(&id) {
                Some(s)
                    if s.context_epoch == epoch
                        && std::ptr::eq(s.record.as_ptr(), Arc::as_ptr(record)) =>
                {
                    s.revision
                }
                _ => next_revision(),
            };
            numbered.insert(
                id,
                Seen {
                    record: Arc::downgrade(record),
                    context_epoch: epoch,
                    revision,
                },
            );
            revision
        };
        for job in &mut snap.pending {
            job.revision = record_of(job.id).map_or(0, |r| revision_of(r, &mut seen));
        }
        for run in &mut snap.running {
            if let Some(record) = record_of(run.job.id).filter(|r| r.start_ms.is_some()) {
                run.revision = revision_of(record, &mut seen);
                run.job.revision = run.revision;
            }
        }
        // Jobs no longer in a snapshot are forgotten (and their allocations let go).
        self.seen = seen;
    }

    fn note_context(&mut self, models: &[String], nodes: &[(NodeId, &str)]) {
        let same = self.context.models == models
            && self.context.nodes.len() == nodes.len()
            && self
                .context
                .nodes
                .iter()
                .zip(nodes)
                .all(|((a, an), (b, bn))| a == b && an == bn);
        if !same {
            self.context = Context {
                models: models.to_vec(),
                nodes: nodes.iter().map(|(id, n)| (*id, n.to_string())).collect(),
            };
            self.context_epoch += 1;
        }
    }
}

#[cfg(test)]
#[path = "job_numbers_tests.rs"]
mod tests;
