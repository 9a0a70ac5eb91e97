//! Builds the engine's [`Snapshot`] from the daemon's jobs and the nodes that are up: interns
//! names and labels, turns GPU model names into mask bits, and computes what is free
//! on each node from the allocations of running jobs (so there is no separate
//! accounting to drift). A node is given by its number and inventory; a running task on a
//! node that is not given (down) keeps an allocation on [`ABSENT_NODE`], which no
//! booking can use.
//!
//! Owns: the daemon → contract mapping. Does not own scheduling decisions.

use super::accounting::{Ledger, running_gpu_seconds};
use gantry_api::model::{JobRecord, JobState, StopCause, TaskRecord};
use gantry_contract as c;
use gantry_engine::{EvictionInProgress, Interner, Snapshot};
use gantry_node::inventory::NodeInfo;
use std::collections::BTreeMap;

/// The local node's number in snapshots (it is always the first node when it runs tasks).
pub const LOCAL_NODE: c::NodeId = 0;

/// The number given to allocations on nodes that are not in the snapshot.
pub const ABSENT_NODE: c::NodeId = c::NodeId::MAX;

/// Nodes of a snapshot: number and inventory.
pub type NodeList<'a> = [(c::NodeId, &'a NodeInfo)];

/// Mask bit for models no GPU has once the table is full (never matches a GPU).
const UNKNOWN_MODEL_BIT: usize = 63;

/// Maps model names to mask bits for one snapshot.
pub struct Models {
    names: Vec<String>,
}

impl Models {
    /// Cluster models first (low bits), then any model a job asks for.
    pub fn new<'a>(nodes: &NodeList<'_>, jobs: impl Iterator<Item = &'a JobRecord>) -> Self {
        let mut names: Vec<String> = Vec::new();
        let mut add = |m: &str| {
            if !names.iter().any(|n| n == m) && names.len() < UNKNOWN_MODEL_BIT {
                names.push(m.to_string());
            }
        };
        for g in nodes.iter().flat_map(|(_, n)| &n.gpus) {
            add(&g.model);
        }
        for j in jobs {
            for t in &j.spec.tasks {
                for m in &t.gpu_models {
                    add(m);
                }
            }
        }
        Self { names }
    }

    /// A table of `names` (a snapshot's `gpu-models`, as text), then any model `extra` asks
    /// for (a what-if job's).
    pub fn with_names(mut names: Vec<String>, extra: &JobRecord) -> Self {
        for m in extra.spec.tasks.iter().flat_map(|t| &t.gpu_models) {
            if !names.iter().any(|n| n == m) && names.len() < UNKNOWN_MODEL_BIT {
                names.push(m.clone());
            }
        }
        Self { names }
    }

    /// The model names, by mask bit.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The mask for a task's allowed models (0 = any).
    pub fn mask(&self, allowed: &[String]) -> u64 {
        allowed.iter().fold(0u64, |mask, m| {
            let bit = self
                .names
                .iter()
                .position(|n| n == m)
                .unwrap_or(UNKNOWN_MODEL_BIT);
            mask | (1u64 << bit)
        })
    }
}

/// The contract view of a job.
pub fn contract_job(j: &JobRecord, models: &Models, strings: &mut Interner) -> c::Job {
    c::Job {
        id: j.id,
        name: strings.intern(&j.spec.name),
        user: strings.intern(&j.spec.user),
        account: strings.intern(&j.spec.account),
        queue: strings.intern(&j.spec.queue),
        tier: j.tier,
        submit_ms: j.submit_ms,
        time_limit_s: j.spec.time_limit_s,
        kind: j.spec.kind,
        preemptible: j.spec.preemptible,
        labels: j
            .spec
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .chain(j.spec.nodes.map(|n| (c::NODES_LABEL, n.to_string())))
            .map(|(k, v)| c::Label {
                key: strings.intern(k),
                value: strings.intern(&v),
            })
            .collect(),
        tasks: j
            .spec
            .tasks
            .iter()
            .map(|t| c::TaskGroup {
                count: t.count,
                gpus: t.gpus,
                gpu_milli: t.gpu_milli,
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                gpu_model_mask: models.mask(&t.gpu_models),
            })
            .collect(),
        revision: 0,
    }
}

/// A running job's measured GPU use as policies see it (`gantry_contract::gpu_usage`): its
/// tasks' marks merged, sampled since its last-sampled task's first sample; `None` until
/// every task that holds GPUs has been sampled (a gang half measured is not idle).
pub fn job_gpu_usage(j: &JobRecord) -> Option<c::GpuUsageLabels> {
    let mut out: Option<c::GpuUsageLabels> = None;
    for t in j
        .tasks
        .iter()
        .filter(|t| !t.gpus.is_empty() && t.exit.is_none())
    {
        let u = t.gpu_usage.as_ref()?;
        match &mut out {
            None => {
                out = Some(c::GpuUsageLabels {
                    sampled_since_ms: u.sampled_since_ms,
                    busy: u.busy.clone(),
                })
            }
            Some(o) => {
                o.sampled_since_ms = o.sampled_since_ms.max(u.sampled_since_ms);
                o.busy.merge(&u.busy);
            }
        }
    }
    out
}

