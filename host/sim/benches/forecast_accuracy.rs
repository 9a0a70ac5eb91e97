//! Benchmark: how accurate start forecasts are, on the Alibaba openb trace (issue 48).
//!
//! The trace's pods (`openb_pod_list_default.csv`: creation and deletion times give each
//! a submit time and a runtime) replay through the simulator on every `FORECAST_NODE_STRIDE`-th
//! GPU node of the trace (default 140: 9 nodes, small enough that jobs queue), with `fifo` and
//! `first-fit` compiled in (the placement the forecast models). The trace has no users and
//! no time limits, so:
//!
//! * the runtime model is keyed on what it has: QoS, GPU models and shape, then QoS and
//!   shape, then QoS, learnt from the jobs that ended so far in the same replay;
//! * each job gets a time limit as users set them, by an overestimate model: its real
//!   runtime times a factor of 1.5, 2, 3, 5 or 10 (one in five each, by the job's index),
//!   rounded up to a quarter of an hour (SLURM sites see limits 2-10× the runtime).
//!
//! At the first cycle that sees a job pending, the benchmark forecasts it twice from that
//! cycle's snapshot and priority order: Gantry's forecast (runtimes drawn from the model,
//! five replays, the median) and a time-limit-only estimate (every job runs its limit, one
//! replay: SLURM's `squeue --start`). After the replay it compares each with the start the
//! job really got. Jobs that started at once are left out (both say "now").
//!
//! `cargo bench -p gantry-sim --bench forecast_accuracy` prints, for both, the median
//! absolute error and the share within ±10 % and ±30 % of the job's real wait. Aim: half
//! the time-limit estimate's median error or better. `FORECAST_JOBS` (default 3000) caps
//! the jobs replayed.

use gantry_engine::forecast::{ForecastOptions, RuntimeModel, forecast};
use gantry_engine::sim::{SimJob, TimelineOptions, run_timeline_observed};
use gantry_sim::openb;
use gantry_sim::pipelines::Builder;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::{Duration, Instant};

const FACTORS: [f64; 5] = [1.5, 2.0, 3.0, 5.0, 10.0];
const QUARTER_HOUR_S: u64 = 900;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The runtime model's keys of a trace job, most specific first.
fn keys(j: &SimJob) -> Vec<String> {
    let t = &j.tasks[0];
    let shape = format!("{}x{}", t.gpus, t.gpu_milli);
    vec![
        format!("{}|{}|{shape}", j.user, t.gpu_models.join(",")),
        format!("{}|{shape}", j.user),
        j.user.clone(),
    ]
}

/// Median, and the share within ±10 % and ±30 % of the real wait, of `errors`
/// ((|forecast − start| s, real wait s)).
fn summary(errors: &mut [(f64, f64)]) -> (f64, f64, f64) {
    if errors.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    errors.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = errors[errors.len() / 2].0;
    let within = |p: f64| {
        errors.iter().filter(|(e, wait)| *e <= p * wait).count() as f64 / errors.len() as f64
    };
    (median, within(0.10), within(0.30))
}

