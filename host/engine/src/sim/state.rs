//! The simulated cluster between events: one long-lived [`Snapshot`] that is changed
//! in place (free resources on nodes, the pending and running lists, the string table,
//! usage) instead of being rebuilt for every cycle, so that a cycle costs what the
//! plugins cost, not what copying the cluster costs.
//!
//! Owns: booking and releasing allocations, node up/down, interning, the per-cycle
//! context (time, usage, GPUs in use, queues, totals). Does not own the order of
//! events (`timeline`, `fill`) or decisions (the cycle).

use super::input::{SimJob, SimNode};
use super::usage::UsageTracker;
use crate::snapshot::Snapshot;
use gantry_contract::{
    ClusterTotals, Gpu, GpuUse, Job, JobId, Label, MILLI_PER_GPU, Node, NodeId, NodeState,
    QueueStatus, RunningJob, Symbol, TaskAllocation,
};
use std::collections::{BTreeMap, HashMap};

/// The cluster, the jobs in it and the snapshot the next cycle will see.
#[derive(Debug)]
pub struct SimState {
    /// What the next cycle sees; `pending` is kept in submit order.
    pub snap: Snapshot,
    symbols: HashMap<String, Symbol>,
    node_pos: HashMap<String, usize>,
    running_pos: HashMap<JobId, usize>,
    usage: UsageTracker,
    /// Queues seen so far, so that a queue stays listed when it empties.
    queue_names: Vec<Symbol>,
    /// The cluster's GPU models, for model masks.
    pub models: Vec<String>,
}

impl SimState {
    /// All nodes up and empty; `seed` is the run's seed, the same in every cycle.
    pub fn new(nodes: &[SimNode], models: Vec<String>, seed: u64) -> Self {
        let mut state = Self {
            snap: Snapshot::default(),
            symbols: HashMap::new(),
            node_pos: HashMap::new(),
            running_pos: HashMap::new(),
            usage: UsageTracker::default(),
            queue_names: Vec::new(),
            models,
        };
        state.snap.ctx.seed = seed;
        state.snap.ctx.gpu_models = state
            .models
            .clone()
            .iter()
            .map(|m| state.intern(m))
            .collect();
        for (i, n) in nodes.iter().enumerate() {
            let node = state.node(i as NodeId, n);
            state.node_pos.insert(n.name.clone(), i);
            state.snap.nodes.push(node);
        }
        state
    }

    fn node(&mut self, id: NodeId, n: &SimNode) -> Node {
        let model = self.intern(&n.gpu_model);
        Node {
            id,
            name: self.intern(&n.name),
            state: NodeState::Up,
            labels: self.labels(&n.labels),
            cpu_milli_total: n.cpu_milli,
            cpu_milli_free: n.cpu_milli,
            memory_mib_total: n.memory_mib,
            memory_mib_free: n.memory_mib,
            gpus: (0..n.gpus)
                .map(|index| Gpu {
                    index,
                    model,
                    memory_mib: n.gpu_memory_mib,
                    free_milli: MILLI_PER_GPU,
                    healthy: true,
                })
                .collect(),
        }
    }

    /// The symbol of `text` in the run's string table.
    pub fn intern(&mut self, text: &str) -> Symbol {
        if let Some(&s) = self.symbols.get(text) {
            return s;
        }
        let s = self.snap.ctx.strings.len() as Symbol;
        self.snap.ctx.strings.push(text.to_string());
        self.symbols.insert(text.to_string(), s);
        s
    }

    fn labels(&mut self, labels: &BTreeMap<String, String>) -> Vec<Label> {
        labels
            .iter()
            .map(|(k, v)| Label {
                key: self.intern(k),
                value: self.intern(v),
            })
            .collect()
    }

    /// The contract job for `job` with id `id`.
    pub fn contract_job(&mut self, id: JobId, job: &SimJob) -> Job {
        let queue = self.intern(&job.queue);
        if !self.queue_names.contains(&queue) {
            self.queue_names.push(queue);
        }
        Job {
            id,
            name: self.intern(&job.name),
            user: self.intern(&job.user),
            account: self.intern(&job.account),
            queue,
            tier: job.tier,
            submit_ms: job.submit_ms,
            time_limit_s: job.time_limit_s,
            kind: job.kind,
            preemptible: job.preemptible,
            labels: self.labels(&job.labels),
            tasks: job.tasks.iter().map(|t| t.to_group(&self.models)).collect(),
        }
    }

