//! The FGD paper's experiment (`docs/fgd-replay/method.md`): every placement policy ×
//! workload × seed replayed with the fill protocol on the openb GPU nodes, and the
//! results table (GPU allocation at 100 % and 130 % arrived workload, mean and
//! min–max over seeds) with the allocation curves.
//!
//! Owns: the grid, its parallel execution and its aggregation. Does not own the
//! workload construction (`fgd_workload`), the protocol (`gantry_engine::sim::fill`)
//! or the policies (the placement plugins).

use super::fgd_workload;
use super::openb::{self, Pod};
use super::pipelines::{self, Builder};
use super::progress::Bar;
use anyhow::Context;
use gantry_engine::sim::{SimJob, SimNode, allocation_curve, run_fill};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The six policies of the paper, then Gantry's own `stranding`, by plugin name.
pub const POLICIES: [&str; 7] = [
    "random",
    "dot-product",
    "gpu-clustering",
    "gpu-packing",
    "best-fit",
    "fgd",
    "stranding",
];

/// The three workloads of the paper (pod list suffixes).
pub const WORKLOADS: [&str; 3] = ["default", "multigpu50", "gpuspec33"];

/// What to run.
#[derive(Debug, Clone)]
pub struct GridOptions {
    /// Directory with the openb CSVs.
    pub trace_dir: PathBuf,
    /// Workload names (`openb_pod_list_<name>.csv`).
    pub workloads: Vec<String>,
    /// Placement plugin names.
    pub policies: Vec<String>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Arrived demand the workload is tuned to, as a share of capacity (1.3).
    pub tune: f64,
    /// Keep every `scale`-th node and pod (1: the full trace), for quick runs.
    pub scale: usize,
    /// Worker threads.
    pub threads: usize,
    /// Hide the progress bar.
    pub quiet: bool,
}

/// One policy × workload × seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GridRun {
    /// Workload.
    pub workload: String,
    /// Policy.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Allocation (% of GPU capacity) at arrived workload 0..=130 %.
    pub curve: Vec<Option<f64>>,
    /// Pods offered.
    pub offered: usize,
    /// Pods placed.
    pub placed: usize,
    /// Pods that found no node.
    pub failed: usize,
    /// Plugin faults.
    pub faults: u64,
    /// Final allocation, % of capacity.
    pub final_allocation_pct: f64,
    /// Wall time of the run, ms.
    pub wall_ms: u64,
}

impl GridRun {
    /// Allocation at `pct` % arrived workload.
    pub fn at(&self, pct: usize) -> Option<f64> {
        self.curve.get(pct).copied().flatten()
    }
}

/// A workload ready to replay: the cluster, the original pods, the FGD target.
struct Prepared {
    name: String,
    nodes: Vec<SimNode>,
    pods: Vec<Pod>,
}

fn every_nth<T: Clone>(items: &[T], n: usize) -> Vec<T> {
    items.iter().step_by(n.max(1)).cloned().collect()
}

fn prepare(opts: &GridOptions, workload: &str) -> anyhow::Result<Prepared> {
    let nodes_path = opts.trace_dir.join("openb_node_list_gpu_node.csv");
    let pods_path = opts
        .trace_dir
        .join(format!("openb_pod_list_{workload}.csv"));
    let mut nodes = openb::read_nodes(&nodes_path, true)?;
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pods = openb::read_pods(&pods_path)?;
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    let nodes = every_nth(&nodes, opts.scale);
    let pods = every_nth(&pods, opts.scale);
    Ok(Prepared {
        name: workload.to_string(),
        nodes,
        pods,
    })
}

/// Runs the grid on `threads` workers; results come back in grid order.
pub fn run(opts: &GridOptions, builder: &Builder) -> anyhow::Result<Vec<GridRun>> {
    let prepared: Vec<Prepared> = opts
        .workloads
        .iter()
        .map(|w| prepare(opts, w).with_context(|| format!("workload {w}")))
        .collect::<anyhow::Result<_>>()?;
    let mut tasks: Vec<(usize, String, u64)> = Vec::new();
    for (w, _) in prepared.iter().enumerate() {
        for p in &opts.policies {
            for s in &opts.seeds {
                tasks.push((w, p.clone(), *s));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<GridRun>>>> =
        Mutex::new((0..tasks.len()).map(|_| None).collect());
    let bar = Mutex::new(Bar::new("fgd grid", tasks.len() as u64, opts.quiet));
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..opts.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((w, policy, seed)) = tasks.get(i) else {
                        break;
                    };
                    let r = run_one(&prepared[*w], policy, *seed, opts.tune, builder);
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                    let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if let Ok(mut b) = bar.lock() {
                        b.set(d as u64, "runs");
                    }
                }
            });
        }
    });
    let all = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker panicked"))?;
    all.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("run not done"))))
        .collect()
}