fn main() -> anyhow::Result<()> {
    let Some(dir) = openb::find_trace_dir() else {
        println!("forecast accuracy: no openb trace here (set GANTRY_TRACE_DIR); nothing measured");
        return Ok(());
    };
    let stride = env_or("FORECAST_NODE_STRIDE", 140).max(1);
    let max_jobs = env_or("FORECAST_JOBS", 3000);
    let nodes: Vec<_> = openb::read_nodes(&dir.join("openb_node_list_gpu_node.csv"), true)?
        .into_iter()
        .step_by(stride)
        .collect();
    let mut jobs: Vec<SimJob> = openb::read_pods(&dir.join("openb_pod_list_default.csv"))?
        .iter()
        .filter(|p| p.run_s > 0)
        .map(openb::Pod::to_job)
        .collect();
    jobs.sort_by_key(|j| j.submit_ms);
    jobs.truncate(max_jobs);
    for (i, j) in jobs.iter_mut().enumerate() {
        let limit = (j.duration_ms as f64 / 1000.0 * FACTORS[i % FACTORS.len()]).ceil() as u64;
        j.time_limit_s = limit.div_ceil(QUARTER_HOUR_S).max(1) * QUARTER_HOUR_S;
    }
    let job_keys: Vec<Vec<String>> = jobs.iter().map(keys).collect();
    let spec: gantry_policy::PipelineSpec = serde_json::from_value(serde_json::json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {"plugin": "first-fit"},
    }))?;
    let mut live = Builder::Native.build(&spec)?;

    let mut model = RuntimeModel::new();
    let mut seen_running: HashSet<u64> = HashSet::new();
    let mut ends: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut learnt: HashMap<u64, Option<u64>> = HashMap::new();
    let mut by_limit: HashMap<u64, Option<u64>> = HashMap::new();
    let mut forecasting = Duration::ZERO;
    let mut forecasts = 0u64;
    let mut largest_queue = 0usize;
    let default_ms = 3_600_000;
    // A year's horizon: the point is how far off each estimate is, not the daemon's cut.
    let year = ForecastOptions {
        horizon_ms: 365 * 86_400_000,
        ..Default::default()
    };
    let mut observe = |snap: &gantry_engine::Snapshot, outcome: &gantry_engine::CycleOutcome| {
        let now = snap.ctx.now_ms;
        for r in &snap.running {
            if seen_running.insert(r.job.id) {
                let j = &jobs[(r.job.id - 1) as usize];
                let run = j.duration_ms.min(j.time_limit_s * 1000);
                ends.push(Reverse((r.start_ms + run, r.job.id)));
            }
        }
        while let Some(&Reverse((end, id))) = ends.peek() {
            if end > now {
                break;
            }
            ends.pop();
            let j = &jobs[(id - 1) as usize];
            model.observe(
                &job_keys[(id - 1) as usize],
                j.duration_ms.min(j.time_limit_s * 1000),
            );
        }
        let fresh: Vec<u64> = snap
            .pending
            .iter()
            .map(|j| j.id)
            .filter(|id| !learnt.contains_key(id))
            .collect();
        if fresh.is_empty() {
            return;
        }
        largest_queue = largest_queue.max(snap.pending.len());
        let t0 = Instant::now();
        let replays = ForecastOptions::default().replays;
        let drawn = |j: &gantry_contract::Job, r: usize| {
            let u = (r as f64 + 0.5) / replays as f64;
            let keys = &job_keys[(j.id - 1) as usize];
            model.draw(keys, j.time_limit_s * 1000, default_ms, u).0
        };
        let ours = forecast(snap, &outcome.order, &drawn, year);
        forecasting += t0.elapsed();
        forecasts += 1;
        let limit = |j: &gantry_contract::Job, _: usize| j.time_limit_s * 1000;
        let one = ForecastOptions { replays: 1, ..year };
        let theirs = forecast(snap, &outcome.order, &limit, one);
        let fresh: HashSet<u64> = fresh.into_iter().collect();
        for f in ours.into_iter().filter(|f| fresh.contains(&f.job)) {
            learnt.insert(f.job, f.p50_ms);
        }
        for f in theirs.into_iter().filter(|f| fresh.contains(&f.job)) {
            by_limit.insert(f.job, f.p50_ms);
        }
    };
    let started = Instant::now();
    let result = run_timeline_observed(
        &nodes,
        &jobs,
        &[],
        &TimelineOptions::default(),
        &mut live,
        None,
        &mut |_| {},
        &mut observe,
    );
    let wall = started.elapsed();

    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let (mut waited, mut ours_none, mut theirs_none) = (0usize, 0usize, 0usize);
    for (i, r) in result.jobs.iter().enumerate() {
        let id = i as u64 + 1;
        let Some(start) = r.start_ms else { continue };
        let wait_s = start.saturating_sub(r.submit_ms) as f64 / 1000.0;
        if wait_s <= 0.0 {
            continue;
        }
        waited += 1;
        let err = |f: Option<u64>| f.map(|t| (t.abs_diff(start) as f64 / 1000.0, wait_s));
        match learnt.get(&id).copied().flatten() {
            Some(t) => ours.extend(err(Some(t))),
            None => ours_none += 1,
        }
        match by_limit.get(&id).copied().flatten() {
            Some(t) => theirs.extend(err(Some(t))),
            None => theirs_none += 1,
        }
    }
    let (om, o10, o30) = summary(&mut ours);
    let (tm, t10, t30) = summary(&mut theirs);
    println!(
        "forecast accuracy on openb: {} jobs on {} nodes (every {stride}th), {} cycles, largest queue {largest_queue}, replay {:.1} s",
        jobs.len(),
        nodes.len(),
        result.cycles,
        wall.as_secs_f64()
    );
    println!(
        "  {waited} jobs waited; forecasts made at {forecasts} cycles, {:.1} ms each on average (Gantry's, 5 replays)",
        forecasting.as_secs_f64() * 1000.0 / forecasts.max(1) as f64
    );
    println!(
        "  {:<28} {:>16} {:>10} {:>10} {:>10}",
        "estimate", "median |error|", "±10 %", "±30 %", "no start"
    );
    println!(
        "  {:<28} {:>14.0} s {:>9.1}% {:>9.1}% {:>10}",
        "Gantry (learnt runtimes)",
        om,
        o10 * 100.0,
        o30 * 100.0,
        ours_none
    );
    println!(
        "  {:<28} {:>14.0} s {:>9.1}% {:>9.1}% {:>10}",
        "time limit only (SLURM)",
        tm,
        t10 * 100.0,
        t30 * 100.0,
        theirs_none
    );
    println!(
        "  ratio of median errors (Gantry / time limit): {:.2}",
        om / tm
    );
    Ok(())
}
