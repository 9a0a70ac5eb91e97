//! `scale_32`: thirty-two nodes on one machine, Gantry beside SLURM in one run.
//!
//! The Gantry side starts one controller and `BENCH_AGENTS` (32) `gantry agent` processes on
//! 127.0.0.1 with 8 fake GPUs each and the execution defaults (`gantry_cluster.rs`), puts the
//! day's pipeline in place (fair-share `multifactor`, EASY `backfill`, `priority-preempt`, the
//! built-in wasm components) and measures:
//!
//! * idle: heartbeat bytes per agent per second and the controller's CPU for them; a wide gang
//!   (one 8-GPU rank on every node) from submit, and from its placement, to every rank running;
//! * the day (`day.rs`): `BENCH_JOBS` (20,000) jobs from 4 clients, two agents killed and
//!   restarted, a 3-replica service throughout; submit p50/p99/max, jobs/s end to end, cycle
//!   time over the largest backlog, the wide gang again mid-day, CPU seconds per job (the
//!   controller, the agents, the whole host), RSS, the time to notice a killed node and move
//!   its jobs off it, and the verdict of `check.rs` (nothing lost, nothing run twice).
//!
//! The SLURM side (`BENCH_SIDES=gantry,slurm`, with `BENCH_SLURM_RUN` the peer's run
//! directory, its nodes already up) runs the same stream through `slurm_peer.rs`.
//!
//! Prints `RESULT {json}` lines, appended to `target/bench-scale-32/<side>-<time>.jsonl`; asserts
//! nothing. `docs/benchmarks/scale-32.md` has the commands and the results.

mod check;
mod day;
mod gantry_api;
mod gantry_cluster;
mod procstat;
mod report;
mod slurm_peer;

use day::{Cluster, Kind, Res, unix_now};
use gantry_cluster::GantryCluster;
use report::Sample;
use serde_json::{Value, json};
use slurm_peer::SlurmPeer;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn knob(name: &str, default: u64) -> Res<u64> {
    match std::env::var(name) {
        Ok(v) => Ok(v.parse().map_err(|e| format!("{name}={v}: {e}"))?),
        Err(_) => Ok(default),
    }
}

struct Knobs {
    agents: usize,
    jobs: usize,
    array: u32,
    seed: u64,
    down_after_ms: u64,
    wide_reps: usize,
}

/// Where the `RESULT` lines go, with the fields every line carries.
struct Out {
    file: std::fs::File,
    common: Value,
}

impl Out {
    fn emit(&mut self, metric: &str, fields: Value) -> Res<()> {
        let mut j = self.common.clone();
        j["metric"] = json!(metric);
        for (k, v) in fields.as_object().into_iter().flatten() {
            j[k] = v.clone();
        }
        println!("RESULT {j}");
        writeln!(self.file, "{j}")?;
        Ok(())
    }
}

/// What a side lends the day besides its [`Cluster`]: samples and process ids.
struct Probe<'a> {
    sample: &'a (dyn Fn() -> Sample + Sync),
    controller_pid: u32,
    agent_pids: &'a (dyn Fn() -> Vec<u32> + Sync),
}

/// A wide gang on an idle or busy cluster: (submit → every rank running, placement → every
/// rank running), seconds.
fn wide_gang(cluster: &dyn Cluster, nodes: usize, marker: &Path) -> Res<(f64, f64)> {
    let t0 = unix_now();
    let id = cluster.submit_wide(nodes, marker)?;
    let all = day::wide_ranks_started(marker, &id, nodes, Duration::from_secs(900))?;
    let placed = cluster.placed_at(&id)?.unwrap_or(f64::NAN);
    Ok((all - t0, all - placed))
}

