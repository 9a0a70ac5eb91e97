//! Conversions between `gantry-contract`'s types and the types `bindgen!` generates:
//! inputs are lowered contract → WIT, outputs lifted WIT → contract.
//!
//! Owns nothing but field-by-field mapping; keep it in step with `wit/`.

use crate::bindings::{admission, placement, plugin, preemption, priority, wit};
use gantry_contract as c;

pub(crate) fn cycle(x: &c::Cycle) -> wit::Cycle {
    let usage = |v: &[c::Usage]| -> Vec<wit::Usage> {
        v.iter()
            .map(|u| wit::Usage {
                who: u.who,
                gpu_seconds: u.gpu_seconds,
            })
            .collect()
    };
    wit::Cycle {
        id: x.id,
        now_ms: x.now_ms,
        seed: x.seed,
        strings: x.strings.clone(),
        gpu_models: x.gpu_models.clone(),
        user_usage: usage(&x.user_usage),
        account_usage: usage(&x.account_usage),
        user_gpus: x
            .user_gpus
            .iter()
            .map(|u| wit::GpuUse {
                who: u.who,
                gpu_milli: u.gpu_milli,
            })
            .collect(),
        account_gpus: x
            .account_gpus
            .iter()
            .map(|u| wit::GpuUse {
                who: u.who,
                gpu_milli: u.gpu_milli,
            })
            .collect(),
        queues: x
            .queues
            .iter()
            .map(|q| wit::QueueStatus {
                queue: q.queue,
                gpu_milli_quota: q.gpu_milli_quota,
                gpu_milli_used: q.gpu_milli_used,
                pending_jobs: q.pending_jobs,
                gpu_milli_used_by_model: q.gpu_milli_used_by_model.clone(),
            })
            .collect(),
        totals: wit::ClusterTotals {
            nodes: x.totals.nodes,
            gpu_milli_total: x.totals.gpu_milli_total,
            gpu_milli_free: x.totals.gpu_milli_free,
            cpu_milli_total: x.totals.cpu_milli_total,
            memory_mib_total: x.totals.memory_mib_total,
        },
    }
}

fn u32_len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn push_job(x: &c::Job, out: &mut wit::JobList) {
    let (first_group, first_label) = (u32_len(out.groups.len()), u32_len(out.labels.len()));
    out.groups.extend(x.tasks.iter().map(|t| wit::TaskGroup {
        count: t.count,
        gpus: t.gpus,
        gpu_milli: t.gpu_milli,
        cpu_milli: t.cpu_milli,
        memory_mib: t.memory_mib,
        gpu_model_mask: t.gpu_model_mask,
    }));
    out.labels.extend(x.labels.iter().map(|l| wit::Label {
        key: l.key,
        value: l.value,
    }));
    out.jobs.push(wit::Job {
        id: x.id,
        name: x.name,
        user: x.user,
        account: x.account,
        queue: x.queue,
        tier: x.tier,
        submit_ms: x.submit_ms,
        time_limit_s: x.time_limit_s,
        kind: match x.kind {
            c::JobKind::Batch => wit::JobKind::Batch,
            c::JobKind::Interactive => wit::JobKind::Interactive,
            c::JobKind::Service => wit::JobKind::Service,
        },
        preemptible: x.preemptible,
        first_group,
        group_count: u32_len(x.tasks.len()),
        first_label,
        label_count: u32_len(x.labels.len()),
    });
}

/// Jobs as three flat lists (one guest allocation per list, not per job).
pub(crate) fn job_list<'a>(v: impl ExactSizeIterator<Item = &'a c::Job>) -> wit::JobList {
    let mut out = wit::JobList {
        jobs: Vec::with_capacity(v.len()),
        groups: Vec::with_capacity(v.len()),
        labels: Vec::new(),
    };
    for j in v {
        push_job(j, &mut out);
    }
    out
}

/// Nodes as three flat lists.
pub(crate) fn node_list(v: &[c::Node]) -> wit::NodeList {
    let mut out = wit::NodeList {
        nodes: Vec::with_capacity(v.len()),
        gpus: Vec::with_capacity(v.len() * 8),
        labels: Vec::new(),
    };
    for x in v {
        let (first_gpu, first_label) = (u32_len(out.gpus.len()), u32_len(out.labels.len()));
        out.gpus.extend(x.gpus.iter().map(|g| wit::Gpu {
            index: g.index,
            model: g.model,
            memory_mib: g.memory_mib,
            free_milli: g.free_milli,
            healthy: g.healthy,
        }));
        out.labels.extend(x.labels.iter().map(|l| wit::Label {
            key: l.key,
            value: l.value,
        }));
        out.nodes.push(wit::Node {
            id: x.id,
            name: x.name,
            state: match x.state {
                c::NodeState::Up => wit::NodeState::Up,
                c::NodeState::Draining => wit::NodeState::Draining,
                c::NodeState::Down => wit::NodeState::Down,
            },
            cpu_milli_total: x.cpu_milli_total,
            cpu_milli_free: x.cpu_milli_free,
            memory_mib_total: x.memory_mib_total,
            memory_mib_free: x.memory_mib_free,
            first_gpu,
            gpu_count: u32_len(x.gpus.len()),
            first_label,
            label_count: u32_len(x.labels.len()),
        });
    }
    out
}

