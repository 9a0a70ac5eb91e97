//! The wasm32 side of the SDK: WIT bindings for `gantry:policy/full-plugin`, the
//! generic exporter that routes each export to the registered plugin, and the
//! conversions between the generated types and `gantry-contract`'s.
//!
//! Only compiled for `target_arch = "wasm32"`; plugin authors never touch it.
#![allow(missing_docs, unsafe_code)]

use crate::DynPlugin;
use gantry_contract as c;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

wit_bindgen::generate!({
    path: "../../wit/0.1.0",
    world: "full-plugin",
    pub_export_macro: true,
    export_macro_name: "__export_full_plugin",
    default_bindings_module: "gantry_sdk::wasm",
});

use exports::gantry::policy::{admission, placement, plugin, preemption, priority};
use gantry::policy::{host, types as w};

/// Routes the component's exports to the plugin of type `T`.
pub struct Exporter<T>(PhantomData<T>);

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Runs `f` on the one instance of `T`, making it on first use.
fn with_plugin<T: DynPlugin + Default + 'static, R>(f: impl FnOnce(&mut T) -> R) -> R {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let any = slot.get_or_insert_with(|| Box::new(T::default()));
        match any.downcast_mut::<T>() {
            Some(p) => f(p),
            None => {
                *any = Box::new(T::default());
                f(any.downcast_mut::<T>().unwrap_or_else(|| unreachable!()))
            }
        }
    })
}

fn not_implemented(stage: &str) -> String {
    format!("this plugin does not implement the {stage} stage")
}

pub(crate) fn log(level: c::LogLevel, message: &str) {
    let level = match level {
        c::LogLevel::Trace => host::Level::Trace,
        c::LogLevel::Debug => host::Level::Debug,
        c::LogLevel::Info => host::Level::Info,
        c::LogLevel::Warn => host::Level::Warn,
        c::LogLevel::Error => host::Level::Error,
    };
    host::log(level, message);
}

impl<T: DynPlugin + Default + 'static> plugin::Guest for Exporter<T> {
    fn metadata() -> plugin::PluginInfo {
        let m = with_plugin::<T, _>(|p| p.metadata());
        plugin::PluginInfo {
            name: m.name,
            version: m.version,
            contract: m.contract,
            stages: m.stages.into_iter().map(stage_out).collect(),
            config_hint: m.config_hint,
        }
    }

    fn configure(config: String) -> Result<(), String> {
        with_plugin::<T, _>(|p| p.configure(&config))
    }
}

impl<T: DynPlugin + Default + 'static> admission::Guest for Exporter<T> {
    fn check_submit(ctx: w::Cycle, job: w::JobList) -> Result<admission::SubmitVerdict, String> {
        let ctx = cycle_in(ctx);
        let Some(job) = jobs_in(job).into_iter().next() else {
            return Err("check-submit got no job".into());
        };
        with_plugin::<T, _>(|p| match p.as_admission() {
            Some(s) => s.check_submit(&ctx, &job).map(submit_verdict_out),
            None => Err(not_implemented("admission")),
        })
    }

    fn admit(ctx: w::Cycle, jobs: w::JobList) -> Result<Vec<admission::Verdict>, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs_in(jobs);
        with_plugin::<T, _>(|p| match p.as_admission() {
            Some(s) => s
                .admit(&ctx, &jobs)
                .map(|v| v.into_iter().map(verdict_out).collect()),
            None => Err(not_implemented("admission")),
        })
    }
}

impl<T: DynPlugin + Default + 'static> priority::Guest for Exporter<T> {
    fn score(
        ctx: w::Cycle,
        jobs: w::JobList,
        previous: Vec<f64>,
    ) -> Result<Vec<priority::Scored>, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs_in(jobs);
        with_plugin::<T, _>(|p| match p.as_priority() {
            Some(s) => s.score(&ctx, &jobs, &previous).map(|v| {
                v.into_iter()
                    .map(|x| priority::Scored {
                        score: x.score,
                        tier: x.tier,
                        note: x.note,
                    })
                    .collect()
            }),
            None => Err(not_implemented("priority")),
        })
    }
}

impl<T: DynPlugin + Default + 'static> placement::Guest for Exporter<T> {
    fn place(
        ctx: w::Cycle,
        jobs: w::JobList,
        nodes: w::NodeList,
        running: w::RunningList,
    ) -> Result<placement::Plan, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs_in(jobs);
        let nodes: Vec<c::Node> = nodes_in(nodes);
        let running: Vec<c::RunningJob> = running_in(running);
        with_plugin::<T, _>(|p| match p.as_placement() {
            Some(s) => s.place(&ctx, &jobs, &nodes, &running).map(plan_out),
            None => Err(not_implemented("placement")),
        })
    }
}

