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
    path: "../../wit",
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
    fn check_submit(ctx: w::Cycle, job: w::Job) -> Result<admission::SubmitVerdict, String> {
        let (ctx, job) = (cycle_in(ctx), job_in(job));
        with_plugin::<T, _>(|p| match p.as_admission() {
            Some(s) => s.check_submit(&ctx, &job).map(submit_verdict_out),
            None => Err(not_implemented("admission")),
        })
    }

    fn admit(ctx: w::Cycle, jobs: Vec<w::Job>) -> Result<Vec<admission::Verdict>, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs.into_iter().map(job_in).collect();
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
        jobs: Vec<w::Job>,
        previous: Vec<f64>,
    ) -> Result<Vec<priority::Scored>, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs.into_iter().map(job_in).collect();
        with_plugin::<T, _>(|p| match p.as_priority() {
            Some(s) => s.score(&ctx, &jobs, &previous).map(|v| {
                v.into_iter()
                    .map(|x| priority::Scored {
                        score: x.score,
                        tier: x.tier,
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
        jobs: Vec<w::Job>,
        nodes: Vec<w::Node>,
        running: Vec<w::RunningJob>,
    ) -> Result<placement::Plan, String> {
        let ctx = cycle_in(ctx);
        let jobs: Vec<c::Job> = jobs.into_iter().map(job_in).collect();
        let nodes: Vec<c::Node> = nodes.into_iter().map(node_in).collect();
        let running: Vec<c::RunningJob> = running.into_iter().map(running_in).collect();
        with_plugin::<T, _>(|p| match p.as_placement() {
            Some(s) => s.place(&ctx, &jobs, &nodes, &running).map(plan_out),
            None => Err(not_implemented("placement")),
        })
    }
}

impl<T: DynPlugin + Default + 'static> preemption::Guest for Exporter<T> {
    fn preempt(
        ctx: w::Cycle,
        blocked: Vec<w::Job>,
        blocked_scores: Vec<f64>,
        nodes: Vec<w::Node>,
        running: Vec<w::RunningJob>,
    ) -> Result<Vec<preemption::Eviction>, String> {
        let ctx = cycle_in(ctx);
        let blocked: Vec<c::Job> = blocked.into_iter().map(job_in).collect();
        let nodes: Vec<c::Node> = nodes.into_iter().map(node_in).collect();
        let running: Vec<c::RunningJob> = running.into_iter().map(running_in).collect();
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
        queues: x
            .queues
            .into_iter()
            .map(|q| c::QueueStatus {
                queue: q.queue,
                gpu_milli_quota: q.gpu_milli_quota,
                gpu_milli_used: q.gpu_milli_used,
                pending_jobs: q.pending_jobs,
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

fn labels_in(v: Vec<w::Label>) -> Vec<c::Label> {
    v.into_iter()
        .map(|l| c::Label {
            key: l.key,
            value: l.value,
        })
        .collect()
}

fn job_in(x: w::Job) -> c::Job {
    c::Job {
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
        labels: labels_in(x.labels),
        tasks: x
            .tasks
            .into_iter()
            .map(|t| c::TaskGroup {
                count: t.count,
                gpus: t.gpus,
                gpu_milli: t.gpu_milli,
                cpu_milli: t.cpu_milli,
                memory_mib: t.memory_mib,
                gpu_model_mask: t.gpu_model_mask,
            })
            .collect(),
    }
}

fn node_in(x: w::Node) -> c::Node {
    c::Node {
        id: x.id,
        name: x.name,
        state: match x.state {
            w::NodeState::Up => c::NodeState::Up,
            w::NodeState::Draining => c::NodeState::Draining,
            w::NodeState::Down => c::NodeState::Down,
        },
        labels: labels_in(x.labels),
        cpu_milli_total: x.cpu_milli_total,
        cpu_milli_free: x.cpu_milli_free,
        memory_mib_total: x.memory_mib_total,
        memory_mib_free: x.memory_mib_free,
        gpus: x
            .gpus
            .into_iter()
            .map(|g| c::Gpu {
                index: g.index,
                model: g.model,
                memory_mib: g.memory_mib,
                free_milli: g.free_milli,
                healthy: g.healthy,
            })
            .collect(),
    }
}

fn alloc_in(a: w::TaskAllocation) -> c::TaskAllocation {
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

fn running_in(x: w::RunningJob) -> c::RunningJob {
    c::RunningJob {
        job: job_in(x.job),
        tasks: x.tasks.into_iter().map(alloc_in).collect(),
        start_ms: x.start_ms,
        expected_end_ms: x.expected_end_ms,
        score: x.score,
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
    }
}
