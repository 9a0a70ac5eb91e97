//! The check of fuzz target `workload` (and of the suite's corpus replay,
//! `host/gantry/tests/fuzz_corpus.rs`): feeds arbitrary bytes to the simulator's input readers in
//! `gantry_sim::workload` (`read_cluster`, `read_workload`, `read_node_events`),
//! which take a path: the first byte picks the file's extension (`.csv`, `.jsonl`,
//! `.json`), the rest is written to a scratch file of that name and read by all three
//! (CSV, JSON, JSONL and openb formats); node events are checked against a fixed
//! cluster (`n1`, `n2`, `a100-1`) so their own checks are reached. None may panic.
use gantry_engine::sim::SimNode;
use gantry_sim::workload::{read_cluster, read_node_events, read_workload};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Scratch files for this process, one per extension (the readers pick the format by it).
fn scratch() -> &'static [PathBuf; 3] {
    static PATHS: OnceLock<[PathBuf; 3]> = OnceLock::new();
    PATHS.get_or_init(|| {
        let base = std::env::temp_dir();
        let pid = std::process::id();
        ["csv", "jsonl", "json"].map(|ext| base.join(format!("gantry-fuzz-workload-{pid}.{ext}")))
    })
}

/// The fixed cluster node events are checked against.
fn cluster() -> &'static [SimNode] {
    static NODES: OnceLock<Vec<SimNode>> = OnceLock::new();
    NODES.get_or_init(|| {
        let path = cluster_file();
        let lines = ["n1", "n2", "a100-1"]
            .map(|n| format!(r#"{{"name":"{n}","cpu_milli":1000,"memory_mib":1024,"gpus":1}}"#));
        std::fs::write(&path, lines.join("\n"))
            .ok()
            .and_then(|()| read_cluster(&path, false).ok())
            .unwrap_or_default()
    })
}

fn cluster_file() -> PathBuf {
    std::env::temp_dir().join(format!("gantry-fuzz-cluster-{}.jsonl", std::process::id()))
}

/// The scratch files this process made (the suite's replay removes them at the end).
#[allow(dead_code)]
pub fn scratch_files() -> Vec<PathBuf> {
    let mut all = scratch().to_vec();
    all.push(cluster_file());
    all
}

/// Runs the check on one input; panics on a defect.
pub fn check(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let path = &scratch()[usize::from(pick % 3)];
    if std::fs::write(path, body).is_err() {
        return;
    }
    let _ = read_cluster(path, pick & 0x80 != 0).map_err(|e| e.to_string());
    let _ = read_workload(path).map_err(|e| e.to_string());
    let _ = read_node_events(path, cluster()).map_err(|e| e.to_string());
}