fn allocation(t: &TaskRecord, nodes: &NodeList<'_>) -> c::TaskAllocation {
    c::TaskAllocation {
        node: nodes
            .iter()
            .find(|(_, n)| n.name == t.node)
            .map_or(ABSENT_NODE, |(id, _)| *id),
        gpus: t
            .gpus
            .iter()
            .map(|g| c::GpuShare {
                index: g.index,
                milli: g.milli,
            })
            .collect(),
        cpu_milli: t.cpu_milli,
        memory_mib: t.memory_mib,
    }
}

/// Node `id` with what `running` jobs leave free on it (everything, with no jobs).
pub fn node_view(
    id: c::NodeId,
    node: &NodeInfo,
    strings: &mut Interner,
    running: &[&JobRecord],
) -> c::Node {
    let mut n = c::Node {
        id,
        name: strings.intern(&node.name),
        state: c::NodeState::Up,
        labels: node
            .labels
            .iter()
            .map(|(k, v)| c::Label {
                key: strings.intern(k),
                value: strings.intern(v),
            })
            .collect(),
        cpu_milli_total: node.cpu_milli,
        cpu_milli_free: node.cpu_milli,
        memory_mib_total: node.memory_mib,
        memory_mib_free: node.memory_mib,
        // MIG slices replace their parent (`gantry_api::mig`).
        gpus: node
            .schedulable_gpus()
            .iter()
            .map(|g| c::Gpu {
                index: g.index,
                model: strings.intern(&g.model),
                memory_mib: g.memory_mib,
                free_milli: c::MILLI_PER_GPU,
                healthy: g.healthy,
                parent: gantry_api::mig::parent_of(g.index),
            })
            .collect(),
        revision: 0,
    };
    for t in running
        .iter()
        .flat_map(|j| &j.tasks)
        .filter(|t| t.node == node.name)
    {
        n.cpu_milli_free = n.cpu_milli_free.saturating_sub(t.cpu_milli);
        n.memory_mib_free = n.memory_mib_free.saturating_sub(t.memory_mib);
        for share in &t.gpus {
            if let Some(g) = n.gpus.iter_mut().find(|g| g.index == share.index) {
                g.free_milli = g.free_milli.saturating_sub(share.milli);
            }
        }
    }
    n
}

/// Decayed GPU-seconds per user and per account: the closed task runs of the accounting
/// ledger (each halved for every half-life since it ended) plus the still-running tasks of
/// running jobs, counted in full from their start.
fn usage<'a>(
    jobs: impl Iterator<Item = &'a JobRecord>,
    now_ms: u64,
    ledger: &Ledger,
    strings: &mut Interner,
) -> (Vec<c::Usage>, Vec<c::Usage>) {
    let running = jobs
        .filter(|j| j.state == JobState::Running)
        .map(|j| (j, running_gpu_seconds(j, now_ms)))
        .filter(|(_, gpu_s)| *gpu_s > 0.0);
    let (mut users, mut accounts) = per_user_and_account(running);
    let (closed_users, closed_accounts) = ledger.closed(now_ms);
    for (table, closed) in [(&mut users, closed_users), (&mut accounts, closed_accounts)] {
        for (who, gpu_s) in closed {
            *table.entry(who).or_default() += gpu_s;
        }
    }
    let mut table = |m: BTreeMap<String, f64>| -> Vec<c::Usage> {
        m.into_iter()
            .map(|(who, gpu_seconds)| c::Usage {
                who: strings.intern(&who),
                gpu_seconds,
            })
            .collect()
    };
    (table(users), table(accounts))
}

/// GPUs held now per user and per account.
fn gpus_in_use<'a>(
    jobs: impl Iterator<Item = &'a JobRecord>,
    strings: &mut Interner,
) -> (Vec<c::GpuUse>, Vec<c::GpuUse>) {
    let (users, accounts) = per_user_and_account(
        jobs.filter(|j| j.state == JobState::Running)
            .map(|j| (j, j.gpu_milli_held())),
    );
    let mut table = |m: BTreeMap<String, u64>| -> Vec<c::GpuUse> {
        m.into_iter()
            .map(|(who, gpu_milli)| c::GpuUse {
                who: strings.intern(&who),
                gpu_milli,
            })
            .collect()
    };
    (table(users), table(accounts))
}

