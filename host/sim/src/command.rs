//! The `gantry simulate` command line: `timeline`, `fill` and `fgd-grid`, their
//! arguments, and what each writes.
//!
//! Owns: argument parsing and dispatch. Does not own the simulation (the engine),
//! inputs (`workload`, `openb`) or outputs (`report`, `fgd_grid`).

use super::fgd_grid::{self, GridOptions};
use super::pipelines::{self, Builder, NamedPipeline};
use super::progress::Bar;
use super::report::{self, PipelineRun};
use super::{fgd_workload, workload};
use anyhow::{Context, bail};
use gantry_engine::sim::{SimJob, TimelineOptions, allocation_curve, run_fill, run_timeline};
use std::path::PathBuf;
use std::time::Instant;

/// What to simulate.
#[derive(Debug, clap::Subcommand)]
pub enum SimulateCommand {
    /// Jobs arrive at their submit time, run their duration and leave; one report with
    /// every pipeline side by side.
    Timeline(TimelineArgs),
    /// The FGD paper's protocol on any cluster and workload: offered one at a time,
    /// nothing departs, tuned to a share of the GPU capacity.
    Fill(FillArgs),
    /// The FGD paper's results grid on the Alibaba openb trace: seven policies × three
    /// workloads × seeds, with the results table and allocation curves.
    FgdGrid(GridArgs),
}

/// Shared by every mode.
#[derive(Debug, clap::Args)]
pub struct PipelineArgs {
    /// Pipeline files (JSON or TOML, as for `gantry policy set`); repeat to compare.
    #[arg(long = "pipeline")]
    pub pipelines: Vec<PathBuf>,
    /// Extra plugin components the pipelines may name.
    #[arg(long = "plugin")]
    pub plugins: Vec<PathBuf>,
    /// Run the built-in plugins compiled into the binary instead of as wasm components.
    #[arg(long)]
    pub native: bool,
    /// Directory for the report and plots.
    #[arg(long, default_value = "sim-out")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `gantry simulate timeline`.
#[derive(Debug, clap::Args)]
pub struct TimelineArgs {
    /// Cluster: JSON/JSONL nodes, a CSV (name,cpu_milli,memory_mib,gpus,gpu_model) or an openb node list.
    #[arg(long)]
    pub cluster: PathBuf,
    /// Workload: JSONL jobs, a CSV (name,submit_s,duration_s,gpus,...) or an openb pod list.
    #[arg(long)]
    pub workload: PathBuf,
    /// Node down/up events (JSONL: {"at_s": 3600, "node": "n1", "up": false}).
    #[arg(long)]
    pub node_events: Option<PathBuf>,
    /// Seed given to the plugins as `cycle.seed`.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Also run a cycle this often while jobs wait, seconds (default: only after events).
    #[arg(long)]
    pub cycle_interval_s: Option<f64>,
    /// Stop after this much simulated time, hours.
    #[arg(long)]
    pub horizon_h: Option<f64>,
    /// Half-life of the decayed usage plugins see (fair-share), hours (default 168).
    #[arg(long)]
    pub usage_half_life_h: Option<f64>,
    /// Divide every submit time by this (≥ 1; durations unchanged): a trace recorded on a
    /// lightly loaded cluster, replayed K times faster, offers K times the load.
    #[arg(long, default_value_t = 1.0)]
    pub arrival_speedup: f64,
    /// Pipelines, plugins and output.
    #[command(flatten)]
    pub common: PipelineArgs,
}

/// `gantry simulate fill`.
#[derive(Debug, clap::Args)]
pub struct FillArgs {
    /// Cluster file (as for `timeline`; an openb node list keeps GPU nodes only).
    #[arg(long)]
    pub cluster: PathBuf,
    /// Workload file (as for `timeline`; times are ignored).
    #[arg(long)]
    pub workload: PathBuf,
    /// Seeds: `42-51` or `42,43`.
    #[arg(long, default_value = "42")]
    pub seeds: String,
    /// Arrived demand to tune the workload to, as a share of GPU capacity.
    #[arg(long, default_value_t = 1.3)]
    pub tune: f64,
    /// Pipelines, plugins and output.
    #[command(flatten)]
    pub common: PipelineArgs,
}

/// `gantry simulate fgd-grid`.
#[derive(Debug, clap::Args)]
pub struct GridArgs {
    /// Directory with the openb CSVs (default: `$GANTRY_TRACE_DIR` or
    /// `shared/traces/alibaba-gpu-v2023` beside this tree or a parent).
    #[arg(long)]
    pub trace_dir: Option<PathBuf>,
    /// Seeds: `42-51` or `42,43`.
    #[arg(long, default_value = "42-51")]
    pub seeds: String,
    /// Workloads, comma-separated.
    #[arg(long, default_value = "default,multigpu50,gpuspec33")]
    pub workloads: String,
    /// Placement policies, comma-separated.
    #[arg(
        long,
        default_value = "random,dot-product,gpu-clustering,gpu-packing,best-fit,fgd,stranding"
    )]
    pub policies: String,
    /// Keep every N-th node and pod (1: the whole trace), for quick runs.
    #[arg(long, default_value_t = 1)]
    pub scale: usize,
    /// Worker threads (default: the machine's cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Run the plugins compiled into the binary instead of as wasm components.
    #[arg(long)]
    pub native: bool,
    /// Directory for results.md, results.csv, runs.json and the curves.
    #[arg(long, default_value = "docs/fgd-replay")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Parses `42-51` or `42,43,50`.
