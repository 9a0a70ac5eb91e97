//! The runtime against real components: the built-in plugins give the same answers
//! as their native builds, and hostile plugins fail with typed faults while the host
//! keeps working and the instance recovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{Cycle, Gpu, Job, Node, NodeState, Placement, Priority, TaskGroup};
use gantry_engine::FaultKind;
use gantry_plugin_runtime::{Limits, LoadError, Runtime, RuntimeOptions};
use std::time::Instant;

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).unwrap()
}

fn ctx() -> Cycle {
    Cycle {
        id: 1,
        now_ms: 1_000,
        strings: vec!["fake".into()],
        gpu_models: vec![0],
        ..Default::default()
    }
}

fn node(id: u32, gpus: u32) -> Node {
    Node {
        id,
        state: NodeState::Up,
        cpu_milli_total: 32_000,
        cpu_milli_free: 32_000,
        memory_mib_total: 256_000,
        memory_mib_free: 256_000,
        gpus: (0..gpus)
            .map(|i| Gpu {
                index: i,
                model: 0,
                memory_mib: 80_000,
                free_milli: 1000,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

fn job(id: u64, gpus: u32, submit_ms: u64, time_limit_s: u64) -> Job {
    Job {
        id,
        submit_ms,
        time_limit_s,
        tasks: vec![TaskGroup {
            count: 1,
            gpus,
            cpu_milli: 1000,
            memory_mib: 1024,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn builtin_metadata_and_stages() {
    let rt = runtime();
    let fifo = rt.load(comp::FIFO).unwrap();
    assert_eq!(fifo.metadata().name, "fifo");
    assert_eq!(fifo.metadata().contract, "0.3.0");
    assert_eq!(fifo.stages(), &[gantry_contract::Stage::Priority]);
    // The same crate built against 0.1 still loads, beside it.
    let fifo_v01 = rt.load(comp::FIFO_V01).unwrap();
    assert_eq!(fifo_v01.metadata().contract, "0.1.0");
    let speaks = |p: &gantry_plugin_runtime::LoadedPlugin| {
        p.exports()
            .iter()
            .filter(|e| e.starts_with("gantry:policy/"))
            .map(|e| e.rsplit_once('@').unwrap().1.to_string())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(speaks(&fifo).into_iter().collect::<Vec<_>>(), ["0.3.0"]);
    assert_eq!(speaks(&fifo_v01).into_iter().collect::<Vec<_>>(), ["0.1.0"]);
    let ff = rt.load(comp::FIRST_FIT).unwrap();
    assert_eq!(ff.stages(), &[gantry_contract::Stage::Placement]);
    assert_eq!(ff.sha256().len(), 64);
}

#[test]
fn wasm_answers_match_native() {
    let rt = runtime();
    let jobs: Vec<Job> = (0..50)
        .map(|i| job(i, (i % 4) as u32 + 1, 1_000 + i * 7 % 13, 60 * (i % 5)))
        .collect();
    let nodes: Vec<Node> = (0..4).map(|i| node(i, 8)).collect();
    let prev = vec![0.0; jobs.len()];

    let mut wasm = rt
        .load(comp::SHORTEST_FIRST)
        .unwrap()
        .instantiate("{}", Limits::default())
        .unwrap();
    let mut native =
        gantry_engine::Native::new(gantry_plugin_shortest_first::ShortestFirst::default(), "{}")
            .unwrap();
    assert_eq!(
        wasm.score(&ctx(), &jobs, &prev).unwrap(),
        native.score(&ctx(), &jobs, &prev).unwrap()
    );

    let mut wasm = rt
        .load(comp::FIRST_FIT)
        .unwrap()
        .instantiate(r#"{"strict": false}"#, Limits::default())
        .unwrap();
    let mut native = gantry_engine::Native::new(
        gantry_plugin_first_fit::FirstFit::default(),
        r#"{"strict": false}"#,
    )
    .unwrap();
    assert_eq!(
        wasm.place(&ctx(), &jobs, &nodes, &[]).unwrap(),
        native.place(&ctx(), &jobs, &nodes, &[]).unwrap()
    );
}

#[test]
fn bad_config_is_rejected_at_instantiation() {
    let rt = runtime();
    let err = rt
        .load(comp::FIRST_FIT)
        .unwrap()
        .instantiate(r#"{"strikt": 1}"#, Limits::default())
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LoadError::Fault { .. }), "{text}");
    assert!(text.contains("strikt"), "{text}");
}

#[test]
fn not_a_component_is_a_clear_error() {
    let rt = runtime();
    assert!(matches!(
        rt.load(b"hello"),
        Err(LoadError::NotAComponent(_))
    ));
    // A core module (not a component) is refused too.
    let core_module: &[u8] = &[0, b'a', b's', b'm', 1, 0, 0, 0];
    assert!(matches!(
        rt.load(core_module),
        Err(LoadError::NotAComponent(_))
    ));
}

#[test]
fn other_contract_version_is_a_version_mismatch() {
    let err = runtime().load(comp::WRONG_VERSION).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LoadError::VersionMismatch(_)), "{text}");
    assert!(
        text.contains("0.9.0") && text.contains("0.1.x, 0.2.x, 0.3.x"),
        "{text}"
    );
}

#[test]
fn infinite_loop_hits_the_deadline_and_the_instance_recovers() {
    let rt = runtime();
    let limits = Limits {
        deadline_ms: 50,
        ..Limits::default()
    };
    let mut p = rt
        .load(comp::HOSTILE_LOOP)
        .unwrap()
        .instantiate("{}", limits)
        .unwrap();
    let jobs = vec![job(1, 1, 0, 0)];
    for _ in 0..2 {
        let t = Instant::now();
        let err = p.score(&ctx(), &jobs, &[0.0]).unwrap_err();
        assert_eq!(err.kind, FaultKind::DeadlineExceeded, "{err}");
        assert!(t.elapsed().as_secs() < 5, "the deadline must stop the call");
    }
    assert_eq!(p.reinstantiations(), 2);
}

#[test]
fn trap_is_typed_and_the_host_survives() {
    let rt = runtime();
    let mut p = rt
        .load(comp::HOSTILE_TRAP)
        .unwrap()
        .instantiate("{}", Limits::default())
        .unwrap();
    let err = p
        .place(&ctx(), &[job(1, 1, 0, 0)], &[node(0, 4)], &[])
        .unwrap_err();
    assert_eq!(err.kind, FaultKind::Trap, "{err}");
    // And again, on a fresh instance.
    let err = p
        .place(&ctx(), &[job(1, 1, 0, 0)], &[node(0, 4)], &[])
        .unwrap_err();
    assert_eq!(err.kind, FaultKind::Trap, "{err}");
}

#[test]
fn memory_hog_hits_the_cap() {
    let rt = runtime();
    let limits = Limits {
        memory_mib: 64,
        deadline_ms: 5_000,
    };
    let mut p = rt
        .load(comp::HOSTILE_MEMORY)
        .unwrap()
        .instantiate("{}", limits)
        .unwrap();
    let err = p.score(&ctx(), &[job(1, 1, 0, 0)], &[0.0]).unwrap_err();
    assert_eq!(err.kind, FaultKind::MemoryLimit, "{err}");
}

#[test]
fn compiled_components_are_cached_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let opts = RuntimeOptions {
        cache_dir: Some(dir.path().to_path_buf()),
    };
    let first = Runtime::new(opts.clone())
        .unwrap()
        .load(comp::FIFO)
        .unwrap();
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    let second = Runtime::new(opts).unwrap().load(comp::FIFO).unwrap();
    assert_eq!(first.sha256(), second.sha256());
    assert_eq!(second.metadata().name, "fifo");
}
