//! The wasm32 side of the SDK for contract 0.1 (feature `contract-0-1`): WIT bindings for
//! `gantry:policy/full-plugin@0.1.0`, the
//! generic exporter that routes each export to the registered plugin, and the
//! conversions between the generated types and `gantry-contract`'s (expanded from the
//! one mapping the host also uses, `sdk/contract/src/wit_convert.rs`).
//!
//! Only compiled for `target_arch = "wasm32"`; plugin authors never touch it.
#![allow(missing_docs, unsafe_code)]

use crate::DynPlugin;
use crate::wasm_instance::{not_implemented, with_plugin};
use gantry_contract as c;
use gantry_contract::wit_convert::vec_into;
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

gantry_contract::wit_conversions! {
    types: w,
    host: host,
    plugin: plugin,
    admission: admission,
    priority: priority,
    placement: placement,
    preemption: preemption,
    answers: nested,
    since_0_3: absent,
}

/// Routes the component's exports to the plugin of type `T`.
pub struct Exporter<T>(PhantomData<T>);

pub(crate) fn log(level: c::LogLevel, message: &str) {
    host::log(level.into(), message);
}

impl<T: DynPlugin + Default + 'static> plugin::Guest for Exporter<T> {
    fn metadata() -> plugin::PluginInfo {
        with_plugin::<T, _>(|p| p.metadata()).into()
    }

    fn configure(config: String) -> Result<(), String> {
        with_plugin::<T, _>(|p| p.configure(&config))
    }
}

impl<T: DynPlugin + Default + 'static> admission::Guest for Exporter<T> {
    fn check_submit(ctx: w::Cycle, job: w::JobList) -> Result<admission::SubmitVerdict, String> {
        let ctx = c::Cycle::from(ctx);
        let Some(job) = Vec::<c::Job>::from(job).into_iter().next() else {
            return Err("check-submit got no job".into());
        };
        with_plugin::<T, _>(|p| match p.as_admission() {
            Some(s) => s.check_submit(&ctx, &job).map(Into::into),
            None => Err(not_implemented("admission")),
        })
    }

    fn admit(ctx: w::Cycle, jobs: w::JobList) -> Result<Vec<admission::Verdict>, String> {
        let ctx = c::Cycle::from(ctx);
        let jobs = Vec::<c::Job>::from(jobs);
        with_plugin::<T, _>(|p| match p.as_admission() {
            Some(s) => s.admit(&ctx, &jobs).map(vec_into),
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
        let ctx = c::Cycle::from(ctx);
        let jobs = Vec::<c::Job>::from(jobs);
        with_plugin::<T, _>(|p| match p.as_priority() {
            Some(s) => s.score(&ctx, &jobs, &previous).map(vec_into),
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
        let ctx = c::Cycle::from(ctx);
        let jobs = Vec::<c::Job>::from(jobs);
        let nodes = Vec::<c::Node>::from(nodes);
        let running = Vec::<c::RunningJob>::from(running);
        with_plugin::<T, _>(|p| match p.as_placement() {
            Some(s) => s.place(&ctx, &jobs, &nodes, &running).map(Into::into),
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
        let ctx = c::Cycle::from(ctx);
        let blocked = Vec::<c::Job>::from(blocked);
        let nodes = Vec::<c::Node>::from(nodes);
        let running = Vec::<c::RunningJob>::from(running);
        with_plugin::<T, _>(|p| match p.as_preemption() {
            Some(s) => s
                .preempt(&ctx, &blocked, &blocked_scores, &nodes, &running)
                .map(vec_into),
            None => Err(not_implemented("preemption")),
        })
    }
}
