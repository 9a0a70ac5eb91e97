//! The simulated cluster between events: one long-lived [`Snapshot`] that is changed
//! in place (free resources on nodes, the pending and running lists, the string table,
//! usage) instead of being rebuilt for every cycle, so that a cycle costs what the
//! plugins cost, not what copying the cluster costs.
//!
//! Owns: booking and releasing allocations, node up/down, interning, the per-cycle
//! context (time, usage, GPUs in use, queues, totals). Does not own the order of
//! events (`timeline`, `fill`) or decisions (the cycle).

use super::input::{SimJob, SimNode};
pub use super::running_totals::held_milli;
use super::running_totals::{QueueHeld, RunningTotals};
use super::usage::UsageTracker;
use crate::snapshot::Snapshot;
use gantry_contract::{
    ClusterTotals, Gpu, GpuUse, Job, JobId, Label, MILLI_PER_GPU, Node, NodeId, NodeState,
    QueueStatus, RunningJob, Symbol, TaskAllocation, next_revision,
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
    /// Sums over the running jobs, kept as they start and stop.
    totals: RunningTotals,
    /// Totals over the nodes that are up; free GPU kept as allocations are booked.
    up_totals: ClusterTotals,
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
            totals: RunningTotals::default(),
            up_totals: ClusterTotals::default(),
            queue_names: Vec::new(),
            models,
        };
        state.snap.ctx.seed = seed;
        // `intern` only appends: the table keeps one lineage for the whole run.
        state.snap.ctx.strings_lineage = next_revision();
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
        state.refresh_up_totals();
        state
    }

    fn refresh_up_totals(&mut self) {
        let up = self.snap.nodes.iter().filter(|n| n.state == NodeState::Up);
        self.up_totals = ClusterTotals {
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

    /// Counts `r` into (`sign`) or out of the running totals.
    fn count_running(&mut self, r: &RunningJob, sign: bool) {
        let (nodes, models) = (&self.snap.nodes, &self.snap.ctx.gpu_models);
        self.totals.count(r, sign, models.len(), |node, index| {
            let gpu = nodes.get(node as usize)?.gpus.get(index as usize)?;
            models.iter().position(|m| *m == gpu.model)
        });
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
                    parent: None,
                })
                .collect(),
            revision: next_revision(),
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
            revision: 0,
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
            n.revision = next_revision();
        }
        self.refresh_up_totals();
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
        let r = RunningJob {
            job,
            tasks,
            start_ms: now_ms,
            expected_end_ms,
            score,
            revision: next_revision(),
        };
        self.count_running(&r, true);
        self.snap.running.push(r);
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
        self.count_running(&r, false);
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
        n.revision = next_revision();
        if take {
            n.cpu_milli_free = n.cpu_milli_free.saturating_sub(a.cpu_milli);
            n.memory_mib_free = n.memory_mib_free.saturating_sub(a.memory_mib);
        } else {
            n.cpu_milli_free = (n.cpu_milli_free + a.cpu_milli).min(n.cpu_milli_total);
            n.memory_mib_free = (n.memory_mib_free + a.memory_mib).min(n.memory_mib_total);
        }
        let up = n.state == NodeState::Up;
        for share in &a.gpus {
            if let Some(g) = n.gpus.get_mut(share.index as usize) {
                let before = u64::from(g.free_milli);
                g.free_milli = if take {
                    g.free_milli.saturating_sub(share.milli)
                } else {
                    (g.free_milli + share.milli).min(MILLI_PER_GPU)
                };
                if up {
                    let free = &mut self.up_totals.gpu_milli_free;
                    *free = (*free + u64::from(g.free_milli)).saturating_sub(before);
                }
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

    /// Brings the context up to date for a cycle at `now_ms`: O(users, accounts,
    /// queues, pending jobs, nodes), not O(running jobs) (`running_totals`).
    pub fn prepare_cycle(&mut self, cycle_id: u64, now_ms: u64) {
        let ctx = &mut self.snap.ctx;
        ctx.id = cycle_id;
        ctx.now_ms = now_ms;
        let (users, accounts) = self.usage.at(now_ms, &self.totals);
        ctx.user_usage = users;
        ctx.account_usage = accounts;
        let to_use = |m: &BTreeMap<Symbol, super::running_totals::Held>| {
            m.iter()
                .map(|(who, h)| GpuUse {
                    who: *who,
                    gpu_milli: h.milli,
                })
                .collect()
        };
        ctx.user_gpus = to_use(&self.totals.users);
        ctx.account_gpus = to_use(&self.totals.accounts);
        let mut pending: BTreeMap<Symbol, u32> = BTreeMap::new();
        for j in &self.snap.pending {
            *pending.entry(j.queue).or_default() += 1;
        }
        let models = ctx.gpu_models.len();
        let totals = &self.totals;
        ctx.queues = self
            .queue_names
            .iter()
            .map(|&queue| {
                let held = totals.queues.get(&queue);
                QueueStatus {
                    queue,
                    gpu_milli_used: held.map_or(0, |q| q.milli),
                    gpu_milli_used_by_model: held
                        .map_or_else(|| vec![0; models], |q: &QueueHeld| q.by_model.clone()),
                    pending_jobs: pending.get(&queue).copied().unwrap_or(0),
                    ..QueueStatus::default()
                }
            })
            .collect();
        ctx.totals = self.up_totals;
    }
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

    /// The context kept up to date as jobs start and stop equals one summed from the
    /// running list, whatever the sequence of starts, stops and node changes.
    #[test]
    fn kept_sums_equal_sums_over_the_running_list() {
        let nodes = [node("a", "A100"), node("b", "L4"), node("c", "L4")];
        let mut st = SimState::new(&nodes, vec!["A100".into(), "L4".into()], 1);
        let mut x = 5u64;
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let (mut now, mut id) = (0u64, 0u64);
        let mut finished = UsageTracker::default();
        for _ in 0..300 {
            now += next(5000);
            match next(4) {
                0 | 1 => {
                    id += 1;
                    let job = SimJob {
                        name: format!("j{id}"),
                        user: format!("u{}", next(3)),
                        account: format!("a{}", next(2)),
                        queue: format!("q{}", next(2)),
                        tier: 0,
                        kind: gantry_contract::JobKind::Batch,
                        preemptible: false,
                        requeue: true,
                        labels: BTreeMap::new(),
                        submit_ms: now,
                        duration_ms: 10,
                        time_limit_s: 0,
                        tasks: Vec::new(),
                    };
                    let contract = st.contract_job(id, &job);
                    st.snap.pending.push(contract);
                    let share = GpuShare {
                        index: next(2) as u32,
                        milli: [0, 250, 1000][next(3) as usize],
                    };
                    let task = TaskAllocation {
                        node: next(3) as NodeId,
                        gpus: vec![share],
                        cpu_milli: 100,
                        memory_mib: 10,
                    };
                    st.start(id, vec![task], now, 0.0);
                }
                2 => {
                    if let Some(r) = st.snap.running.first().map(|r| r.job.id) {
                        let r = st.stop(r, now).unwrap();
                        let gpu_s = held_milli(&r) as f64 / 1e3 * (now - r.start_ms) as f64 / 1e3;
                        finished.finished(r.job.user, r.job.account, gpu_s, now);
                    }
                }
                _ => st.set_node_up(next(3) as usize, next(2) == 0),
            }
            st.prepare_cycle(id, now);
            let c = &st.snap.ctx;
            let mut users: BTreeMap<Symbol, (u64, f64)> = BTreeMap::new();
            let mut queues: BTreeMap<Symbol, u64> = BTreeMap::new();
            for r in &st.snap.running {
                let e = users.entry(r.job.user).or_default();
                e.0 += held_milli(r);
                e.1 += held_milli(r) as f64 / 1000.0 * (now - r.start_ms) as f64 / 1000.0;
                *queues.entry(r.job.queue).or_default() += held_milli(r);
            }
            let gpus: Vec<(Symbol, u64)> = users.iter().map(|(k, v)| (*k, v.0)).collect();
            let got: Vec<(Symbol, u64)> =
                c.user_gpus.iter().map(|g| (g.who, g.gpu_milli)).collect();
            assert_eq!(got, gpus);
            let (done, _) = finished.at(now, &RunningTotals::default());
            for u in &c.user_usage {
                let past = done
                    .iter()
                    .find(|d| d.who == u.who)
                    .map_or(0.0, |d| d.gpu_seconds);
                let want = users.get(&u.who).map_or(0.0, |x| x.1) + past;
                assert!(
                    (u.gpu_seconds - want).abs() <= 1e-9 * want.max(1.0),
                    "{u:?} {want}"
                );
            }
            for q in &c.queues {
                assert_eq!(q.gpu_milli_used, queues.get(&q.queue).copied().unwrap_or(0));
                assert_eq!(
                    q.gpu_milli_used_by_model.iter().sum::<u64>(),
                    q.gpu_milli_used
                );
            }
            let free: u64 = st
                .snap
                .nodes
                .iter()
                .filter(|n| n.state == NodeState::Up)
                .flat_map(|n| &n.gpus)
                .map(|g| u64::from(g.free_milli))
                .sum();
            assert_eq!(c.totals.gpu_milli_free, free);
        }
    }
}
