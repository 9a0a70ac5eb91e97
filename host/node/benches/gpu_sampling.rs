//! The cost of GPU use sampling (`gantry_node::inventory::gpu_usage`) per node: one round
//! over 8 whole GPUs and over 8 GPUs in MIG mode with 56 slices, each device with two
//! processes, through the fake NVML library (`docs/fake-nvml.md`), reading the cgroup of
//! each process as the daemon does. Prints the time of one round and the share of one
//! core it takes at the default `node.gpu_sample_every_s = 10` and at 1 s.
//!
//! What it measures is Gantry's side plus the fake library's answers; a real driver
//! answers each NVML call from the kernel module, which `scripts/gpu-check` times on a GPU.
//!
//! Run: `cargo build --release -p gantry-fake-nvml && cargo bench -p gantry-node --bench
//! gpu_sampling` (results in `docs/benchmarks/gpu-sampling.md`).

use gantry_node::inventory::gpu_usage::{SampledGpu, Sampler, task_of_pid};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const ROUNDS: u32 = 300;

/// The fake library beside this bench's profile directory (release, else debug).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench's path");
    let target = exe
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    ["release", "debug"]
        .iter()
        .map(|p| target.join(p).join("libgantry_fake_nvml.so"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            eprintln!("build the fake NVML first: cargo build --release -p gantry-fake-nvml");
            std::process::exit(2)
        })
}

fn processes(pid: u32) -> Value {
    json!([
        {"pid": pid, "used_memory_mib": 4096, "sm_util": 70},
        {"pid": pid + 1, "used_memory_mib": 512, "sm_util": 5}
    ])
}

/// 8 GPUs; with `mig`, each in MIG mode with seven `1g.10gb` slices.
fn scenario(mig: bool, pid: u32) -> (Value, Vec<SampledGpu>) {
    let mut devices = Vec::new();
    let mut sampled = Vec::new();
    for i in 0..8u32 {
        let uuid = format!("GPU-{i:08x}-fake-4e56-8f00-{i:012x}");
        let mut d = json!({
            "name": "NVIDIA A100-SXM4-80GB",
            "uuid": uuid,
            "memory_mib": 81_920,
            "processes": processes(pid),
        });
        if mig {
            let slices: Vec<Value> = (0..7u32)
                .map(|s| {
                    let u = format!("MIG-{i:04x}{s:04x}-fake-4e56-8f00-{s:012x}");
                    sampled.push(SampledGpu {
                        index: gantry_api::mig::slice_index(i, s),
                        uuid: Some(u.clone()),
                    });
                    json!({"profile": "1g.10gb", "uuid": u, "memory_mib": 9_856,
                           "processes": processes(pid)})
                })
                .collect();
            d["processes"] = json!([]);
            d["mig"] = json!({"enabled": true, "devices": slices});
        } else {
            sampled.push(SampledGpu {
                index: i,
                uuid: Some(uuid),
            });
        }
        devices.push(d);
    }
    (json!({"devices": devices}), sampled)
}

fn main() {
    let lib = library();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pid = std::process::id();
    for (label, mig) in [("8 GPUs", false), ("8 GPUs as 56 MIG slices", true)] {
        let (s, gpus) = scenario(mig, pid);
        let path = dir.path().join(format!("mig-{mig}.json"));
        std::fs::write(&path, serde_json::to_vec(&s).expect("JSON")).expect("write");
        // SAFETY: set before NVML is loaded, in this single-threaded bench.
        unsafe { std::env::set_var("GANTRY_FAKE_NVML_SCENARIO", &path) };
        let nvml = gantry_node::inventory::nvml::init(Some(lib.to_str().expect("a UTF-8 path")))
            .expect("the fake NVML starts");
        let mut sampler = Sampler::default();
        let every = Duration::from_secs(10);
        let first = sampler.round(&nvml, &gpus, 0, every, &task_of_pid);
        assert_eq!(first.gpus.len(), gpus.len(), "every device is sampled");
        let began = Instant::now();
        for i in 0..ROUNDS {
            let r = sampler.round(&nvml, &gpus, u64::from(i) + 1, every, &task_of_pid);
            assert_eq!(r.gpus.len(), gpus.len());
        }
        let per_round = began.elapsed() / ROUNDS;
        let us = per_round.as_secs_f64() * 1e6;
        println!(
            "{label}: {} devices, {us:.0} µs per round; {:.4} % of a core at every 10 s, {:.3} % at every 1 s",
            gpus.len(),
            us / 10e6 * 100.0,
            us / 1e6 * 100.0,
        );
        drop(nvml);
    }
}
