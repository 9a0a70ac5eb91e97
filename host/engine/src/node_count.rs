//! The host's check of `--nodes N` (a job labelled [`NODES_LABEL`]): a start that puts the
//! job's tasks on another number of nodes is not made; the job waits with a reason naming
//! the placement plugin that ignored the label, so a plugin that does not spread can never
//! pack such a job onto fewer nodes. The SDK's `ClusterModel::fit_gang` (used by
//! `first-fit`) spreads as asked.
//!
//! Owns this rule. Does not own the label or the spreading (`gantry-contract`'s
//! `cluster/spread.rs`), nor the plan's other checks (`validate.rs`).

use gantry_contract::{Cycle, Job, JobId, NODES_LABEL, Pending, Plan, Reason, ReasonCode};
use std::collections::{HashMap, HashSet};

/// `plan` without the starts that put a job on another number of nodes than it asks for;
/// each of those jobs waits instead, with a reason naming `plugin`.
pub(crate) fn hold_back_unspread(
    ctx: &Cycle,
    offered: &[Job],
    mut plan: Plan,
    plugin: &str,
) -> Plan {
    let wanted: HashMap<JobId, u32> = offered
        .iter()
        .filter_map(|j| j.nodes_wanted(ctx).map(|n| (j.id, n)))
        .collect();
    if wanted.is_empty() {
        return plan;
    }
    let mut held = Vec::new();
    plan.starts.retain(|start| {
        let Some(&n) = wanted.get(&start.job) else {
            return true;
        };
        let used: HashSet<_> = start.tasks.iter().map(|t| t.node).collect();
        if used.len() == n as usize {
            return true;
        }
        held.push(Pending {
            job: start.job,
            reason: Reason::new(
                ReasonCode::Other,
                format!(
                    "placement plugin {plugin} put its tasks on {} node(s); the job asks for exactly {n} (--nodes, label {NODES_LABEL}), which `first-fit` honours",
                    used.len()
                ),
            ),
        });
        false
    });
    plan.pending.extend(held);
    plan
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use gantry_contract::{Label, Start, TaskAllocation, TaskGroup};

    fn start(job: JobId, nodes: &[u32]) -> Start {
        Start {
            job,
            tasks: nodes
                .iter()
                .map(|&node| TaskAllocation {
                    node,
                    gpus: vec![],
                    cpu_milli: 1000,
                    memory_mib: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn a_start_on_the_wrong_number_of_nodes_becomes_a_wait_naming_the_plugin() {
        let ctx = Cycle {
            strings: vec![NODES_LABEL.into(), "2".into()],
            ..Default::default()
        };
        let job = |id, spread: bool| Job {
            id,
            labels: if spread {
                vec![Label { key: 0, value: 1 }]
            } else {
                vec![]
            },
            tasks: vec![TaskGroup {
                count: 2,
                cpu_milli: 1000,
                memory_mib: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let offered = [job(1, true), job(2, true), job(3, false)];
        let plan = Plan {
            starts: vec![start(1, &[0, 0]), start(2, &[0, 1]), start(3, &[0, 0])],
            ..Default::default()
        };
        let plan = hold_back_unspread(&ctx, &offered, plan, "best-fit");
        let started: Vec<JobId> = plan.starts.iter().map(|s| s.job).collect();
        assert_eq!(started, [2, 3]);
        assert_eq!(plan.pending.len(), 1);
        assert_eq!(plan.pending[0].job, 1);
        assert!(
            plan.pending[0]
                .reason
                .message
                .contains("best-fit put its tasks on 1 node(s)")
        );
    }
}
