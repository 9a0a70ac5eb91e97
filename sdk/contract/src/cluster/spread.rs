//! A gang over an exact number of nodes (`sbatch --nodes N`): the host marks such a job with
//! the label [`NODES_LABEL`]` = N`, and [`ClusterModel::fit_gang`] then books its tasks in
//! N blocks on N distinct nodes, as evenly as they go (the first `count % N` nodes get one
//! task more, as SLURM's block distribution does), each block on the first node in model
//! order where all of it fits. The host checks the result of every placement plugin against
//! the label, so a plugin that does not read it cannot pack such a job on fewer nodes.
//!
//! Owns: the label, reading it, and this booking. Does not own single-node fitting
//! (`cluster.rs`) nor what the host does with a plan that ignores the label (the engine).

use super::{ClusterModel, FreeTotals, explain_shortage};
use crate::types::{Cycle, Job, Reason, ReasonCode, TaskAllocation, TaskGroup};
use std::collections::HashSet;

/// The label the host sets on a job that asks for an exact number of nodes.
pub const NODES_LABEL: &str = "gantry.io/nodes";

impl Job {
    /// The number of nodes the job asks for (its [`NODES_LABEL`]), if it asks.
    pub fn nodes_wanted(&self, ctx: &Cycle) -> Option<u32> {
        self.labels
            .iter()
            .find(|l| ctx.text(l.key) == NODES_LABEL)
            .and_then(|l| ctx.text(l.value).parse().ok())
            .filter(|n| *n >= 1)
    }
}

/// How many of `count` tasks block `block` of `nodes` gets.
pub fn block_size(count: usize, nodes: usize, block: usize) -> usize {
    count / nodes + usize::from(block < count % nodes)
}

/// Why a job that asks for `nodes` nodes does not fit now.
pub fn spread_shortage(ctx: &Cycle, job: &Job, nodes: u32, totals: &FreeTotals) -> Reason {
    explain_shortage(ctx, job, totals).unwrap_or_else(|| {
        let count = job.task_count();
        let most = block_size(count, nodes as usize, 0);
        let code = if job.gpu_milli_total() > 0 {
            ReasonCode::InsufficientGpus
        } else {
            ReasonCode::InsufficientCpu
        };
        Reason::new(
            code,
            format!(
                "needs {nodes} nodes with room for up to {most} of its {count} tasks each (--nodes {nodes}); not that many have it"
            ),
        )
    })
}

impl ClusterModel {
    /// Books `job`'s tasks in `nodes` blocks on distinct nodes, or books nothing.
    pub(super) fn fit_spread(
        &mut self,
        ctx: &Cycle,
        job: &Job,
        nodes: u32,
    ) -> Result<Vec<TaskAllocation>, Reason> {
        let tasks: Vec<TaskGroup> = job.expanded_tasks().copied().collect();
        let blocks = nodes as usize;
        let mut booked: Vec<TaskAllocation> = Vec::with_capacity(tasks.len());
        let mut used = HashSet::new();
        let mut next = 0;
        for block in 0..blocks {
            let size = block_size(tasks.len(), blocks, block);
            let part = &tasks[next.min(tasks.len())..(next + size).min(tasks.len())];
            if size == 0 || part.len() != size || !self.book_block(part, &mut used, &mut booked) {
                for a in &booked {
                    self.release(a);
                }
                return Err(spread_shortage(ctx, job, nodes, &self.free_totals(job)));
            }
            next += size;
        }
        Ok(booked)
    }