pub fn parse_seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let mut seeds = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (a.trim().parse()?, b.trim().parse()?);
                if b < a || b - a > 10_000 {
                    bail!("--seeds: bad range {part}");
                }
                seeds.extend(a..=b);
            }
            None => seeds.push(part.parse().with_context(|| format!("--seeds: `{part}`"))?),
        }
    }
    if seeds.is_empty() {
        bail!("--seeds: no seed given");
    }
    Ok(seeds)
}

fn builder(common: &PipelineArgs) -> anyhow::Result<Builder> {
    if common.native {
        if !common.plugins.is_empty() {
            bail!("--plugin components cannot run with --native");
        }
        return Ok(Builder::Native);
    }
    Builder::wasm(&common.plugins)
}

fn named_pipelines(common: &PipelineArgs) -> anyhow::Result<Vec<NamedPipeline>> {
    if common.pipelines.is_empty() {
        return Ok(vec![NamedPipeline {
            label: "default".into(),
            spec: gantry_policy::default_spec(),
        }]);
    }
    common
        .pipelines
        .iter()
        .map(|p| pipelines::read(p))
        .collect()
}

/// Runs a `gantry simulate` command.
pub fn run(cmd: SimulateCommand) -> anyhow::Result<()> {
    match cmd {
        SimulateCommand::Timeline(a) => timeline(a),
        SimulateCommand::Fill(a) => fill(a),
        SimulateCommand::FgdGrid(a) => grid(a),
    }
}

/// Divides every submit time by `k` (≥ 1); durations stay.
fn speed_up_arrivals(jobs: &mut [SimJob], k: f64) -> anyhow::Result<()> {
    if !(k.is_finite() && k >= 1.0) {
        bail!("--arrival-speedup must be a number ≥ 1, not {k}");
    }
    for j in jobs {
        j.submit_ms = (j.submit_ms as f64 / k) as u64;
    }
    Ok(())
}

fn timeline(a: TimelineArgs) -> anyhow::Result<()> {
    let nodes = workload::read_cluster(&a.cluster, false)?;
    let mut jobs = workload::read_workload(&a.workload)?;
    speed_up_arrivals(&mut jobs, a.arrival_speedup)?;
    let events = match &a.node_events {
        Some(p) => workload::read_node_events(p, &nodes)?,
        None => Vec::new(),
    };
    let opts = TimelineOptions {
        seed: a.seed,
        cycle_interval_ms: a.cycle_interval_s.map(|s| (s * 1000.0).max(1.0) as u64),
        horizon_ms: a.horizon_h.map(|h| (h * 3_600_000.0) as u64),
        usage_half_life_s: a.usage_half_life_h.map(|h| h * 3600.0),
    };
    let b = builder(&a.common)?;
    let mut runs = Vec::new();
    for named in named_pipelines(&a.common)? {
        let mut live = b
            .build(&named.spec)
            .with_context(|| format!("pipeline {}", named.label))?;
        let mut fallback = b.build(&gantry_policy::default_spec())?;
        let mut bar = Bar::new(&named.label, jobs.len() as u64, a.common.quiet);
        let started = Instant::now();
        let result = run_timeline(
            &nodes,
            &jobs,
            &events,
            &opts,
            &mut live,
            Some(&mut fallback),
            &mut |p| {
                bar.set(
                    p.settled as u64,
                    &format!("day {:.1}", p.now_ms as f64 / 86_400_000.0),
                );
            },
        );
        let wall_s = started.elapsed().as_secs_f64();
        eprintln!(
            "{}: {} events, {} cycles in {wall_s:.2} s ({:.0} events/s)",
            named.label,
            result.events,
            result.cycles,
            result.events as f64 / wall_s.max(1e-9)
        );
        runs.push(PipelineRun {
            label: named.label,
            wall_s,
            summary: result.summary(),
            result,
        });
    }
    report::write(&a.common.out, &runs)?;
    println!("{}", report::summary_table(&runs));
    println!("report and plots in {}", a.common.out.display());
    Ok(())
}

