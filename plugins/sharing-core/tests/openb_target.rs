//! FGD's target workload built from the openb pod lists matches the numbers of spec
//! §8: default 35 shapes covering 7,766 of 8,152 pods; multigpu50 43 shapes covering
//! 8,610; gpuspec33 127 shapes covering 7,748. Skipped (with a note) when the trace
//! files are not present.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_sharing_core::{TraceShape, build_target};
use std::collections::BTreeMap;
use std::path::Path;

const TRACES: &str = "../../../shared/traces/alibaba-gpu-v2023";

/// `(shape, count)` of every row of `openb_pod_list_<variant>.csv`, or `None`.
fn pod_list(variant: &str) -> Option<(Vec<(TraceShape, u64)>, u64)> {
    let dir = std::env::var_os("GANTRY_TRACE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(TRACES));
    let path = dir.join(format!("openb_pod_list_{variant}.csv"));
    let text = std::fs::read_to_string(&path).ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (cpu, num_gpu, gpu_milli) = (
        col("cpu_milli").unwrap(),
        col("num_gpu").unwrap(),
        col("gpu_milli").unwrap(),
    );
    // multigpu50 has no gpu_spec column.
    let spec = col("gpu_spec");
    let mut counts: BTreeMap<TraceShape, u64> = BTreeMap::new();
    let mut rows = 0;
    for line in lines.filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let shape = TraceShape::from_trace_row(
            f[cpu].parse().unwrap(),
            f[num_gpu].parse().unwrap(),
            f[gpu_milli].parse().unwrap(),
            spec.and_then(|i| f.get(i).copied()).unwrap_or(""),
        );
        *counts.entry(shape).or_default() += 1;
        rows += 1;
    }
    Some((counts.into_iter().collect(), rows))
}

fn check(variant: &str, pods: u64, shapes: usize, covered: u64) {
    let Some((list, rows)) = pod_list(variant) else {
        eprintln!("openb trace not found under {TRACES}; skipping {variant}");
        return;
    };
    assert_eq!(rows, pods);
    let t = build_target(&list);
    assert_eq!(t.total_pods, pods, "{variant}");
    assert_eq!(t.target.len(), shapes, "{variant}");
    assert_eq!(t.covered(), covered, "{variant}");
    // Counts are non-increasing and the prefix is the shortest one reaching 95 %.
    assert!(t.target.windows(2).all(|w| w[0].count >= w[1].count));
    let without_last = covered - t.target.last().unwrap().count;
    assert!(without_last * 100 < pods * 95 && covered * 100 >= pods * 95);
}

#[test]
fn default_list() {
    check("default", 8152, 35, 7766);
}

#[test]
fn multigpu50_list() {
    check("multigpu50", 9061, 43, 8610);
}

#[test]
fn gpuspec33_list() {
    check("gpuspec33", 8152, 127, 7748);
}
