//! The wasm32 side of the SDK for the incremental contracts, 0.3 (`wit/0.3.0/`, the
//! default) and 0.2 (`wit/0.2.0/`, feature `contract-0-2`), which differ only in
//! `gpu.parent`: WIT bindings, the
//! exporter, and the mirror that keeps what the host sent so that each call carries only
//! what changed (`gantry_contract::delta::apply`). The author's stage traits are the same
//! as for 0.1: the mirror rebuilds `&[Job]`, `&[Node]` and `&[RunningJob]` by moves and
//! hands them over; the author never sees a delta. A plugin that keeps derived state may
//! read each call's `keep` vectors through [`crate::changes`].
//!
//! Only compiled for `target_arch = "wasm32"`; plugin authors never touch it.
#![allow(missing_docs, unsafe_code)]

use crate::DynPlugin;
use crate::changes::{Changes, during};
use crate::wasm_instance::{not_implemented, with_plugin};
use gantry_contract as c;
use gantry_contract::delta::apply;
use gantry_contract::wit_convert::vec_into;
use std::cell::RefCell;
use std::marker::PhantomData;

#[cfg(not(feature = "contract-0-2"))]
wit_bindgen::generate!({
    path: "../../wit/0.3.0",
    world: "full-plugin",
    pub_export_macro: true,
    export_macro_name: "__export_full_plugin_delta",
    default_bindings_module: "gantry_sdk::wasm_delta",
});

#[cfg(feature = "contract-0-2")]
wit_bindgen::generate!({
    path: "../../wit/0.2.0",
    world: "full-plugin",
    pub_export_macro: true,
    export_macro_name: "__export_full_plugin_delta",
    default_bindings_module: "gantry_sdk::wasm_delta",
});

use exports::gantry::policy::{admission, placement, plugin, preemption, priority};
use gantry::policy::{host, types as w};

#[cfg(not(feature = "contract-0-2"))]
gantry_contract::wit_conversions! {
    types: w,
    host: host,
    plugin: plugin,
    admission: admission,
    priority: priority,
    placement: placement,
    preemption: preemption,
    answers: flat,
    since_0_3: present,
}

#[cfg(feature = "contract-0-2")]
gantry_contract::wit_conversions! {
    types: w,
    host: host,
    plugin: plugin,
    admission: admission,
    priority: priority,
    placement: placement,
    preemption: preemption,
    answers: flat,
    since_0_3: absent,
}

/// What the host sent, per argument: each list as of this plugin's previous call.
#[derive(Default)]
struct Mirror {
    generation: u64,
    strings: Vec<String>,
    admit_jobs: Vec<c::Job>,
    score_jobs: Vec<c::Job>,
    place_jobs: Vec<c::Job>,
    place_nodes: Vec<c::Node>,
    place_running: Vec<c::RunningJob>,
    preempt_blocked: Vec<c::Job>,
    preempt_nodes: Vec<c::Node>,
    preempt_running: Vec<c::RunningJob>,
}

thread_local! {
    static MIRROR: RefCell<Mirror> = RefCell::new(Mirror::default());
}

/// Brings the mirror to `sync`'s call (or fails: the host resends in full) and gives the
/// context with the whole string table and whether the deltas are relative to this
/// instance's previous call (`false` for a full resend); `f` applies the deltas and calls
/// the plugin.
fn with_mirror<R>(
    ctx: w::Cycle,
    sync: w::SyncPoint,
    f: impl FnOnce(&mut Mirror, &c::Cycle, bool) -> Result<R, String>,
) -> Result<R, String> {
    MIRROR.with(|cell| {
        let mut m = cell.borrow_mut();
        let incremental = sync.base != 0;
        if sync.base == 0 {
            *m = Mirror::default();
        } else if sync.base != m.generation {
            let have = m.generation;
            *m = Mirror::default();
            return Err(format!(
                "the plugin's mirror is at call {have}, the host sent a delta from call {}: resend in full",
                sync.base
            ));
        }
        let mut ctx = c::Cycle::from(ctx);
        m.strings.append(&mut ctx.strings);
        ctx.strings = std::mem::take(&mut m.strings);
        let r = f(&mut m, &ctx, incremental);
        m.strings = ctx.strings;
        match r {
            Ok(v) => {
                m.generation = sync.generation;
                Ok(v)
            }
            Err(e) => {
                // The host resends in full after any error; forget everything now.
                *m = Mirror::default();
                Err(e)
            }
        }
    })
}

// Each applies one delta and gives back its `keep`, the plugin's hint (`changes.rs`).

fn jobs(list: &mut Vec<c::Job>, d: w::JobDelta) -> Result<Vec<u32>, String> {
    apply(list, &d.keep, d.fresh.into()).map(|()| d.keep)
}

fn nodes(list: &mut Vec<c::Node>, d: w::NodeDelta) -> Result<Vec<u32>, String> {
    apply(list, &d.keep, d.fresh.into()).map(|()| d.keep)
}

fn running(list: &mut Vec<c::RunningJob>, d: w::RunningDelta) -> Result<Vec<u32>, String> {
    apply(list, &d.keep, d.fresh.into()).map(|()| d.keep)
}