    /// Books all of `part` on the first unused node where it fits; false when none.
    fn book_block(
        &mut self,
        part: &[TaskGroup],
        used: &mut HashSet<crate::types::NodeId>,
        booked: &mut Vec<TaskAllocation>,
    ) -> bool {
        let ids: Vec<_> = self.nodes.iter().map(|n| n.id).collect();
        for id in ids.into_iter().filter(|id| !used.contains(id)) {
            let mut here = Vec::with_capacity(part.len());
            let fits = part.iter().all(|group| {
                let taken = self
                    .fit_task(group, id)
                    .and_then(|a| self.take(group, &a).ok().map(|()| a));
                taken.map(|a| here.push(a)).is_some()
            });
            if fits {
                used.insert(id);
                booked.extend(here);
                return true;
            }
            for a in &here {
                self.release(a);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::types::{Gpu, Label, Node, NodeState};

    fn ctx(nodes: &str) -> Cycle {
        Cycle {
            strings: vec![NODES_LABEL.into(), nodes.into(), "fake".into()],
            gpu_models: vec![2],
            ..Default::default()
        }
    }

    fn node(id: u32, free_gpus: u32) -> Node {
        Node {
            id,
            state: NodeState::Up,
            cpu_milli_total: 64_000,
            cpu_milli_free: 64_000,
            memory_mib_total: 1 << 20,
            memory_mib_free: 1 << 20,
            gpus: (0..4)
                .map(|i| Gpu {
                    index: i,
                    model: 2,
                    memory_mib: 80_000,
                    free_milli: if i < free_gpus { 1000 } else { 0 },
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn job(tasks: u32, spread: bool) -> Job {
        Job {
            id: 7,
            labels: if spread {
                vec![Label { key: 0, value: 1 }]
            } else {
                vec![]
            },
            tasks: vec![TaskGroup {
                count: tasks,
                gpus: 1,
                cpu_milli: 1000,
                memory_mib: 1024,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn nodes_of(allocs: &[TaskAllocation]) -> Vec<u32> {
        allocs.iter().map(|a| a.node).collect()
    }

    #[test]
    fn tasks_go_in_even_blocks_on_exactly_the_nodes_asked_for() {
        let cluster = [node(0, 4), node(1, 4), node(2, 4), node(3, 4)];
        let mut model = ClusterModel::new(&ctx("2"), &cluster);
        // Without the label, first fit packs all four on node 0.
        let packed = model.fit_gang(&ctx("2"), &job(4, false)).unwrap();
        assert_eq!(nodes_of(&packed), [0, 0, 0, 0]);
        let mut model = ClusterModel::new(&ctx("2"), &cluster);
        let two = model.fit_gang(&ctx("2"), &job(4, true)).unwrap();
        assert_eq!(nodes_of(&two), [0, 0, 1, 1]);
        let mut model = ClusterModel::new(&ctx("3"), &cluster);
        let three = model.fit_gang(&ctx("3"), &job(5, true)).unwrap();
        assert_eq!(
            nodes_of(&three),
            [0, 0, 1, 1, 2],
            "the first count % N blocks get one more"
        );
        let mut model = ClusterModel::new(&ctx("1"), &cluster);
        let one = model.fit_gang(&ctx("1"), &job(3, true)).unwrap();
        assert_eq!(nodes_of(&one), [0, 0, 0]);
    }

    #[test]
    fn a_node_without_room_for_a_whole_block_is_skipped_and_nothing_is_booked_when_too_few_have_it()
    {
        let cluster = [node(0, 1), node(1, 2), node(2, 4)];
        let mut model = ClusterModel::new(&ctx("2"), &cluster);
        let placed = model.fit_gang(&ctx("2"), &job(4, true)).unwrap();
        assert_eq!(nodes_of(&placed), [1, 1, 2, 2]);
        let cluster = [node(0, 1), node(1, 1), node(2, 4)];
        let mut model = ClusterModel::new(&ctx("2"), &cluster);
        let err = model.fit_gang(&ctx("2"), &job(4, true)).unwrap_err();
        assert!(err.message.contains("--nodes 2"), "{err:?}");
        // Nothing stayed booked: all of node 2 is still free.
        let four = model.fit_gang(&ctx("1"), &job(4, true)).unwrap();
        assert_eq!(nodes_of(&four), [2, 2, 2, 2]);
    }
}