impl<T: DynPlugin + Default + 'static> preemption::Guest for Exporter<T> {
    fn preempt(
        ctx: w::Cycle,
        blocked: w::JobList,
        blocked_scores: Vec<f64>,
        nodes: w::NodeList,
        running: w::RunningList,
    ) -> Result<Vec<preemption::Eviction>, String> {
        let ctx = cycle_in(ctx);
        let blocked: Vec<c::Job> = jobs_in(blocked);
        let nodes: Vec<c::Node> = nodes_in(nodes);
        let running: Vec<c::RunningJob> = running_in(running);
        with_plugin::<T, _>(|p| match p.as_preemption() {
            Some(s) => s
                .preempt(&ctx, &blocked, &blocked_scores, &nodes, &running)
                .map(|v| {
                    v.into_iter()
                        .map(|e| preemption::Eviction {
                            job: e.job,
                            for_job: e.for_job,
                            reason: reason_out(e.reason),
                            grace_s: e.grace_s,
                        })
                        .collect()
                }),
            None => Err(not_implemented("preemption")),
        })
    }
}

fn stage_out(s: c::Stage) -> plugin::Stage {
    match s {
        c::Stage::Admission => plugin::Stage::Admission,
        c::Stage::Priority => plugin::Stage::Priority,
        c::Stage::Placement => plugin::Stage::Placement,
        c::Stage::Preemption => plugin::Stage::Preemption,
    }
}

fn cycle_in(x: w::Cycle) -> c::Cycle {
    let usage = |v: Vec<w::Usage>| {
        v.into_iter()
            .map(|u| c::Usage {
                who: u.who,
                gpu_seconds: u.gpu_seconds,
            })
            .collect()
    };
    c::Cycle {
        id: x.id,
        now_ms: x.now_ms,
        seed: x.seed,
        strings: x.strings,
        gpu_models: x.gpu_models,
        user_usage: usage(x.user_usage),
        account_usage: usage(x.account_usage),
        user_gpus: x
            .user_gpus
            .iter()
            .map(|u| c::GpuUse {
                who: u.who,
                gpu_milli: u.gpu_milli,
            })
            .collect(),
        account_gpus: x
            .account_gpus
            .iter()
            .map(|u| c::GpuUse {
                who: u.who,
                gpu_milli: u.gpu_milli,
            })
            .collect(),
        queues: x
            .queues
            .into_iter()
            .map(|q| c::QueueStatus {
                queue: q.queue,
                gpu_milli_quota: q.gpu_milli_quota,
                gpu_milli_used: q.gpu_milli_used,
                pending_jobs: q.pending_jobs,
                gpu_milli_used_by_model: q.gpu_milli_used_by_model,
            })
            .collect(),
        totals: c::ClusterTotals {
            nodes: x.totals.nodes,
            gpu_milli_total: x.totals.gpu_milli_total,
            gpu_milli_free: x.totals.gpu_milli_free,
            cpu_milli_total: x.totals.cpu_milli_total,
            memory_mib_total: x.totals.memory_mib_total,
        },
    }
}

fn label_in(l: &w::Label) -> c::Label {
    c::Label {
        key: l.key,
        value: l.value,
    }
}

fn group_in(t: &w::TaskGroup) -> c::TaskGroup {
    c::TaskGroup {
        count: t.count,
        gpus: t.gpus,
        gpu_milli: t.gpu_milli,
        cpu_milli: t.cpu_milli,
        memory_mib: t.memory_mib,
        gpu_model_mask: t.gpu_model_mask,
    }
}

/// `items[first .. first + count]`, or empty when the host sent an out-of-range span.
fn span<T>(items: &[T], first: u32, count: u32) -> &[T] {
    let (first, count) = (first as usize, count as usize);
    items.get(first..first.saturating_add(count)).unwrap_or(&[])
}

/// Rebuilds nested jobs from the flat job list (allocations stay inside the guest).
fn jobs_in(l: w::JobList) -> Vec<c::Job> {
    l.jobs
        .iter()
        .map(|x| c::Job {
            id: x.id,
            name: x.name,
            user: x.user,
            account: x.account,
            queue: x.queue,
            tier: x.tier,
            submit_ms: x.submit_ms,
            time_limit_s: x.time_limit_s,
            kind: match x.kind {
                w::JobKind::Batch => c::JobKind::Batch,
                w::JobKind::Interactive => c::JobKind::Interactive,
                w::JobKind::Service => c::JobKind::Service,
            },
            preemptible: x.preemptible,
            labels: span(&l.labels, x.first_label, x.label_count)
                .iter()
                .map(label_in)
                .collect(),
            tasks: span(&l.groups, x.first_group, x.group_count)
                .iter()
                .map(group_in)
                .collect(),
        })
        .collect()
}

