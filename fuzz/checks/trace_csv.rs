//! The check of fuzz target `trace_csv` (and of the suite's corpus replay,
//! `host/gantry/tests/fuzz_corpus.rs`): feeds arbitrary text to the simulator's CSV reader,
//! `gantry_sim::csv::Table::parse`, reads every field of every row as text and as
//! the types the readers ask for, then writes the bytes to a file and reads it as an
//! openb node list and pod list (`gantry_sim::openb::read_nodes`/`read_pods`, then
//! `Pod::to_job`). None may panic.
use gantry_sim::csv::Table;
use gantry_sim::openb;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A scratch file for this process (the readers take a path).
fn scratch() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("gantry-fuzz-trace-{}.csv", std::process::id()))
    })
}

/// The scratch files this process made (the suite's replay removes them at the end).
#[allow(dead_code)]
pub fn scratch_files() -> Vec<PathBuf> {
    vec![scratch().to_path_buf()]
}

/// Runs the check on one input; panics on a defect.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let table = Table::parse(Path::new("fuzz.csv"), text);
    let width = table.header().len() + 1;
    for name in ["sn", "name", "gpu", "num_gpu", "gpu_milli", "submit_s"] {
        let _ = table.column(name).map_err(|e| e.to_string());
    }
    for row in table.rows() {
        for col in 0..width {
            let _ = row.text(col).map_err(|e| e.to_string());
            let _ = row.parse::<u32>(col).map_err(|e| e.to_string());
            let _ = row.parse::<i64>(col);
            let _ = row.parse::<u64>(col);
            let _ = row.parse::<f64>(col);
            let _ = row.parse_or::<bool>(Some(col), false);
        }
        let _ = row.parse_or::<u8>(None, 0);
    }
    if std::fs::write(scratch(), data).is_err() {
        return;
    }
    for gpu_only in [false, true] {
        let _ = openb::read_nodes(scratch(), gpu_only).map_err(|e| e.to_string());
    }
    if let Ok(pods) = openb::read_pods(scratch()) {
        for pod in &pods {
            let _ = pod.gpu_request();
            let _ = pod.to_job();
        }
    }
}