/// Running jobs as flat lists.
pub(crate) fn running_list(v: &[c::RunningJob]) -> wit::RunningList {
    let mut out = wit::RunningList {
        jobs: job_list(v.iter().map(|r| &r.job)),
        running: Vec::with_capacity(v.len()),
        tasks: Vec::with_capacity(v.len()),
        shares: Vec::new(),
    };
    for r in v {
        let first_task = u32_len(out.tasks.len());
        for a in &r.tasks {
            let first_share = u32_len(out.shares.len());
            out.shares.extend(a.gpus.iter().map(|s| wit::GpuShare {
                index: s.index,
                milli: s.milli,
            }));
            out.tasks.push(wit::TaskSlot {
                node: a.node,
                first_share,
                share_count: u32_len(a.gpus.len()),
                cpu_milli: a.cpu_milli,
                memory_mib: a.memory_mib,
            });
        }
        out.running.push(wit::Running {
            start_ms: r.start_ms,
            expected_end_ms: r.expected_end_ms,
            score: r.score,
            first_task,
            task_count: u32_len(r.tasks.len()),
        });
    }
    out
}

fn alloc_in(a: wit::TaskAllocation) -> c::TaskAllocation {
    c::TaskAllocation {
        node: a.node,
        gpus: a
            .gpus
            .into_iter()
            .map(|s| c::GpuShare {
                index: s.index,
                milli: s.milli,
            })
            .collect(),
        cpu_milli: a.cpu_milli,
        memory_mib: a.memory_mib,
    }
}

fn reason_in(r: wit::Reason) -> c::Reason {
    let code = match r.code {
        wit::ReasonCode::HeldByPolicy => c::ReasonCode::HeldByPolicy,
        wit::ReasonCode::InsufficientGpus => c::ReasonCode::InsufficientGpus,
        wit::ReasonCode::InsufficientCpu => c::ReasonCode::InsufficientCpu,
        wit::ReasonCode::InsufficientMemory => c::ReasonCode::InsufficientMemory,
        wit::ReasonCode::GpuModelUnavailable => c::ReasonCode::GpuModelUnavailable,
        wit::ReasonCode::BlockedByHigherPriority => c::ReasonCode::BlockedByHigherPriority,
        wit::ReasonCode::WaitingForPreemption => c::ReasonCode::WaitingForPreemption,
        wit::ReasonCode::Preempted => c::ReasonCode::Preempted,
        wit::ReasonCode::Other => c::ReasonCode::Other,
    };
    c::Reason {
        code,
        message: r.message,
    }
}

pub(crate) fn metadata(m: plugin::PluginInfo) -> c::Metadata {
    c::Metadata {
        name: m.name,
        version: m.version,
        contract: m.contract,
        stages: m
            .stages
            .into_iter()
            .map(|s| match s {
                plugin::Stage::Admission => c::Stage::Admission,
                plugin::Stage::Priority => c::Stage::Priority,
                plugin::Stage::Placement => c::Stage::Placement,
                plugin::Stage::Preemption => c::Stage::Preemption,
            })
            .collect(),
        config_hint: m.config_hint,
    }
}

pub(crate) fn submit_verdict(v: admission::SubmitVerdict) -> c::SubmitVerdict {
    match v {
        admission::SubmitVerdict::Accept => c::SubmitVerdict::Accept,
        admission::SubmitVerdict::Reject(m) => c::SubmitVerdict::Reject(m),
        admission::SubmitVerdict::AcceptWith(p) => c::SubmitVerdict::AcceptWith(c::JobPatch {
            queue: p.queue,
            tier: p.tier,
            time_limit_s: p.time_limit_s,
            preemptible: p.preemptible,
            labels: p.labels,
        }),
    }
}

pub(crate) fn verdicts(v: Vec<admission::Verdict>) -> Vec<c::Verdict> {
    v.into_iter()
        .map(|x| match x {
            admission::Verdict::Admit => c::Verdict::Admit,
            admission::Verdict::Hold(r) => c::Verdict::Hold(reason_in(r)),
        })
        .collect()
}

pub(crate) fn scores(v: Vec<priority::Scored>) -> Vec<c::Scored> {
    v.into_iter()
        .map(|s| c::Scored {
            score: s.score,
            tier: s.tier,
            note: s.note,
        })
        .collect()
}

pub(crate) fn plan(p: placement::Plan) -> c::Plan {
    c::Plan {
        starts: p
            .starts
            .into_iter()
            .map(|s| c::Start {
                job: s.job,
                tasks: s.tasks.into_iter().map(alloc_in).collect(),
            })
            .collect(),
        pending: p
            .pending
            .into_iter()
            .map(|x| c::Pending {
                job: x.job,
                reason: reason_in(x.reason),
            })
            .collect(),
        stopped_at: p.stopped_at,
    }
}

pub(crate) fn evictions(v: Vec<preemption::Eviction>) -> Vec<c::Eviction> {
    v.into_iter()
        .map(|e| c::Eviction {
            job: e.job,
            for_job: e.for_job,
            reason: reason_in(e.reason),
            grace_s: e.grace_s,
        })
        .collect()
}