fn run_one(
    w: &Prepared,
    policy: &str,
    seed: u64,
    tune: f64,
    builder: &Builder,
) -> anyhow::Result<GridRun> {
    let started = Instant::now();
    let config = if policy == "fgd" {
        super::fgd_target::fgd_config(&w.pods, seed)
    } else {
        serde_json::json!({ "seed": seed })
    };
    let named = pipelines::placement_only(policy, config);
    let mut pipeline = builder
        .build(&named.spec)
        .with_context(|| format!("pipeline for {policy}"))?;
    let capacity: u64 = w.nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    let sequence: Vec<SimJob> = fgd_workload::sequence(&w.pods, capacity, seed, tune)
        .iter()
        .map(Pod::to_job)
        .collect();
    let result = run_fill(
        &w.nodes,
        &sequence,
        seed,
        None,
        &mut pipeline,
        &mut |_, _| {},
    );
    let curve: Vec<Option<f64>> = allocation_curve(&result, 130)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let final_allocation_pct = result.points.last().map_or(0.0, |p| {
        100.0 * p.allocated_milli as f64 / capacity.max(1) as f64
    });
    Ok(GridRun {
        workload: w.name.clone(),
        policy: policy.to_string(),
        seed,
        curve,
        offered: result.points.len(),
        placed: result.placed,
        failed: result.failed,
        faults: result.faults,
        final_allocation_pct,
        wall_ms: started.elapsed().as_millis() as u64,
    })
}

/// One line of the results table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TableRow {
    /// Workload.
    pub workload: String,
    /// Policy.
    pub policy: String,
    /// Seeds aggregated.
    pub seeds: usize,
    /// Mean, min and max allocation at 100 % arrived.
    pub at_100: (f64, f64, f64),
    /// Mean, min and max allocation at 130 % arrived.
    pub at_130: (f64, f64, f64),
}

fn stats(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, min, max)
}

/// Aggregates runs per workload and policy, in the order first seen.
pub fn table(runs: &[GridRun]) -> Vec<TableRow> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in runs {
        let k = (r.workload.clone(), r.policy.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(workload, policy)| {
            let mine: Vec<&GridRun> = runs
                .iter()
                .filter(|r| r.workload == workload && r.policy == policy)
                .collect();
            let at = |pct| mine.iter().filter_map(|r| r.at(pct)).collect::<Vec<f64>>();
            TableRow {
                seeds: mine.len(),
                at_100: stats(&at(100)),
                at_130: stats(&at(130)),
                workload,
                policy,
            }
        })
        .collect()
}

/// Mean curve over seeds per (workload, policy).
pub fn mean_curves(runs: &[GridRun], workload: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut policies: Vec<String> = Vec::new();
    for r in runs.iter().filter(|r| r.workload == workload) {
        if !policies.contains(&r.policy) {
            policies.push(r.policy.clone());
        }
    }
    policies
        .into_iter()
        .map(|p| {
            let mine: Vec<&GridRun> = runs
                .iter()
                .filter(|r| r.workload == workload && r.policy == p)
                .collect();
            let points = (0..=130)
                .filter_map(|x| {
                    let vals: Vec<f64> = mine.iter().filter_map(|r| r.at(x)).collect();
                    (!vals.is_empty())
                        .then(|| (x as f64, vals.iter().sum::<f64>() / vals.len() as f64))
                })
                .collect();
            (p, points)
        })
        .collect()
}

/// A workload file's name for outputs and tables: its stem (`openb_pod_list_default`
/// for `DIR/openb_pod_list_default.csv`).
pub fn workload_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// `name` made safe as part of a file name: anything but letters, digits, `.`, `_` and `-`
/// becomes `_`.
fn file_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes `path`, naming it in the error.
fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> anyhow::Result<()> {
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// Writes `results.md`, `results.csv`, `runs.json` and one curve plot per workload.
pub fn write(dir: &Path, runs: &[GridRun], header: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let rows = table(runs);
    let mut csv = String::from(
        "workload,policy,seeds,alloc_100_mean,alloc_100_min,alloc_100_max,alloc_130_mean,alloc_130_min,alloc_130_max\n",
    );
    let mut md = format!(
        "{header}\n\n| workload | policy | seeds | allocation at 100 % (mean, min–max) | allocation at 130 % (mean, min–max) |\n|---|---|---|---|---|\n"
    );
    for r in &rows {
        csv.push_str(&format!(
            "{},{},{},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2}\n",
            r.workload,
            r.policy,
            r.seeds,
            r.at_100.0,
            r.at_100.1,
            r.at_100.2,
            r.at_130.0,
            r.at_130.1,
            r.at_130.2
        ));
        md.push_str(&format!(
            "| {} | {} | {} | {:.2} ({:.2}–{:.2}) | {:.2} ({:.2}–{:.2}) |\n",
            r.workload,
            r.policy,
            r.seeds,
            r.at_100.0,
            r.at_100.1,
            r.at_100.2,
            r.at_130.0,
            r.at_130.1,
            r.at_130.2
        ));
    }
    write_file(&dir.join("results.csv"), csv)?;
    write_file(&dir.join("results.md"), md)?;
    write_file(&dir.join("runs.json"), serde_json::to_string_pretty(runs)?)?;
    let mut workloads: Vec<&str> = Vec::new();
    for r in runs {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    for w in workloads {
        let chart = gantry_plot::LineChart {
            title: format!("GPU allocation against arrived workload — openb {w}"),
            x_label: "arrived workload (% of GPU capacity)".into(),
            y_label: "GPU allocation (% of capacity)".into(),
            series: mean_curves(runs, w)
                .into_iter()
                .map(|(name, points)| gantry_plot::Series { name, points })
                .collect(),
            x_range: Some((0.0, 130.0)),
            y_range: Some((0.0, 100.0)),
            ..Default::default()
        };
        write_file(
            &dir.join(format!("curve-{}.svg", file_part(w))),
            chart.to_svg(),
        )?;
    }
    Ok(())
}