fn fill(a: FillArgs) -> anyhow::Result<()> {
    let nodes = workload::read_cluster(&a.cluster, true)?;
    let jobs = workload::read_workload(&a.workload)?;
    let seeds = parse_seeds(&a.seeds)?;
    let capacity: u64 = nodes.iter().map(|n| u64::from(n.gpus) * 1000).sum();
    if capacity == 0 {
        bail!("{}: the cluster has no GPUs", a.cluster.display());
    }
    let b = builder(&a.common)?;
    // Outputs are named after the file's stem (`openb_pod_list_default`), never its path.
    let workload_name = fgd_grid::workload_name(&a.workload);
    let mut runs = Vec::new();
    for named in named_pipelines(&a.common)? {
        for &seed in &seeds {
            let mut live = b
                .build(&named.spec)
                .with_context(|| format!("pipeline {}", named.label))?;
            let sequence = fgd_workload::sequence(&jobs, capacity, seed, a.tune);
            let mut bar = Bar::new(
                &format!("{} seed {seed}", named.label),
                sequence.len() as u64,
                a.common.quiet,
            );
            let started = Instant::now();
            let result = run_fill(&nodes, &sequence, seed, None, &mut live, &mut |d, _| {
                bar.set(d as u64, "")
            });
            let curve = allocation_curve(&result, 130)
                .into_iter()
                .map(|(_, v)| v)
                .collect();
            runs.push(fgd_grid::GridRun {
                workload: workload_name.clone(),
                policy: named.label.clone(),
                seed,
                curve,
                offered: result.points.len(),
                placed: result.placed,
                failed: result.failed,
                faults: result.faults,
                final_allocation_pct: result
                    .points
                    .last()
                    .map_or(0.0, |p| 100.0 * p.allocated_milli as f64 / capacity as f64),
                wall_ms: started.elapsed().as_millis() as u64,
            });
        }
    }
    fgd_grid::write(&a.common.out, &runs, "# Fill-protocol results")?;
    let results = a.common.out.join("results.md");
    print!(
        "{}",
        std::fs::read_to_string(&results).with_context(|| results.display().to_string())?
    );
    Ok(())
}

fn grid(a: GridArgs) -> anyhow::Result<()> {
    let split = |s: &str| {
        s.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
    };
    let opts = GridOptions {
        trace_dir: match a.trace_dir {
            Some(d) => d,
            None => super::openb::find_trace_dir().context(
                "--trace-dir: the openb trace was not found (give --trace-dir or set GANTRY_TRACE_DIR)",
            )?,
        },
        workloads: split(&a.workloads),
        policies: split(&a.policies),
        seeds: parse_seeds(&a.seeds)?,
        tune: 1.3,
        scale: a.scale.max(1),
        threads: a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        quiet: a.quiet,
    };
    let b = if a.native {
        Builder::Native
    } else {
        Builder::wasm(&[])?
    };
    let started = Instant::now();
    let runs = fgd_grid::run(&opts, &b)?;
    let wall = started.elapsed().as_secs_f64();
    let header = format!(
        "# FGD replay on the Alibaba openb trace\n\nGPU allocation (% of milli-GPU capacity) at 100 % and 130 % arrived workload, mean and min–max over seeds {}; fill protocol of `docs/fgd-replay/method.md`; {} plugins; scale 1/{}; {} runs in {wall:.1} s on {} threads.\n\nProduced by `gantry simulate fgd-grid{}`.",
        a.seeds,
        if a.native { "native" } else { "wasm" },
        opts.scale,
        runs.len(),
        opts.threads,
        if a.native { " --native" } else { "" },
    );
    fgd_grid::write(&a.out, &runs, &header)?;
    print!("{}", std::fs::read_to_string(a.out.join("results.md"))?);
    eprintln!("grid wall time {wall:.1} s; results in {}", a.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::speed_up_arrivals;

    #[test]
    fn arrivals_speed_up_and_durations_stay() {
        let csv = "name,submit_s,duration_s,gpus\na,0,60,1\nb,3600,60,1\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.csv");
        std::fs::write(&path, csv).unwrap();
        let mut jobs = crate::workload::read_workload(&path).unwrap();
        speed_up_arrivals(&mut jobs, 100.0).unwrap();
        let got: Vec<(u64, u64)> = jobs.iter().map(|j| (j.submit_ms, j.duration_ms)).collect();
        assert_eq!(got, vec![(0, 60_000), (36_000, 60_000)]);
        for bad in [0.5, f64::NAN, f64::INFINITY] {
            let err = speed_up_arrivals(&mut jobs, bad).unwrap_err().to_string();
            assert!(err.contains("--arrival-speedup"), "{err}");
        }
    }
}