    /// Decayed usage halves every `half_life_s` seconds from now on (call before the run).
    pub fn set_usage_half_life(&mut self, half_life_s: f64) {
        self.usage = UsageTracker::with_half_life(half_life_s);
    }

    /// The position of a node by name.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.node_pos.get(name).copied()
    }

    /// Marks a node up or down (draining is not simulated).
    pub fn set_node_up(&mut self, index: usize, up: bool) {
        if let Some(n) = self.snap.nodes.get_mut(index) {
            n.state = if up { NodeState::Up } else { NodeState::Down };
        }
    }

    /// Running jobs with a task on node `index`.
    pub fn jobs_on_node(&self, index: usize) -> Vec<JobId> {
        let Some(id) = self.snap.nodes.get(index).map(|n| n.id) else {
            return Vec::new();
        };
        self.snap
            .running
            .iter()
            .filter(|r| r.tasks.iter().any(|t| t.node == id))
            .map(|r| r.job.id)
            .collect()
    }

    /// Moves a pending job to running and books its allocations (already validated by
    /// the cycle against this very snapshot). Returns the job's time limit in seconds.
    pub fn start(
        &mut self,
        job: JobId,
        tasks: Vec<TaskAllocation>,
        now_ms: u64,
        score: f64,
    ) -> Option<u64> {
        let pos = self.snap.pending.iter().position(|j| j.id == job)?;
        let job = self.snap.pending.remove(pos);
        for a in &tasks {
            self.book(a, true);
        }
        let limit_s = job.time_limit_s;
        let expected_end_ms = (limit_s > 0).then(|| now_ms + limit_s * 1000);
        self.running_pos.insert(job.id, self.snap.running.len());
        self.snap.running.push(RunningJob {
            job,
            tasks,
            start_ms: now_ms,
            expected_end_ms,
            score,
        });
        Some(limit_s)
    }

    /// Ends a running job: releases what it held and charges its usage.
    pub fn stop(&mut self, job: JobId, now_ms: u64) -> Option<RunningJob> {
        let pos = self.running_pos.remove(&job)?;
        let r = self.snap.running.swap_remove(pos);
        if let Some(moved) = self.snap.running.get(pos) {
            self.running_pos.insert(moved.job.id, pos);
        }
        for a in &r.tasks {
            self.book(a, false);
        }
        self.snap.evicting.retain(|e| e.job != job);
        let held = held_milli(&r);
        let gpu_s = held as f64 / 1000.0 * now_ms.saturating_sub(r.start_ms) as f64 / 1000.0;
        self.usage
            .finished(r.job.user, r.job.account, gpu_s, now_ms);
        Some(r)
    }

    fn book(&mut self, a: &TaskAllocation, take: bool) {
        let Some(n) = self.snap.nodes.get_mut(a.node as usize) else {
            return;
        };
        if take {
            n.cpu_milli_free = n.cpu_milli_free.saturating_sub(a.cpu_milli);
            n.memory_mib_free = n.memory_mib_free.saturating_sub(a.memory_mib);
        } else {
            n.cpu_milli_free = (n.cpu_milli_free + a.cpu_milli).min(n.cpu_milli_total);
            n.memory_mib_free = (n.memory_mib_free + a.memory_mib).min(n.memory_mib_total);
        }
        for share in &a.gpus {
            if let Some(g) = n.gpus.get_mut(share.index as usize) {
                g.free_milli = if take {
                    g.free_milli.saturating_sub(share.milli)
                } else {
                    (g.free_milli + share.milli).min(MILLI_PER_GPU)
                };
            }
        }
    }

    /// Whether a job is running.
    pub fn is_running(&self, job: JobId) -> bool {
        self.running_pos.contains_key(&job)
    }

    /// Milli-GPU held by running jobs, and the capacity of nodes that are up.
    pub fn gpu_allocation(&self) -> (u64, u64) {
        let held: u64 = self.snap.running.iter().map(held_milli).sum();
        let total: u64 = self
            .snap
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Up)
            .map(|n| n.gpus.len() as u64 * u64::from(MILLI_PER_GPU))
            .sum();
        (held, total)
    }

    /// Brings the context up to date for a cycle at `now_ms`.
    pub fn prepare_cycle(&mut self, cycle_id: u64, now_ms: u64) {
        let ctx = &mut self.snap.ctx;
        ctx.id = cycle_id;
        ctx.now_ms = now_ms;
        let running = self
            .snap
            .running
            .iter()
            .map(|r| (r.job.user, r.job.account, held_milli(r), r.start_ms));
        let (users, accounts) = self.usage.at(now_ms, running.clone());
        ctx.user_usage = users;
        ctx.account_usage = accounts;
        let mut user_gpus: BTreeMap<Symbol, u64> = BTreeMap::new();
        let mut account_gpus: BTreeMap<Symbol, u64> = BTreeMap::new();
        let models = ctx.gpu_models.len();
        let mut queue_use: BTreeMap<Symbol, QueueStatus> = BTreeMap::new();
        let blank = |queue| QueueStatus {
            queue,
            gpu_milli_used_by_model: vec![0; models],
            ..QueueStatus::default()
        };
        for (user, account, milli, _) in running {
            *user_gpus.entry(user).or_default() += milli;
            *account_gpus.entry(account).or_default() += milli;
        }
        for r in &self.snap.running {
            let q = queue_use
                .entry(r.job.queue)
                .or_insert_with(|| blank(r.job.queue));
            q.gpu_milli_used += held_milli(r);
            for t in &r.tasks {
                let Some(node) = self.snap.nodes.get(t.node as usize) else {
                    continue;
                };
                for share in &t.gpus {
                    let model = node
                        .gpus
                        .get(share.index as usize)
                        .and_then(|g| ctx.gpu_models.iter().position(|m| *m == g.model));
                    if let Some(m) = model {
                        q.gpu_milli_used_by_model[m] += u64::from(share.milli);
                    }
                }
            }
        }
        for j in &self.snap.pending {
            queue_use
                .entry(j.queue)
                .or_insert_with(|| blank(j.queue))
                .pending_jobs += 1;
        }
        let to_use = |m: BTreeMap<Symbol, u64>| {
            m.into_iter()
                .map(|(who, gpu_milli)| GpuUse { who, gpu_milli })
                .collect()
        };
        ctx.user_gpus = to_use(user_gpus);
        ctx.account_gpus = to_use(account_gpus);
        ctx.queues = self
            .queue_names
            .iter()
            .map(|&queue| queue_use.remove(&queue).unwrap_or_else(|| blank(queue)))
            .collect();
        let up = self.snap.nodes.iter().filter(|n| n.state == NodeState::Up);
        ctx.totals = ClusterTotals {
            nodes: up.clone().count() as u32,
            gpu_milli_total: up
                .clone()
                .map(|n| n.gpus.len() as u64 * u64::from(MILLI_PER_GPU))
                .sum(),
            gpu_milli_free: up
                .clone()
                .flat_map(|n| &n.gpus)
                .map(|g| u64::from(g.free_milli))
                .sum(),
            cpu_milli_total: up.clone().map(|n| u64::from(n.cpu_milli_total)).sum(),
            memory_mib_total: up.map(|n| n.memory_mib_total).sum(),
        };
    }
}

