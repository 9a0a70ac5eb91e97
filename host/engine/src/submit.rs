//! Submit-time checks: could any node ever hold this job, and does the admission
//! chain accept it (possibly with defaults filled in)?
//!
//! Owns: the capacity check against an empty cluster and the submit-time admission
//! chain. Does not own parsing or storing the job (the daemon).

use crate::pipeline::{FaultRecord, Pipeline};
use gantry_contract::{
    ClusterModel, Cycle, Job, JobPatch, MILLI_PER_GPU, Node, NodeState, Reason, Stage,
    SubmitVerdict,
};

/// The admission chain's answer at submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitDecision {
    /// Accepted, with the patches plugins asked for, in chain order.
    Accept(Vec<JobPatch>),
    /// Rejected by a plugin.
    Reject {
        /// The plugin that rejected.
        plugin: String,
        /// Its message for the client.
        message: String,
    },
}

/// Whether `job` fits on `nodes` with nothing running, every node up and every GPU
/// healthy: a job that fails this would wait forever, so it is rejected at submit.
pub fn fits_empty_cluster(ctx: &Cycle, nodes: &[Node], job: &Job) -> Result<(), Reason> {
    let empty: Vec<Node> = nodes
        .iter()
        .map(|n| {
            let mut n = n.clone();
            n.revision = 0;
            n.state = NodeState::Up;
            n.cpu_milli_free = n.cpu_milli_total;
            n.memory_mib_free = n.memory_mib_total;
            for g in &mut n.gpus {
                g.free_milli = MILLI_PER_GPU;
                g.healthy = true;
            }
            n
        })
        .collect();
    ClusterModel::new(ctx, &empty)
        .fit_gang(ctx, job)
        .map(|_| ())
}

/// Asks every admission plugin of `live` about `job`. A faulting plugin does not block
/// the submit (the fault is returned for the record).
pub fn check_submit(
    ctx: &Cycle,
    job: &Job,
    live: &mut Pipeline,
) -> (SubmitDecision, Vec<FaultRecord>) {
    let mut patches = Vec::new();
    let mut faults = Vec::new();
    for slot in &mut live.admission {
        if slot.quarantined() {
            continue;
        }
        let ident = slot.plugin.ident().clone();
        let r = slot.plugin.check_submit(ctx, job);
        slot.record(&r);
        match r {
            Ok(SubmitVerdict::Accept) => {}
            Ok(SubmitVerdict::AcceptWith(p)) => patches.push(p),
            Ok(SubmitVerdict::Reject(message)) => {
                return (
                    SubmitDecision::Reject {
                        plugin: ident.name,
                        message,
                    },
                    faults,
                );
            }
            Err(fault) => faults.push(FaultRecord {
                stage: Stage::Admission,
                plugin: ident,
                fault,
                fell_back: false,
            }),
        }
    }
    (SubmitDecision::Accept(patches), faults)
}
