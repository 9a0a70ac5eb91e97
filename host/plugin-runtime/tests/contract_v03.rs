//! Contract 0.3 (`wit/0.3.0/README.md`): a MIG slice names its GPU. The built-in
//! `first-fit` as a 0.3 component packs slices onto the GPU already in use, as its native
//! build does, call after call (the parent travels in the deltas too); the same crate built
//! as a 0.2 component still loads and places slices, without parents, by index.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{Cycle, Gpu, Job, Node, NodeState, Placement, Plan, TaskGroup};
use gantry_plugin_runtime::{Limits, PluginInstance, Runtime, RuntimeOptions};

fn ctx(id: u64) -> Cycle {
    Cycle {
        id,
        now_ms: 1_000 * id,
        strings: vec!["3g.40gb".into()],
        gpu_models: vec![0],
        ..Default::default()
    }
}

/// One node with two GPUs in MIG mode, two `3g.40gb` slices each (`1000 + 10 × GPU +
/// slot`); the slices in `taken` are in use.
fn node(taken: &[u32]) -> Node {
    let slice = |index: u32| Gpu {
        index,
        model: 0,
        memory_mib: 40_960,
        free_milli: if taken.contains(&index) { 0 } else { 1000 },
        healthy: true,
        parent: Some((index - 1000) / 10),
    };
    Node {
        id: 0,
        state: NodeState::Up,
        cpu_milli_total: 32_000,
        cpu_milli_free: 32_000,
        memory_mib_total: 256_000,
        memory_mib_free: 256_000,
        gpus: [1000, 1001, 1010, 1011].into_iter().map(slice).collect(),
        ..Default::default()
    }
}

fn slice_job(id: u64) -> Job {
    Job {
        id,
        submit_ms: 1,
        tasks: vec![TaskGroup {
            count: 1,
            gpus: 1,
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu_model_mask: 1,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn instance(bytes: &[u8]) -> Box<PluginInstance> {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    Box::new(
        rt.load(bytes)
            .unwrap()
            .instantiate("{}", Limits::default())
            .unwrap(),
    )
}

/// The slice each started job got.
fn slices(plan: &Plan) -> Vec<u32> {
    plan.starts
        .iter()
        .flat_map(|s| &s.tasks)
        .flat_map(|t| &t.gpus)
        .map(|g| g.index)
        .collect()
}

#[test]
fn a_03_placement_packs_slices_onto_the_gpu_in_use_as_its_native_build_does() {
    let mut wasm = instance(comp::FIRST_FIT);
    assert_eq!(wasm.contract(), "0.3.0");
    let mut native =
        gantry_engine::Native::new(gantry_plugin_first_fit::FirstFit::default(), "{}").unwrap();

    // GPU 1 has slice 1011 in use: the new job takes 1010 (GPU 1), not 1000 (GPU 0, idle).
    let nodes = node(&[1011]);
    let plan = wasm
        .place(&ctx(1), &[slice_job(1)], std::slice::from_ref(&nodes), &[])
        .unwrap();
    assert_eq!(slices(&plan), [1010]);
    assert_eq!(
        plan,
        native
            .place(&ctx(1), &[slice_job(1)], &[nodes], &[])
            .unwrap()
    );

    // The next call is a delta (the node changed): GPU 0 now has 1001 in use and GPU 1 is
    // idle, so the slice goes to GPU 0.
    let nodes = node(&[1001]);
    let plan = wasm
        .place(&ctx(2), &[slice_job(2)], std::slice::from_ref(&nodes), &[])
        .unwrap();
    assert_eq!(slices(&plan), [1000]);
    assert_eq!(
        plan,
        native
            .place(&ctx(2), &[slice_job(2)], &[nodes], &[])
            .unwrap()
    );
    assert!(wasm.mirror_stats().calls >= 2);
}

#[test]
fn a_02_placement_still_loads_and_places_slices_by_index_without_parents() {
    let mut v02 = instance(comp::FIRST_FIT_V02);
    assert_eq!(v02.contract(), "0.2.0");
    let plan = v02
        .place(&ctx(1), &[slice_job(1)], &[node(&[1011])], &[])
        .unwrap();
    // It cannot see that 1011 shares a GPU with 1010: the lowest free index wins.
    assert_eq!(slices(&plan), [1000]);
}
