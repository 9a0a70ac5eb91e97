//! What a cycle (or a policy swap's dry run) reads, copied under the scheduler's locks in
//! time proportional to the number of jobs and nodes, not to the work of converting them:
//! the active jobs are shared records (`Arc`, copied on write by the job table), the nodes
//! and the usage ledger are cloned. [`CycleInputs::snapshot`] then builds the engine's
//! [`Snapshot`] after every lock is let go, so a submit or a query never waits for a
//! backlog's conversion.
//!
//! Owns: that copy and when it is taken. Does not own the conversion (`snapshot`) nor the
//! holds (`holds`).

use super::accounting::Ledger;
use super::job_numbers::JobNumbers;
use super::{Scheduler, lock, snapshot};
use gantry_api::model::JobRecord;
use gantry_contract::NodeId;
use gantry_engine::Snapshot;
use gantry_node::inventory::NodeInfo;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The active jobs, the schedulable nodes, the cycle number and the usage ledger as they
/// were at one moment.
pub(crate) struct CycleInputs {
    jobs: Vec<Arc<JobRecord>>,
    nodes: Vec<(NodeId, NodeInfo)>,
    cycle: u64,
    ledger: Ledger,
}

impl CycleInputs {
    /// The engine's snapshot of these inputs at `now_ms` (off every lock), its jobs
    /// numbered by `numbers` (`job_numbers.rs`).
    pub(crate) fn snapshot(&self, now_ms: u64, numbers: &Mutex<JobNumbers>) -> Snapshot {
        let nodes: Vec<(NodeId, &NodeInfo)> = self.nodes.iter().map(|(id, n)| (*id, n)).collect();
        let (mut snap, models) = snapshot::build_with_models(
            self.jobs.iter().map(|j| &**j),
            &nodes,
            self.cycle,
            now_ms,
            &self.ledger,
        );
        let names: Vec<(NodeId, &str)> =
            nodes.iter().map(|(id, n)| (*id, n.name.as_str())).collect();
        lock(numbers).number(&mut snap, &self.jobs, models.names(), &names);
        snap
    }
}

impl Scheduler {
    /// Copies what a cycle reads: the active jobs but `held`, the nodes that take work, the
    /// current cycle number, the ledger. `next_cycle` counts a new cycle first.
    pub(crate) fn cycle_inputs(
        &self,
        next_cycle: bool,
        held: impl FnOnce(&mut super::job_table::JobTable) -> BTreeSet<u64>,
    ) -> CycleInputs {
        let (jobs, nodes, cycle) = {
            let mut st = lock(&self.inner.state);
            if next_cycle {
                st.cycle += 1;
            }
            let held = held(&mut st.jobs);
            let mut jobs = st.jobs.shared_active();
            if !held.is_empty() {
                jobs.retain(|j| !held.contains(&j.id));
            }
            let members = lock(&self.inner.members);
            let nodes = members
                .schedulable()
                .into_iter()
                .map(|(id, n)| (id, n.clone()))
                .collect();
            (jobs, nodes, st.cycle)
        };
        let ledger = self.ledger().clone();
        CycleInputs {
            jobs,
            nodes,
            cycle,
            ledger,
        }
    }
}
