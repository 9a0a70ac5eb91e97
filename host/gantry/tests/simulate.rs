//! `gantry simulate`: the fill protocol on a reduced openb workload (invariants,
//! determinism, wasm = native), input errors that name file, line and field, and the
//! command itself writing a report with several pipelines side by side.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_engine::sim::{FillResult, SimJob, SimNode, run_fill};
use gantry_sim::fgd_target::fgd_config;
use gantry_sim::pipelines::{Builder, placement_only};
use gantry_sim::{fgd_workload, openb, workload};
use std::path::PathBuf;
use std::process::Command;

const POLICIES: [&str; 6] = [
    "random",
    "dot-product",
    "gpu-clustering",
    "gpu-packing",
    "best-fit",
    "fgd",
];

fn trace_dir() -> PathBuf {
    let dir = std::env::var_os("GANTRY_TRACE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/traces/alibaba-gpu-v2023")
        });
    assert!(
        dir.join("openb_node_list_gpu_node.csv").exists(),
        "the openb trace is not at {} (set GANTRY_TRACE_DIR)",
        dir.display()
    );
    dir
}

/// Every 16th GPU node and pod of the default workload: 76 nodes, ~510 pods.
fn reduced() -> (Vec<SimNode>, Vec<openb::Pod>) {
    let dir = trace_dir();
    let mut nodes = openb::read_nodes(&dir.join("openb_node_list_gpu_node.csv"), true).unwrap();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pods = openb::read_pods(&dir.join("openb_pod_list_default.csv")).unwrap();
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    let nodes: Vec<SimNode> = nodes.into_iter().step_by(16).collect();
    let pods: Vec<openb::Pod> = pods.into_iter().step_by(16).collect();
    (nodes, pods)
}

fn fill(
    builder: &Builder,
    policy: &str,
    nodes: &[SimNode],
    pods: &[openb::Pod],
    seed: u64,
) -> FillResult {
    let config = if policy == "fgd" {
        fgd_config(pods, seed)
    } else {
        serde_json::json!({ "seed": seed })
    };
    let mut pipeline = builder.build(&placement_only(policy, config).spec).unwrap();
    let capacity: u64 = nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    let seq: Vec<SimJob> = fgd_workload::sequence(pods, capacity, seed, 1.3)
        .iter()
        .map(openb::Pod::to_job)
        .collect();
    run_fill(nodes, &seq, seed, None, &mut pipeline, &mut |_, _| {})
}

#[test]
fn fill_protocol_invariants_on_a_reduced_workload() {
    let (nodes, pods) = reduced();
    let capacity: u64 = nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    for policy in POLICIES {
        for seed in [42, 43] {
            let r = fill(&Builder::Native, policy, &nodes, &pods, seed);
            assert_eq!(r.faults, 0, "{policy}");
            assert_eq!(r.capacity_milli, capacity);
            assert_eq!(r.placed + r.failed, r.points.len());
            // Arrived demand counts failed pods and reaches ~130 % of capacity.
            let last = r.points.last().unwrap();
            assert!(
                last.arrived_milli as f64 >= 1.25 * capacity as f64,
                "{policy}: {}",
                last.arrived_milli
            );
            assert!(r.failed > 0, "{policy}: at 130 % some pods must fail");
            let mut prev = (0, 0);
            for p in &r.points {
                assert!(
                    p.allocated_milli <= capacity,
                    "{policy}: allocation above capacity"
                );
                assert!(p.allocated_milli <= p.arrived_milli);
                assert!(
                    p.arrived_milli >= prev.0 && p.allocated_milli >= prev.1,
                    "nothing departs"
                );
                prev = (p.arrived_milli, p.allocated_milli);
            }
            // Same seed, same result.
            let again = fill(&Builder::Native, policy, &nodes, &pods, seed);
            assert_eq!(
                again.points, r.points,
                "{policy} seed {seed} is not deterministic"
            );
        }
    }
}

#[test]
fn wasm_components_and_native_plugins_give_the_same_fill() {
    let (nodes, pods) = reduced();
    let wasm = Builder::wasm(&[]).unwrap();
    for policy in POLICIES {
        let n = fill(&Builder::Native, policy, &nodes, &pods, 42);
        let w = fill(&wasm, policy, &nodes, &pods, 42);
        assert_eq!(w.faults, 0, "{policy}");
        assert_eq!(n.points, w.points, "{policy}: wasm and native differ");
    }
}

fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn bad_inputs_name_the_file_line_and_field() {
    let (_d, p) = temp_file(
        "jobs.jsonl",
        "{\"submit_s\": 0, \"duration_s\": 10}\n\n{\"submit_s\": 5, \"duration_s\": 10, \"tasks\": [{\"gpus\": 1, \"gpu_milli\": 300}]}\n",
    );
    let e = workload::read_workload(&p).unwrap_err().to_string();
    assert!(
        e.contains("jobs.jsonl:3") && e.contains("tasks[0].gpu_milli"),
        "{e}"
    );

    let (_d, p) = temp_file(
        "jobs.jsonl",
        "{\"submit_s\": 0, \"duration_s\": 10, \"gpus\": 2}\n",
    );
    let e = workload::read_workload(&p).unwrap_err().to_string();
    assert!(e.contains("jobs.jsonl:1") && e.contains("`gpus`"), "{e}");

    let (_d, p) = temp_file(
        "jobs.csv",
        "name,submit_s,duration_s,gpus\na,0,10,1\nb,zero,10,1\n",
    );
    let e = workload::read_workload(&p).unwrap_err().to_string();
    assert!(
        e.contains("jobs.csv:3") && e.contains("submit_s") && e.contains("zero"),
        "{e}"
    );

    let (_d, p) = temp_file(
        "nodes.csv",
        "name,cpu_milli,memory_mib,gpus,gpu_model\nn1,64000,1024,8,\n",
    );
    let e = workload::read_cluster(&p, false).unwrap_err().to_string();
    assert!(e.contains("gpu_model") && e.contains("n1"), "{e}");

    let (_d, p) = temp_file("nodes.csv", "sn,cpu_milli,memory_mib,gpu\n");
    let e = workload::read_cluster(&p, false).unwrap_err().to_string();
    assert!(
        e.contains("nodes.csv:1") && e.contains("missing column `model`"),
        "{e}"
    );
}

/// Two A100 nodes of 4 GPUs (the second labelled `rack=r2`), as `dir/cluster.jsonl`.
fn two_node_cluster(dir: &std::path::Path) -> PathBuf {
    let cluster = dir.join("cluster.jsonl");
    std::fs::write(
        &cluster,
        "{\"name\": \"a\", \"cpu_milli\": 64000, \"memory_mib\": 262144, \"gpus\": 4, \"gpu_model\": \"A100\"}\n\
         {\"name\": \"b\", \"cpu_milli\": 64000, \"memory_mib\": 262144, \"gpus\": 4, \"gpu_model\": \"A100\", \"labels\": {\"rack\": \"r2\"}}\n",
    )
    .unwrap();
    cluster
}

#[test]
fn the_command_compares_pipelines_and_writes_a_report_with_plots() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = two_node_cluster(dir.path());
    let jobs = dir.path().join("jobs.csv");
    let mut text = String::from("name,submit_s,duration_s,gpus,user,account\n");
    for i in 0..40 {
        let gpus = [1, 2, 3, 4][i % 4];
        let account = ["vision", "nlp"][i % 2];
        text.push_str(&format!(
            "j{i},{},{},{gpus},u{},{account}\n",
            i * 60,
            600 + (i % 7) * 300,
            i % 3
        ));
    }
    std::fs::write(&jobs, text).unwrap();
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["simulate", "timeline", "--quiet", "--cluster"])
        .arg(&cluster)
        .arg("--workload")
        .arg(&jobs)
        .arg("--pipeline")
        .arg(ws.join("examples/pipelines/default.json"))
        .arg("--pipeline")
        .arg(ws.join("examples/pipelines/shortest-first.toml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        stdout.contains("| default |") && stdout.contains("| shortest-first |"),
        "{stdout}"
    );
    for f in [
        "report.json",
        "summary.md",
        "allocation.svg",
        "wait-cdf.svg",
        "usage-by-account.svg",
    ] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(!text.is_empty(), "{f}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let runs = report.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["summary"]["finished"], 40, "{}", r["label"]);
    }
    let usage = std::fs::read_to_string(out.join("usage-by-account.svg")).unwrap();
    assert!(usage.contains("vision") && usage.contains("nlp"));

    // A bad line stops the command with the file, line and field.
    std::fs::write(&jobs, "name,submit_s,duration_s,gpus\nx,0,-5,1\n").unwrap();
    let bad = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["simulate", "timeline", "--quiet", "--cluster"])
        .arg(&cluster)
        .arg("--workload")
        .arg(&jobs)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("jobs.csv:2") && err.contains("duration_s"),
        "{err}"
    );
}

#[test]
fn fill_names_its_outputs_after_the_workload_file_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = two_node_cluster(dir.path());
    std::fs::create_dir(dir.path().join("traces")).unwrap();
    let jobs = dir.path().join("traces/small_pods.csv");
    let mut text = String::from("name,submit_s,duration_s,gpus\n");
    for i in 0..12 {
        text.push_str(&format!("j{i},0,600,{}\n", 1 + i % 2));
    }
    std::fs::write(&jobs, text).unwrap();
    let out = dir.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["simulate", "fill", "--quiet", "--cluster"])
        .arg(&cluster)
        .arg("--workload")
        .arg(&jobs)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(out.join("curve-small_pods.svg").exists(), "{stderr}");
    let results = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(results.contains("| small_pods |"), "{results}");

    // An output directory that cannot be made is named in the error.
    let blocked = dir.path().join("file");
    std::fs::write(&blocked, "").unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["simulate", "fill", "--quiet", "--cluster"])
        .arg(&cluster)
        .arg("--workload")
        .arg(&jobs)
        .arg("--out")
        .arg(blocked.join("out"))
        .output()
        .unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("file/out"), "{err}");
}