/// Milli-GPU a running job holds.
pub fn held_milli(r: &RunningJob) -> u64 {
    r.tasks
        .iter()
        .flat_map(|t| &t.gpus)
        .map(|s| u64::from(s.milli))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_contract::GpuShare;

    fn node(name: &str, model: &str) -> SimNode {
        SimNode {
            name: name.into(),
            cpu_milli: 8000,
            memory_mib: 8192,
            gpus: 2,
            gpu_model: model.into(),
            gpu_memory_mib: 0,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn queue_use_is_split_by_gpu_model() {
        let nodes = [node("a", "A100"), node("b", "L4")];
        let mut st = SimState::new(&nodes, vec!["A100".into(), "L4".into()], 1);
        let job = SimJob {
            name: "j".into(),
            user: "u".into(),
            account: "acct".into(),
            queue: "team".into(),
            tier: 0,
            kind: gantry_contract::JobKind::Batch,
            preemptible: false,
            requeue: true,
            labels: BTreeMap::new(),
            submit_ms: 0,
            duration_ms: 10,
            time_limit_s: 0,
            tasks: Vec::new(),
        };
        let contract = st.contract_job(1, &job);
        st.snap.pending.push(contract);
        let on = |node: NodeId, index: u32, milli: u32| TaskAllocation {
            node,
            gpus: vec![GpuShare { index, milli }],
            cpu_milli: 0,
            memory_mib: 0,
        };
        st.start(1, vec![on(0, 0, 1000), on(1, 1, 500)], 0, 0.0);
        st.prepare_cycle(1, 0);
        let q = &st.snap.ctx.queues[0];
        assert_eq!(st.snap.ctx.text(q.queue), "team");
        assert_eq!(q.gpu_milli_used, 1500);
        assert_eq!(q.gpu_milli_used_by_model, vec![1000, 500]);
    }
}