/// The hint of a call: the lists' `keep` vectors when the deltas are relative to this
/// instance's previous call of the stage.
fn hint(incremental: bool, jobs: Vec<u32>, nodes: Vec<u32>, running: Vec<u32>) -> Option<Changes> {
    incremental.then_some(Changes {
        jobs,
        nodes,
        running,
    })
}

pub(crate) fn log(level: c::LogLevel, message: &str) {
    host::log(level.into(), message);
}

/// Routes the component's exports to the plugin of type `T`.
pub struct Exporter<T>(PhantomData<T>);

impl<T: DynPlugin + Default + 'static> plugin::Guest for Exporter<T> {
    fn metadata() -> plugin::PluginInfo {
        with_plugin::<T, _>(|p| p.metadata()).into()
    }

    fn configure(config: String) -> Result<(), String> {
        with_plugin::<T, _>(|p| p.configure(&config))
    }
}

impl<T: DynPlugin + Default + 'static> admission::Guest for Exporter<T> {
    fn check_submit(
        ctx: w::Cycle,
        sync: w::SyncPoint,
        job: w::JobList,
    ) -> Result<admission::SubmitVerdict, String> {
        with_mirror(ctx, sync, |_, ctx, _| {
            let Some(job) = Vec::<c::Job>::from(job).into_iter().next() else {
                return Err("check-submit got no job".into());
            };
            with_plugin::<T, _>(|p| match p.as_admission() {
                Some(s) => s.check_submit(ctx, &job).map(Into::into),
                None => Err(not_implemented("admission")),
            })
        })
    }

    fn admit(
        ctx: w::Cycle,
        sync: w::SyncPoint,
        delta: w::JobDelta,
    ) -> Result<Vec<admission::Verdict>, String> {
        with_mirror(ctx, sync, |m, ctx, incremental| {
            let kept = jobs(&mut m.admit_jobs, delta)?;
            during(hint(incremental, kept, vec![], vec![]), || {
                with_plugin::<T, _>(|p| match p.as_admission() {
                    Some(s) => s.admit(ctx, &m.admit_jobs).map(vec_into),
                    None => Err(not_implemented("admission")),
                })
            })
        })
    }
}

impl<T: DynPlugin + Default + 'static> priority::Guest for Exporter<T> {
    fn score(
        ctx: w::Cycle,
        sync: w::SyncPoint,
        delta: w::JobDelta,
        previous: Vec<f64>,
    ) -> Result<priority::Scores, String> {
        with_mirror(ctx, sync, |m, ctx, incremental| {
            let kept = jobs(&mut m.score_jobs, delta)?;
            during(hint(incremental, kept, vec![], vec![]), || {
                with_plugin::<T, _>(|p| match p.as_priority() {
                    Some(s) => s.score(ctx, &m.score_jobs, &previous).map(Into::into),
                    None => Err(not_implemented("priority")),
                })
            })
        })
    }
}

impl<T: DynPlugin + Default + 'static> placement::Guest for Exporter<T> {
    fn place(
        ctx: w::Cycle,
        sync: w::SyncPoint,
        job_delta: w::JobDelta,
        node_delta: w::NodeDelta,
        running_delta: w::RunningDelta,
    ) -> Result<placement::Placed, String> {
        with_mirror(ctx, sync, |m, ctx, incremental| {
            let kept_jobs = jobs(&mut m.place_jobs, job_delta)?;
            let kept_nodes = nodes(&mut m.place_nodes, node_delta)?;
            let kept_running = running(&mut m.place_running, running_delta)?;
            during(
                hint(incremental, kept_jobs, kept_nodes, kept_running),
                || {
                    with_plugin::<T, _>(|p| match p.as_placement() {
                        Some(s) => s
                            .place(ctx, &m.place_jobs, &m.place_nodes, &m.place_running)
                            .map(Into::into),
                        None => Err(not_implemented("placement")),
                    })
                },
            )
        })
    }
}

impl<T: DynPlugin + Default + 'static> preemption::Guest for Exporter<T> {
    fn preempt(
        ctx: w::Cycle,
        sync: w::SyncPoint,
        blocked_delta: w::JobDelta,
        blocked_scores: Vec<f64>,
        node_delta: w::NodeDelta,
        running_delta: w::RunningDelta,
    ) -> Result<Vec<preemption::Eviction>, String> {
        with_mirror(ctx, sync, |m, ctx, incremental| {
            let kept_jobs = jobs(&mut m.preempt_blocked, blocked_delta)?;
            let kept_nodes = nodes(&mut m.preempt_nodes, node_delta)?;
            let kept_running = running(&mut m.preempt_running, running_delta)?;
            let changes = hint(incremental, kept_jobs, kept_nodes, kept_running);
            during(changes, || {
                with_plugin::<T, _>(|p| match p.as_preemption() {
                    Some(s) => s
                        .preempt(
                            ctx,
                            &m.preempt_blocked,
                            &blocked_scores,
                            &m.preempt_nodes,
                            &m.preempt_running,
                        )
                        .map(vec_into),
                    None => Err(not_implemented("preemption")),
                })
            })
        })
    }
}
