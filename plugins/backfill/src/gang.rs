//! A whole job, all tasks or none. Under `binpack` and `spread` each task goes to the
//! best node in turn. Under `topology`: a gang that fits one node goes on one node
//! (the fullest such node); otherwise a gang that fits within the nodes of one
//! `rack` label value goes there (racks tried from the least free capacity that
//! could hold it), then one `switch`; otherwise anywhere.
//!
//! Owns: gang strategies. Does not own the node order or the per-node fit
//! (`scoring`).

use crate::scoring::{Fitter, Scoring, task_milli};
use crate::timeline::Booking;
use crate::topology::NodeInfo;
use gantry_sdk::{Job, Symbol, TaskGroup};
use std::collections::BTreeMap;

impl Fitter<'_> {
    /// All tasks of `job`, or None when they do not all fit.
    pub fn fit(&self, job: &Job) -> Option<Vec<Booking>> {
        let tasks: Vec<&TaskGroup> = job.expanded_tasks().collect();
        if self.scoring == Scoring::Topology && tasks.len() > 1 {
            if let Some(b) = self.one_node(&tasks) {
                return Some(b);
            }
            for domain in [rack_of, switch_of] {
                if let Some(b) = self.one_domain(&tasks, domain) {
                    return Some(b);
                }
            }
        }
        self.place(&tasks, None)
    }

    /// The fullest node that holds every task.
    fn one_node(&self, tasks: &[&TaskGroup]) -> Option<Vec<Booking>> {
        let total: u64 = tasks.iter().map(|t| u64::from(task_milli(t))).sum();
        let need = u32::try_from(total).unwrap_or(u32::MAX);
        self.order
            .candidates(need)
            .find_map(|pos| self.place_on(pos, tasks))
    }

    /// All tasks within the nodes sharing one value of a label.
    fn one_domain(
        &self,
        tasks: &[&TaskGroup],
        domain: fn(&NodeInfo) -> Option<Symbol>,
    ) -> Option<Vec<Booking>> {
        let need: u64 = tasks.iter().map(|t| u64::from(task_milli(t))).sum();
        let mut free: BTreeMap<Symbol, u64> = BTreeMap::new();
        for (pos, n) in self.topo.nodes.iter().enumerate() {
            if let (Some(d), Some((gpu, _))) = (domain(n), self.order.key(pos)) {
                *free.entry(d).or_default() += u64::from(gpu);
            }
        }
        let mut domains: Vec<(u64, Symbol)> = free
            .into_iter()
            .filter(|&(_, f)| f >= need)
            .map(|(d, f)| (f, d))
            .collect();
        domains.sort_unstable();
        domains.into_iter().find_map(|(_, d)| {
            let inside = |pos: usize| domain(&self.topo.nodes[pos]) == Some(d);
            self.place(tasks, Some(&inside))
        })
    }
}

fn rack_of(n: &NodeInfo) -> Option<Symbol> {
    n.rack
}

fn switch_of(n: &NodeInfo) -> Option<Symbol> {
    n.switch
}