fn wait_idle(cluster: &dyn Cluster, limit: Duration) -> Res<()> {
    let t = Instant::now();
    while cluster.active()? > 0 {
        if t.elapsed() > limit {
            return Err("the cluster never became idle".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Wide gangs one after another on an idle cluster: the numbers.
fn idle_wide_gangs(k: &Knobs, cluster: &dyn Cluster, marker: &Path) -> Res<Value> {
    let mut idle = Vec::new();
    for _ in 0..k.wide_reps {
        idle.push(wide_gang(cluster, k.agents, marker)?);
        wait_idle(cluster, Duration::from_secs(120))?;
    }
    let mut sub: Vec<f64> = idle.iter().map(|w| w.0).collect();
    let mut placed: Vec<f64> = idle.iter().map(|w| w.1).collect();
    Ok(json!({
        "reps": idle.len(),
        "submit_to_all_running_median_s": report::quantile(&mut sub, 0.5),
        "submit_to_all_running_max_s": report::quantile(&mut sub, 1.0),
        "placed_to_all_running_median_s": report::quantile(&mut placed, 0.5),
        "placed_to_all_running_max_s": report::quantile(&mut placed, 1.0),
    }))
}

/// The day with its sampler and the mid-day wide gang; the numbers.
fn the_day(
    k: &Knobs,
    cluster: &dyn Cluster,
    probe: &Probe,
    marker: &Path,
    items: &[Kind],
) -> Res<(day::DayLog, Value)> {
    let host0 = procstat::host_cpu_s()?;
    let ctl0 = procstat::cpu_s(probe.controller_pid)?;
    let agents0 = procstat::cpu_sum(&(probe.agent_pids)());
    let stop = AtomicBool::new(false);
    let samples = Mutex::new(Vec::<Sample>::new());
    let busy_wide = Mutex::new(None);
    let t0 = Instant::now();
    let threshold = (k.jobs / 10).max(50);
    let log = std::thread::scope(|s| {
        s.spawn(|| {
            let mut wide_started = false;
            while !stop.load(Ordering::Relaxed) {
                let mut sample = (probe.sample)();
                sample.at_s = t0.elapsed().as_secs_f64();
                if !wide_started && sample.pending >= threshold {
                    wide_started = true;
                    let busy_wide = &busy_wide;
                    s.spawn(move || {
                        let r = wide_gang(cluster, k.agents, marker).map_err(|e| e.to_string());
                        if let Ok(mut w) = busy_wide.lock() {
                            *w = Some(r);
                        }
                    });
                }
                if let Ok(mut v) = samples.lock() {
                    v.push(sample);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let progress = |at: f64, active: usize| eprintln!("  {at:.0} s: {active} active");
        let log = day::run_day(
            cluster,
            items,
            marker,
            &[1, 2],
            Duration::from_secs(3600),
            &progress,
        );
        stop.store(true, Ordering::Relaxed);
        log
    });
    let host1 = procstat::host_cpu_s()?;
    let ctl1 = procstat::cpu_s(probe.controller_pid)?;
    let agent_pids = (probe.agent_pids)();
    let agents1 = procstat::cpu_sum(&agent_pids);
    let jobs = day::jobs_in(items) as f64;
    let mut f = report::day_numbers(&log, items);
    let samples = samples.into_inner().unwrap_or_default();
    for (key, v) in report::cycle_numbers(&samples)
        .as_object()
        .into_iter()
        .flatten()
    {
        f[key] = v.clone();
    }
    let (rss, hwm) = procstat::memory_mib(probe.controller_pid)?;
    let agent_hwm = agent_pids
        .iter()
        .filter_map(|p| procstat::memory_mib(*p).ok())
        .map(|(_, h)| h)
        .fold(0.0, f64::max);
    let controller_cpu = (ctl1.0 - ctl0.0) + (ctl1.1 - ctl0.1);
    f["controller_cpu_ms_per_job"] = json!(controller_cpu * 1e3 / jobs);
    f["agents_cpu_ms_per_job"] = json!((agents1 - agents0) * 1e3 / jobs);
    f["host_busy_cpu_ms_per_job"] = json!((host1.0 - host0.0) * 1e3 / jobs);
    f["host_busy_pct"] = json!(100.0 * (host1.0 - host0.0) / (host1.1 - host0.1).max(1e-9));
    f["controller_rss_mib"] = json!(rss);
    f["controller_peak_rss_mib"] = json!(hwm);
    f["agent_peak_rss_mib_max"] = json!(agent_hwm);
    f["node_losses"] = report::losses(&log);
    match busy_wide.into_inner().ok().flatten() {
        Some(Ok((s, p))) => {
            f["wide_gang_busy_submit_to_all_running_s"] = json!(s);
            f["wide_gang_busy_placed_to_all_running_s"] = json!(p);
        }
        Some(Err(e)) => f["wide_gang_busy_error"] = json!(e),
        None => f["wide_gang_busy_error"] = json!("never submitted"),
    }
    Ok((log, f))
}

fn verdict_fields(
    log: &day::DayLog,
    marker: &Path,
    states: &std::collections::BTreeMap<String, String>,
) -> Res<Value> {
    let v = check::verify(log, marker, states)?;
    Ok(json!({
        "acknowledged": v.acknowledged, "succeeded": v.succeeded, "cancelled": v.cancelled,
        "restarted": v.restarted, "lost": v.lost.len(), "ran_twice_at_once": v.ran_twice.len(),
        "ran_again_after_end_on_killed_node": v.rerun_after_end.len(),
        "wrong_state": v.wrong_state.len(), "missing_end": v.missing_end.len(),
        "clean": v.clean(), "summary": v.summary(),
    }))
}

fn gantry_side(k: &Knobs, items: &[Kind], out: &mut Out) -> Res<()> {
    let dir = tempfile::Builder::new()
        .prefix("gantry-scale32-")
        .tempdir()?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    }
    let marker = day::marker_file(&dir.path().join("day"))?;
    let t = Instant::now();
    let cluster = GantryCluster::start(dir.path(), k.agents, k.down_after_ms)?;
    let up_s = t.elapsed().as_secs_f64();
    cluster.api.use_day_pipeline()?;
    let ctl = cluster.controller.0.id();
    // Idle: heartbeats only.
    let pids = cluster.agent_pids();
    let b0 = procstat::tcp_bytes(&pids)?;
    let c0 = procstat::cpu_s(ctl)?;
    let window = Duration::from_secs(10);
    std::thread::sleep(window);
    let b1 = procstat::tcp_bytes(&pids)?;
    let c1 = procstat::cpu_s(ctl)?;
    let rate = |side: fn(&(u64, u64)) -> u64| -> Vec<f64> {
        b1.iter()
            .filter_map(|(pid, now)| {
                let was = b0.get(pid)?;
                Some(side(now).saturating_sub(side(was)) as f64 / window.as_secs_f64())
            })
            .collect()
    };
    let mut sent = rate(|b| b.0);
    let mut received = rate(|b| b.1);
    let agent_rss = pids
        .iter()
        .filter_map(|p| procstat::memory_mib(*p).ok())
        .map(|(r, _)| r)
        .fold(0.0, f64::max);
    out.emit(
        "idle",
        json!({
            "all_up_s": up_s,
            "agent_tcp_sent_bytes_per_s_median": report::quantile(&mut sent, 0.5),
            "agent_tcp_sent_bytes_per_s_max": report::quantile(&mut sent, 1.0),
            "agent_tcp_received_bytes_per_s_median": report::quantile(&mut received, 0.5),
            "controller_idle_cpu_pct": 100.0 * (c1.0 - c0.0) / window.as_secs_f64(),
            "agent_rss_mib_max": agent_rss,
            "controller_rss_mib": procstat::memory_mib(ctl)?.0,
            "load1": procstat::load1(),
        }),
    )?;
    out.emit("wide_gang_idle", idle_wide_gangs(k, &cluster, &marker)?)?;
    let service = cluster.api.start_service()?;
    let t = Instant::now();
    while cluster.api.healthy_replicas(service)? < 3 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let service_ready_s = t.elapsed().as_secs_f64();
    let api = &cluster.api;
    let sample = || Sample {
        pending: api.pending().unwrap_or(0),
        load1: procstat::load1(),
        cycles: api.cycle_buckets().unwrap_or_default(),
        ..Sample::default()
    };
    let agent_pids = || cluster.agent_pids();
    let probe = Probe {
        sample: &sample,
        controller_pid: ctl,
        agent_pids: &agent_pids,
    };
    let (log, mut f) = the_day(k, &cluster, &probe, &marker, items)?;
    f["service_ready_s"] = json!(service_ready_s);
    f["service_healthy_after_day"] = json!(cluster.api.healthy_replicas(service)?);
    cluster.api.stop_service(service)?;
    let states = cluster.api.final_states()?;
    out.emit("day", f)?;
    out.emit("verdict", verdict_fields(&log, &marker, &states)?)?;
    cluster.stop();
    Ok(())
}

fn slurm_side(k: &Knobs, items: &[Kind], out: &mut Out) -> Res<()> {
    let run = PathBuf::from(
        std::env::var("BENCH_SLURM_RUN").unwrap_or_else(|_| "/var/tmp/slurm-peer".into()),
    );
    let peer = SlurmPeer::new(&run, Duration::from_millis(k.down_after_ms));
    let up = peer.nodes_up()?;
    if up < k.agents {
        return Err(format!("the SLURM peer has {up} nodes up, not {}", k.agents).into());
    }
    let dir = tempfile::Builder::new()
        .prefix("slurm-scale32-")
        .tempdir()?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    }
    let marker = day::marker_file(&dir.path().join("day"))?;
    let since = std::process::Command::new("date")
        .arg("+%Y-%m-%dT%H:%M:%S")
        .output()?;
    let since = String::from_utf8_lossy(&since.stdout).trim().to_string();
    let ctl = peer.slurmctld_pid()?;
    let slurmds = peer.slurmd_pids();
    let agent_rss = slurmds
        .iter()
        .filter_map(|p| procstat::memory_mib(*p).ok())
        .map(|(r, _)| r)
        .fold(0.0, f64::max);
    out.emit("idle", json!({"slurmd_rss_mib_max": agent_rss, "slurmctld_rss_mib": procstat::memory_mib(ctl)?.0, "load1": procstat::load1()}))?;
    out.emit("wide_gang_idle", idle_wide_gangs(k, &peer, &marker)?)?;
    peer.sdiag(true)?;
    let sample = || Sample {
        pending: peer.pending().unwrap_or(0),
        load1: procstat::load1(),
        ..Sample::default()
    };
    let slurmd_pids = || peer.slurmd_pids();
    let probe = Probe {
        sample: &sample,
        controller_pid: ctl,
        agent_pids: &slurmd_pids,
    };
    let (log, mut f) = the_day(k, &peer, &probe, &marker, items)?;
    peer.reap();
    for (key, v) in peer.sdiag(false)? {
        f[format!("sdiag_{key}")] = json!(v);
    }
    let states = peer.final_states(&since, day::jobs_in(items))?;
    out.emit("day", f)?;
    out.emit("verdict", verdict_fields(&log, &marker, &states)?)?;
    Ok(())
}

fn main() -> Res<()> {
    let k = Knobs {
        agents: knob("BENCH_AGENTS", 32)? as usize,
        jobs: knob("BENCH_JOBS", 20_000)? as usize,
        array: knob("BENCH_ARRAY", 250)? as u32,
        seed: knob("BENCH_SEED", 49)?,
        down_after_ms: knob("BENCH_DOWN_AFTER_MS", 10_000)?,
        wide_reps: knob("BENCH_WIDE_REPS", 3)? as usize,
    };
    let items = day::plan(k.jobs, k.agents as u32, k.array, k.seed);
    let sides = std::env::var("BENCH_SIDES").unwrap_or_else(|_| "gantry".into());
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-scale-32");
    std::fs::create_dir_all(&target)?;
    for side in sides.split(',') {
        let path = target.join(format!("{side}-{}.jsonl", unix_now() as u64));
        let common = json!({
            "side": side, "nodes": k.agents, "gpus_per_node": 8, "seed": k.seed,
            "host_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        });
        let mut out = Out {
            file: std::fs::File::create(&path)?,
            common,
        };
        eprintln!(
            "{side}: {} items, {} jobs -> {}",
            items.len(),
            day::jobs_in(&items),
            path.display()
        );
        match side {
            "gantry" => gantry_side(&k, &items, &mut out)?,
            "slurm" => slurm_side(&k, &items, &mut out)?,
            other => return Err(format!("BENCH_SIDES: unknown side {other}").into()),
        }
    }
    Ok(())
}