fn nodes_in(l: w::NodeList) -> Vec<c::Node> {
    l.nodes
        .iter()
        .map(|x| c::Node {
            id: x.id,
            name: x.name,
            state: match x.state {
                w::NodeState::Up => c::NodeState::Up,
                w::NodeState::Draining => c::NodeState::Draining,
                w::NodeState::Down => c::NodeState::Down,
            },
            labels: span(&l.labels, x.first_label, x.label_count)
                .iter()
                .map(label_in)
                .collect(),
            cpu_milli_total: x.cpu_milli_total,
            cpu_milli_free: x.cpu_milli_free,
            memory_mib_total: x.memory_mib_total,
            memory_mib_free: x.memory_mib_free,
            gpus: span(&l.gpus, x.first_gpu, x.gpu_count)
                .iter()
                .map(|g| c::Gpu {
                    index: g.index,
                    model: g.model,
                    memory_mib: g.memory_mib,
                    free_milli: g.free_milli,
                    healthy: g.healthy,
                })
                .collect(),
        })
        .collect()
}

fn running_in(l: w::RunningList) -> Vec<c::RunningJob> {
    let w::RunningList {
        jobs,
        running,
        tasks,
        shares,
    } = l;
    jobs_in(jobs)
        .into_iter()
        .zip(running)
        .map(|(job, r)| c::RunningJob {
            job,
            tasks: span(&tasks, r.first_task, r.task_count)
                .iter()
                .map(|t| c::TaskAllocation {
                    node: t.node,
                    gpus: span(&shares, t.first_share, t.share_count)
                        .iter()
                        .map(|s| c::GpuShare {
                            index: s.index,
                            milli: s.milli,
                        })
                        .collect(),
                    cpu_milli: t.cpu_milli,
                    memory_mib: t.memory_mib,
                })
                .collect(),
            start_ms: r.start_ms,
            expected_end_ms: r.expected_end_ms,
            score: r.score,
        })
        .collect()
}

fn alloc_out(a: c::TaskAllocation) -> w::TaskAllocation {
    w::TaskAllocation {
        node: a.node,
        gpus: a
            .gpus
            .into_iter()
            .map(|s| w::GpuShare {
                index: s.index,
                milli: s.milli,
            })
            .collect(),
        cpu_milli: a.cpu_milli,
        memory_mib: a.memory_mib,
    }
}

fn reason_out(r: c::Reason) -> w::Reason {
    let code = match r.code {
        c::ReasonCode::HeldByPolicy => w::ReasonCode::HeldByPolicy,
        c::ReasonCode::InsufficientGpus => w::ReasonCode::InsufficientGpus,
        c::ReasonCode::InsufficientCpu => w::ReasonCode::InsufficientCpu,
        c::ReasonCode::InsufficientMemory => w::ReasonCode::InsufficientMemory,
        c::ReasonCode::GpuModelUnavailable => w::ReasonCode::GpuModelUnavailable,
        c::ReasonCode::BlockedByHigherPriority => w::ReasonCode::BlockedByHigherPriority,
        c::ReasonCode::WaitingForPreemption => w::ReasonCode::WaitingForPreemption,
        c::ReasonCode::Preempted => w::ReasonCode::Preempted,
        c::ReasonCode::Other => w::ReasonCode::Other,
    };
    w::Reason {
        code,
        message: r.message,
    }
}

fn submit_verdict_out(v: c::SubmitVerdict) -> admission::SubmitVerdict {
    match v {
        c::SubmitVerdict::Accept => admission::SubmitVerdict::Accept,
        c::SubmitVerdict::Reject(m) => admission::SubmitVerdict::Reject(m),
        c::SubmitVerdict::AcceptWith(p) => {
            admission::SubmitVerdict::AcceptWith(admission::JobPatch {
                queue: p.queue,
                tier: p.tier,
                time_limit_s: p.time_limit_s,
                preemptible: p.preemptible,
                labels: p.labels,
            })
        }
    }
}

fn verdict_out(v: c::Verdict) -> admission::Verdict {
    match v {
        c::Verdict::Admit => admission::Verdict::Admit,
        c::Verdict::Hold(r) => admission::Verdict::Hold(reason_out(r)),
    }
}

fn plan_out(p: c::Plan) -> placement::Plan {
    placement::Plan {
        starts: p
            .starts
            .into_iter()
            .map(|s| placement::Start {
                job: s.job,
                tasks: s.tasks.into_iter().map(alloc_out).collect(),
            })
            .collect(),
        pending: p
            .pending
            .into_iter()
            .map(|x| placement::Pending {
                job: x.job,
                reason: reason_out(x.reason),
            })
            .collect(),
        stopped_at: p.stopped_at,
    }
}