/// Sums `(job, amount)` per user and per account.
fn per_user_and_account<'a, T: Default + std::ops::AddAssign + Copy>(
    items: impl Iterator<Item = (&'a JobRecord, T)>,
) -> (BTreeMap<String, T>, BTreeMap<String, T>) {
    let mut users: BTreeMap<String, T> = BTreeMap::new();
    let mut accounts: BTreeMap<String, T> = BTreeMap::new();
    for (j, v) in items {
        *users.entry(j.spec.user.clone()).or_default() += v;
        *accounts.entry(j.spec.account.clone()).or_default() += v;
    }
    (users, accounts)
}

/// GPUs in use (in all and per model of `models`) and jobs waiting, per queue
/// (quotas come with the quota plugin).
fn queues<'a>(
    jobs: impl Iterator<Item = &'a JobRecord>,
    nodes: &NodeList<'_>,
    models: &Models,
    strings: &mut Interner,
) -> Vec<c::QueueStatus> {
    let mut q: BTreeMap<String, c::QueueStatus> = BTreeMap::new();
    let model_of = |node: &str, index: u32| {
        nodes
            .iter()
            .find(|(_, n)| n.name == node)
            .and_then(|(_, n)| n.gpus.iter().find(|g| g.index == index))
            .and_then(|g| models.names.iter().position(|m| *m == g.model))
    };
    for j in jobs {
        // Looked up by reference first: no allocation per job of a large backlog.
        if !q.contains_key(j.spec.queue.as_str()) {
            q.insert(
                j.spec.queue.clone(),
                c::QueueStatus {
                    gpu_milli_used_by_model: vec![0; models.names.len()],
                    ..Default::default()
                },
            );
        }
        let Some(e) = q.get_mut(j.spec.queue.as_str()) else {
            continue;
        };
        match j.state {
            JobState::Running => {
                e.gpu_milli_used += j.gpu_milli_held();
                for (t, share) in j
                    .tasks
                    .iter()
                    .flat_map(|t| t.gpus.iter().map(move |g| (t, g)))
                {
                    if let Some(m) = model_of(&t.node, share.index) {
                        e.gpu_milli_used_by_model[m] += u64::from(share.milli);
                    }
                }
            }
            JobState::Pending => e.pending_jobs += 1,
            _ => {}
        }
    }
    q.into_iter()
        .map(|(name, mut status)| {
            status.queue = strings.intern(&name);
            status
        })
        .collect()
}

/// A cycle's snapshot of `jobs` on `nodes`: the context (usage, GPUs in use, queues,
/// totals), the nodes with what is free, every pending job and every running one.
pub fn build<'a>(
    jobs: impl Iterator<Item = &'a JobRecord> + Clone,
    nodes: &NodeList<'_>,
    cycle_id: u64,
    now_ms: u64,
    ledger: &Ledger,
) -> Snapshot {
    build_with_models(jobs, nodes, cycle_id, now_ms, ledger).0
}

/// [`build`], and the table of GPU models its jobs' masks were made with.
pub fn build_with_models<'a>(
    jobs: impl Iterator<Item = &'a JobRecord> + Clone,
    nodes: &NodeList<'_>,
    cycle_id: u64,
    now_ms: u64,
    ledger: &Ledger,
) -> (Snapshot, Models) {
    let Base {
        models,
        mut strings,
        gpu_models,
        running_records,
        nodes_c,
    } = Base::of(jobs.clone(), nodes);
    let pending: Vec<c::Job> = jobs
        .clone()
        .filter(|j| j.state == JobState::Pending)
        .map(|j| contract_job(j, &models, &mut strings))
        .collect();
    let running: Vec<c::RunningJob> = running_records
        .iter()
        .map(|j| {
            let start_ms = j.start_ms.unwrap_or(now_ms);
            let mut job = contract_job(j, &models, &mut strings);
            if let Some(usage) = job_gpu_usage(j) {
                for (key, value) in usage.to_label_values() {
                    job.labels.push(c::Label {
                        key: strings.intern(key),
                        value: strings.intern(&value),
                    });
                }
            }
            c::RunningJob {
                job,
                tasks: j.tasks.iter().map(|t| allocation(t, nodes)).collect(),
                start_ms,
                expected_end_ms: (j.spec.time_limit_s > 0)
                    .then(|| start_ms + j.spec.time_limit_s * 1000),
                score: j.score,
                revision: 0,
            }
        })
        .collect();
    let evicting = running_records
        .iter()
        .filter_map(|j| match j.stopping {
            Some(StopCause::Evicted { for_job }) => Some(EvictionInProgress { job: j.id, for_job }),
            _ => None,
        })
        .collect();
    let on = Cluster {
        nodes,
        nodes_c: &nodes_c,
        models: &models,
        cycle_id,
        now_ms,
        ledger,
    };
    let ctx = cycle_context(jobs.clone(), jobs, &on, gpu_models, &mut strings);
    let mut snap = Snapshot {
        ctx,
        pending,
        nodes: nodes_c,
        running,
        evicting,
    };
    snap.ctx.strings = strings.into_strings();
    (snap, models)
}

