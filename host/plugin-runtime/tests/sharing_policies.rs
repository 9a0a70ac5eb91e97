//! The six placement policies of the FGD paper (`random`, `dot-product`,
//! `gpu-clustering`, `gpu-packing`, `best-fit`, `fgd`) and Gantry's `stranding` as wasm
//! components give exactly
//! the plans of their native builds, on one mixed scenario: nodes of several models,
//! some GPUs partly used or unhealthy, a node down, running jobs, and whole-GPU,
//! sharing, CPU-only and gang jobs, some with model constraints.
//!
//! `replay_openb_timing` (ignored) replays the start of the openb trace one pod per
//! call on its 1,213 GPU nodes through each component and prints the time per call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{
    Cycle, Gpu, GpuShare, Job, Node, NodeState, Placement, Plan, RunningJob, TaskAllocation,
    TaskGroup,
};
use gantry_engine::{Native, PlacementStage};
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::time::Instant;

const MODELS: [&str; 3] = ["T4", "V100M16", "A10"];

struct Scenario {
    ctx: Cycle,
    jobs: Vec<Job>,
    nodes: Vec<Node>,
    running: Vec<RunningJob>,
}

fn node(id: u32, model: u32, free: &[u32], cpu: u32) -> Node {
    Node {
        id,
        name: 3 + id,
        state: NodeState::Up,
        cpu_milli_total: 96_000,
        cpu_milli_free: cpu,
        memory_mib_total: 512_000,
        memory_mib_free: 256_000,
        gpus: free
            .iter()
            .enumerate()
            .map(|(i, &f)| Gpu {
                index: i as u32,
                model,
                memory_mib: 16_000,
                free_milli: f,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

fn job(id: u64, groups: &[(u32, u32, u32, u32, u64)]) -> Job {
    Job {
        id,
        submit_ms: 1_000 + id,
        tasks: groups
            .iter()
            .map(|&(count, gpus, gpu_milli, cpu_milli, mask)| TaskGroup {
                count,
                gpus,
                gpu_milli,
                cpu_milli,
                memory_mib: 8_192,
                gpu_model_mask: mask,
            })
            .collect(),
        ..Default::default()
    }
}

fn running(id: u64, node: u32, gpus: u32, gpu_milli: u32) -> RunningJob {
    RunningJob {
        job: job(id, &[(1, gpus, gpu_milli, 4_000, 0)]),
        tasks: vec![TaskAllocation {
            node,
            gpus: vec![GpuShare {
                index: 0,
                milli: gpu_milli.max(1000 * u32::from(gpus > 0)),
            }],
            cpu_milli: 4_000,
            memory_mib: 8_192,
        }],
        start_ms: 500,
        expected_end_ms: None,
        score: 0.0,
        revision: 0,
    }
}

fn scenario() -> Scenario {
    let mut strings: Vec<String> = MODELS.iter().map(|s| s.to_string()).collect();
    strings.extend((0..7).map(|i| format!("gpu-node-{i:02}")));
    let ctx = Cycle {
        id: 7,
        now_ms: 10_000,
        seed: 1234,
        strings,
        gpu_models: vec![0, 1, 2],
        ..Default::default()
    };
    let (t4, v100, a10) = (0, 1, 2);
    let mut nodes = vec![
        node(
            0,
            v100,
            &[1000, 1000, 500, 1000, 0, 1000, 1000, 300],
            64_000,
        ),
        node(1, t4, &[1000, 1000], 32_000),
        node(2, t4, &[200, 1000, 700, 1000], 48_000),
        node(3, a10, &[1000; 8], 96_000),
        node(4, v100, &[1000], 8_000),
        node(5, a10, &[1000, 1000, 1000, 650], 40_000),
        node(6, t4, &[1000, 1000], 16_000),
    ];
    nodes[2].gpus[3].healthy = false;
    nodes[3].state = NodeState::Down;
    let v100_only = 1 << v100;
    let t4_or_a10 = (1 << t4) | (1 << a10);
    let jobs = vec![
        job(1, &[(1, 0, 500, 6_000, 0)]),
        job(2, &[(1, 2, 0, 16_000, 0)]),
        job(3, &[(1, 0, 0, 12_000, 0)]),
        job(4, &[(2, 0, 250, 2_000, t4_or_a10)]),
        job(5, &[(1, 4, 0, 24_000, v100_only)]),
        job(6, &[(1, 8, 0, 8_000, 0)]), // no node has 8 free GPUs
        job(7, &[(1, 0, 750, 4_000, 0)]),
        job(8, &[(1, 1, 0, 4_000, 0), (2, 0, 300, 1_000, 0)]),
        job(9, &[(3, 0, 0, 20_000, 0)]),
        job(10, &[(1, 0, 100, 0, v100_only)]),
        job(11, &[(2, 1, 0, 30_000, 0)]),
        job(12, &[(1, 0, 450, 3_000, 0)]),
        job(13, &[(1, 0, 0, 500, 0)]),
        job(14, &[(1, 1, 0, 2_000, 1 << 5)]), // model index 5 does not exist
    ];
    let running = vec![
        running(100, 0, 0, 500),
        running(101, 2, 0, 800),
        running(102, 5, 1, 0),
        running(103, 4, 0, 0),
    ];
    Scenario {
        ctx,
        jobs,
        nodes,
        running,
    }
}

const FGD_TARGET: &str = r#"{"seed": 11, "target": [
    {"cpu_milli": 6000, "gpu_milli": 500, "gpus": 1, "count": 40},
    {"cpu_milli": 12000, "gpu_milli": 1000, "gpus": 1, "count": 25},
    {"cpu_milli": 4000, "gpu_milli": 0, "gpus": 0, "count": 15},
    {"cpu_milli": 16000, "gpu_milli": 1000, "gpus": 2, "models": ["V100M16", "P100"], "count": 8},
    {"cpu_milli": 2000, "gpu_milli": 250, "gpus": 1, "models": ["T4"], "count": 5}],
  "total_pods": 100}"#;

/// Each component with its native build and the configs to try.
fn cases() -> Vec<(&'static str, &'static [u8], Vec<&'static str>)> {
    vec![
        ("random", comp::RANDOM, vec![r#"{"seed": 11}"#, "{}"]),
        ("dot-product", comp::DOT_PRODUCT, vec![r#"{"seed": 11}"#]),
        (
            "gpu-clustering",
            comp::GPU_CLUSTERING,
            vec![r#"{"seed": 11}"#],
        ),
        ("gpu-packing", comp::GPU_PACKING, vec![r#"{"seed": 11}"#]),
        (
            "best-fit",
            comp::BEST_FIT,
            vec![r#"{"seed": 11, "strict": true}"#, r#"{"seed": 11}"#],
        ),
        ("fgd", comp::FGD, vec![FGD_TARGET, r#"{"seed": 11}"#]),
        (
            "stranding",
            comp::STRANDING,
            vec![
                r#"{"seed": 11}"#,
                r#"{"seed": 11, "memory": false, "scale": 0, "weigh": "gpu-demand"}"#,
            ],
        ),
    ]
}

fn native(name: &str, config: &str) -> Box<dyn PlacementStage> {
    match name {
        "random" => Box::new(Native::new(gantry_plugin_random::Random::default(), config).unwrap()),
        "dot-product" => {
            Box::new(Native::new(gantry_plugin_dot_product::DotProduct::default(), config).unwrap())
        }
        "gpu-clustering" => Box::new(
            Native::new(
                gantry_plugin_gpu_clustering::GpuClustering::default(),
                config,
            )
            .unwrap(),
        ),
        "gpu-packing" => {
            Box::new(Native::new(gantry_plugin_gpu_packing::GpuPacking::default(), config).unwrap())
        }
        "best-fit" => {
            Box::new(Native::new(gantry_plugin_best_fit::BestFit::default(), config).unwrap())
        }
        "fgd" => Box::new(Native::new(gantry_plugin_fgd::Fgd::default(), config).unwrap()),
        "stranding" => {
            Box::new(Native::new(gantry_plugin_stranding::Stranding::default(), config).unwrap())
        }
        other => panic!("unknown policy {other}"),
    }
}

#[test]
fn wasm_plans_match_native_plans() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let s = scenario();
    let mut plans: Vec<(String, Plan)> = Vec::new();
    for (name, bytes, configs) in cases() {
        let loaded = rt.load(bytes).unwrap();
        assert_eq!(loaded.metadata().name, name);
        assert_eq!(loaded.stages(), &[gantry_contract::Stage::Placement]);
        for config in configs {
            let mut wasm = loaded.instantiate(config, Limits::default()).unwrap();
            let mut nat = native(name, config);
            // Twice: the second call runs on the plugin's warm state (FGD's memo).
            for _ in 0..2 {
                let w = wasm.place(&s.ctx, &s.jobs, &s.nodes, &s.running).unwrap();
                let n = nat.place(&s.ctx, &s.jobs, &s.nodes, &s.running).unwrap();
                assert_eq!(w, n, "{name} {config}");
                assert!(!w.starts.is_empty(), "{name} {config}: {w:?}");
                assert!(!w.pending.is_empty(), "{name} {config}: {w:?}");
                plans.push((format!("{name} {config}"), w));
            }
        }
    }
    // The policies do differ on this scenario.
    let distinct: std::collections::HashSet<String> =
        plans.iter().map(|(_, p)| format!("{p:?}")).collect();
    assert!(distinct.len() >= 4, "{}", distinct.len());
}

#[test]
fn bad_config_names_the_key() {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    for (name, bytes, _) in cases() {
        let err = rt
            .load(bytes)
            .unwrap()
            .instantiate(r#"{"seeed": 1}"#, Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{name} accepted a bad key"));
        assert!(err.to_string().contains("seeed"), "{name}: {err}");
    }
}

/// A deterministic stream for the replay's shuffle and tune-up draws.
struct Stream(u64);

impl Stream {
    fn below(&mut self, n: usize) -> usize {
        self.0 = gantry_sharing_core::rank::splitmix64(self.0);
        (self.0 % n as u64) as usize
    }
}

/// The openb GPU nodes, and the pods of `openb_pod_list_<variant>.csv` as jobs of one
/// task each: name order, shuffled, then copies drawn from the original list appended
/// until `pods` (roughly the spec's tune-up to 130 %), plus the `fgd` config of the
/// list's target. `None` when the trace is not present.
fn openb(variant: &str, pods: usize) -> Option<(Cycle, Vec<Node>, Vec<Job>, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/alibaba-gpu-v2023");
    let node_csv = std::fs::read_to_string(dir.join("openb_node_list_gpu_node.csv")).ok()?;
    let pod_csv =
        std::fs::read_to_string(dir.join(format!("openb_pod_list_{variant}.csv"))).ok()?;
    let mut strings: Vec<String> = Vec::new();
    let intern = |s: &str, strings: &mut Vec<String>| -> u32 {
        match strings.iter().position(|x| x == s) {
            Some(i) => i as u32,
            None => {
                strings.push(s.to_string());
                strings.len() as u32 - 1
            }
        }
    };
    let mut models: Vec<u32> = Vec::new();
    let mut nodes = Vec::new();
    for (i, line) in node_csv.lines().skip(1).enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let model = intern(f[4], &mut strings);
        if !models.contains(&model) {
            models.push(model);
        }
        let name = intern(f[0], &mut strings);
        let gpus: u32 = f[3].parse().unwrap();
        nodes.push(Node {
            id: i as u32,
            name,
            state: NodeState::Up,
            cpu_milli_total: f[1].parse().unwrap(),
            cpu_milli_free: f[1].parse().unwrap(),
            memory_mib_total: f[2].parse().unwrap(),
            memory_mib_free: f[2].parse().unwrap(),
            gpus: (0..gpus)
                .map(|index| Gpu {
                    index,
                    model,
                    memory_mib: 16_000,
                    free_milli: 1000,
                    healthy: true,
                    parent: None,
                })
                .collect(),
            ..Default::default()
        });
    }
    let mut shapes = std::collections::BTreeMap::new();
    let mut rows: Vec<(String, TaskGroup)> = Vec::new();
    for line in pod_csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (cpu, mem, n, m): (u32, u64, u32, i64) = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        );
        let spec = f.get(5).copied().unwrap_or("");
        let shape = gantry_sharing_core::TraceShape::from_trace_row(cpu, n, m, spec);
        *shapes.entry(shape.clone()).or_insert(0u64) += 1;
        let (gpus, gpu_milli) = match (shape.gpus, shape.gpu_milli) {
            (0, _) => (0, 0),
            (n, 1000) => (n, 0),
            (_, m) => (0, m),
        };
        let mask = models
            .iter()
            .enumerate()
            .filter(|(_, s)| shape.models.iter().any(|m| *m == strings[**s as usize]))
            .fold(0u64, |acc, (i, _)| acc | 1 << i);
        // A spec naming no model of the cluster can never run: keep it unplaceable.
        let mask = if !shape.models.is_empty() && mask == 0 {
            1 << 63
        } else {
            mask
        };
        rows.push((
            f[0].to_string(),
            TaskGroup {
                count: 1,
                gpus,
                gpu_milli,
                cpu_milli: cpu,
                memory_mib: mem,
                gpu_model_mask: mask,
            },
        ));
    }
    let pairs: Vec<_> = shapes.into_iter().collect();
    let config = gantry_sharing_core::build_target(&pairs).config_json(Some(42), false);
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let original: Vec<TaskGroup> = rows.into_iter().map(|(_, g)| g).collect();
    let mut rng = Stream(42);
    let mut seq = original.clone();
    for i in (1..seq.len()).rev() {
        let j = rng.below(i + 1);
        seq.swap(i, j);
    }
    while seq.len() < pods {
        seq.push(original[rng.below(original.len())]);
    }
    seq.truncate(pods);
    let jobs = seq
        .into_iter()
        .enumerate()
        .map(|(i, g)| Job {
            id: i as u64 + 1,
            tasks: vec![g],
            ..Default::default()
        })
        .collect();
    let ctx = Cycle {
        seed: 42,
        strings,
        gpu_models: models,
        ..Default::default()
    };
    Some((ctx, nodes, jobs, config))
}

/// Applies a start to the node list (what the simulator does between calls).
fn apply(nodes: &mut [Node], plan: &Plan) {
    for start in &plan.starts {
        for t in &start.tasks {
            let n = &mut nodes[t.node as usize];
            n.cpu_milli_free -= t.cpu_milli;
            n.memory_mib_free -= t.memory_mib;
            for s in &t.gpus {
                n.gpus[s.index as usize].free_milli -= s.milli;
            }
        }
    }
}

#[test]
#[ignore = "timing: replays the openb trace; run with --ignored --nocapture"]
fn replay_openb_timing() {
    let variant = std::env::var("SHARING_REPLAY_VARIANT").unwrap_or_else(|_| "default".into());
    let pods: usize = std::env::var("SHARING_REPLAY_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_900);
    let only = std::env::var("SHARING_REPLAY_ONLY").ok();
    let Some((ctx, nodes0, jobs, fgd_config)) = openb(&variant, pods) else {
        eprintln!("openb trace not found; skipping");
        return;
    };
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let limits = Limits {
        deadline_ms: 10_000,
        memory_mib: 256,
    };
    let mut all: Vec<(&str, &[u8], String)> =
        vec![("first-fit", comp::FIRST_FIT, r#"{"strict": false}"#.into())];
    for (name, bytes, _) in cases() {
        let config = if name == "fgd" {
            fgd_config.clone()
        } else {
            r#"{"seed": 42}"#.to_string()
        };
        all.push((name, bytes, config));
    }
    println!(
        "openb {variant}: {} pods on {} nodes",
        jobs.len(),
        nodes0.len()
    );
    for (name, bytes, config) in all {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut wasm = rt
            .load(bytes)
            .unwrap()
            .instantiate(&config, limits)
            .unwrap();
        // Baseline: the same call with no job (argument copying, conversions, view).
        let t0 = Instant::now();
        for _ in 0..200 {
            wasm.place(&ctx, &[], &nodes0, &[]).unwrap();
        }
        let empty = t0.elapsed().as_secs_f64() * 1e6 / 200.0;
        let mut nodes = nodes0.clone();
        let (mut placed, mut gpu_milli) = (0usize, 0u64);
        let t0 = Instant::now();
        for j in &jobs {
            let plan = wasm
                .place(&ctx, std::slice::from_ref(j), &nodes, &[])
                .unwrap();
            placed += plan.starts.len();
            gpu_milli += plan
                .starts
                .iter()
                .flat_map(|s| &s.tasks)
                .flat_map(|t| &t.gpus)
                .map(|g| u64::from(g.milli))
                .sum::<u64>();
            apply(&mut nodes, &plan);
        }
        let per_call = t0.elapsed().as_secs_f64() * 1e6 / jobs.len() as f64;
        println!(
            "{name:>15}: {per_call:7.1} µs per call, {empty:7.1} µs with no job ({placed} placed, {:.2} % GPU allocated)",
            gpu_milli as f64 / 6_212_000.0 * 100.0
        );
    }
}