/// What a submit reads of a snapshot, without converting every pending and running job
/// (`build` does, for a cycle): the context, its strings included, the nodes with what is
/// free, and the models (to convert the submitted job with). `running` are the running jobs
/// and the submitted one (models, usage, what nodes have free); `active` every job not
/// ended, walked once for the queues' pending counts, so a submit into a large backlog costs
/// one cheap pass over it.
pub fn submit_context<'a>(
    running: impl Iterator<Item = &'a JobRecord> + Clone,
    active: impl Iterator<Item = &'a JobRecord>,
    nodes: &NodeList<'_>,
    cycle_id: u64,
    now_ms: u64,
    ledger: &Ledger,
) -> (c::Cycle, Vec<c::Node>, Models) {
    let Base {
        models,
        mut strings,
        gpu_models,
        nodes_c,
        ..
    } = Base::of(running.clone(), nodes);
    let on = Cluster {
        nodes,
        nodes_c: &nodes_c,
        models: &models,
        cycle_id,
        now_ms,
        ledger,
    };
    let mut ctx = cycle_context(running, active, &on, gpu_models, &mut strings);
    ctx.strings = strings.into_strings();
    (ctx, nodes_c, models)
}

/// What a cycle's snapshot and a submit's context both start from, interned in this order:
/// the GPU models, then the nodes with what is free.
struct Base<'a> {
    models: Models,
    strings: Interner,
    gpu_models: Vec<c::Symbol>,
    running_records: Vec<&'a JobRecord>,
    nodes_c: Vec<c::Node>,
}

impl<'a> Base<'a> {
    fn of(jobs: impl Iterator<Item = &'a JobRecord> + Clone, nodes: &NodeList<'_>) -> Self {
        let models = Models::new(nodes, jobs.clone());
        let mut strings = Interner::new();
        let gpu_models: Vec<c::Symbol> = models.names.iter().map(|m| strings.intern(m)).collect();
        let running_records: Vec<&JobRecord> =
            jobs.filter(|j| j.state == JobState::Running).collect();
        let nodes_c: Vec<c::Node> = nodes
            .iter()
            .map(|(id, n)| node_view(*id, n, &mut strings, &running_records))
            .collect();
        Self {
            models,
            strings,
            gpu_models,
            running_records,
            nodes_c,
        }
    }
}

/// The cluster a context is computed on.
struct Cluster<'n, 'i> {
    nodes: &'n NodeList<'i>,
    nodes_c: &'n [c::Node],
    models: &'n Models,
    cycle_id: u64,
    now_ms: u64,
    ledger: &'n Ledger,
}

/// The context of a cycle (its strings still in `strings`): totals of `on`'s nodes, decayed
/// usage, GPUs in use and queue status over `jobs`.
/// The context over `running` (usage and GPUs in use: only its running jobs count) and
/// `active` (the queues: its jobs not ended).
fn cycle_context<'a>(
    running: impl Iterator<Item = &'a JobRecord> + Clone,
    active: impl Iterator<Item = &'a JobRecord>,
    on: &Cluster<'_, '_>,
    gpu_models: Vec<c::Symbol>,
    strings: &mut Interner,
) -> c::Cycle {
    let nodes_c = on.nodes_c;
    let totals = c::ClusterTotals {
        nodes: nodes_c.len() as u32,
        gpu_milli_total: nodes_c
            .iter()
            .map(|n| n.gpus.len() as u64 * u64::from(c::MILLI_PER_GPU))
            .sum(),
        gpu_milli_free: nodes_c
            .iter()
            .flat_map(|n| &n.gpus)
            .map(|g| u64::from(g.free_milli))
            .sum(),
        cpu_milli_total: nodes_c.iter().map(|n| u64::from(n.cpu_milli_total)).sum(),
        memory_mib_total: nodes_c.iter().map(|n| n.memory_mib_total).sum(),
    };
    let (user_usage, account_usage) = usage(running.clone(), on.now_ms, on.ledger, strings);
    let (user_gpus, account_gpus) = gpus_in_use(running, strings);
    let queues = queues(
        active.filter(|j| !j.state.is_terminal()),
        on.nodes,
        on.models,
        strings,
    );
    c::Cycle {
        id: on.cycle_id,
        now_ms: on.now_ms,
        seed: on.cycle_id,
        strings: Vec::new(),
        gpu_models,
        user_usage,
        account_usage,
        user_gpus,
        account_gpus,
        queues,
        totals,
        // Interned anew each cycle: compared string by string.
        strings_lineage: 0,
    }
}

#[cfg(test)]
mod tests;
