//! Soak: plugin faults at scale against a live daemon.
//!
//! The `fault-injector` fixture is the live placement plugin; on about 30% of its calls it
//! traps, overruns its deadline, hogs memory up to its cap or returns an invalid plan
//! (double-booked GPU or half a gang), chosen from its seed and the cycle. Meanwhile a fixed
//! number of short jobs (mixed: no GPU, one, two, gangs) is submitted in small batches.
//!
//! Shown, bounded in jobs and in time:
//!
//! * every job starts and succeeds: each faulty cycle is answered by the fallback pipeline;
//! * every fault of the plugin in a live cycle is in `/v1/faults` with `fell_back: true`, and
//!   all four kinds (`trap`, `deadline-exceeded`, `memory-limit`, `invalid-output`) occur;
//! * no GPU is ever booked twice and no gang runs partially (`check_allocations` after every
//!   batch);
//! * after `QUARANTINE_AFTER` faults in a row the plugin is quarantined, and an operator sees
//!   it and why: `GET /v1/policy` lists `placement:fault-injector` under `quarantined`,
//!   `GET /v1/faults` has a `quarantined` record ("quarantined after 3 faults in a row")
//!   after the faults that caused it, and `/metrics` counts them per kind. The operator then
//!   re-enables the plugin (a new `PUT /v1/policy`, next seed), and the soak goes on.
//!
//! The counts are printed (`cargo test -p gantry-e2e --test soak -- --nocapture`).

use gantry_e2e::{Daemon, TERMINAL, WAIT, tasks};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Jobs submitted in all.
const JOBS: usize = 300;
/// Jobs per batch; a batch every [`PACE`].
const BATCH: usize = 6;
const PACE: Duration = Duration::from_millis(150);
/// Bound on the whole soak (submitting and draining).
const MAX_TIME: Duration = Duration::from_secs(240);
/// Quarantines after which the operator stops re-enabling the plugin.
const MAX_QUARANTINES: usize = 4;
/// The four injected kinds, as the API names them.
const KINDS: [&str; 4] = [
    "trap",
    "deadline-exceeded",
    "memory-limit",
    "invalid-output",
];
const PLUGIN: &str = "fault-injector";

/// The injector behind fifo, with its own deadline and a small memory cap so a memory hog
/// hits the cap well before the deadline.
fn pipeline(seed: u64) -> Value {
    json!({
        "priority": [{"plugin": "fifo"}],
        "placement": {
            "plugin": PLUGIN,
            "config": {"fault_rate": 0.3, "seed": seed},
            "deadline_ms": 200,
            "memory_mib": 32,
        },
        "preemption": {"plugin": "priority-preempt"},
    })
}

/// Makes the injector live, starting at `seed`; a refused dry run (the injector faulted on
/// the current queue) tries the next seed. Returns the seed that went live and the number
/// of refusals.
fn enable(d: &Daemon, mut seed: u64) -> (u64, u32) {
    let mut refused = 0;
    loop {
        let (status, body) = d.put("/v1/policy", &pipeline(seed));
        match status {
            200 => return (seed, refused),
            422 if body["error"]["code"] == "dry-run-failed" => {
                refused += 1;
                assert!(refused < 50, "the injector never passed a dry run: {body}");
                seed += 1;
            }
            _ => panic!("PUT /v1/policy answered {status}: {body}"),
        }
    }
}

/// Job `i` of the mix: 0, 1 or 2 GPUs, gangs of 1-GPU and of CPU-only tasks.
fn job(i: usize) -> Value {
    let (count, gpus) = [(1, 0), (1, 1), (1, 2), (2, 1), (1, 1), (2, 0)][i % 6];
    let sleep = ["0.05", "0.1", "0.2"][i % 3];
    json!({
        "name": format!("soak-{i}"),
        "argv": ["/bin/sh", "-c", format!("sleep {sleep}")],
        "tasks": tasks(count, gpus),
    })
}

/// A fault of the injector as `/v1/faults` shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Fault {
    at_ms: u64,
    cycle: u64,
    kind: String,
    message: String,
    fell_back: bool,
}

/// Adds the injector's new faults to `seen`.
fn poll_faults(d: &Daemon, seen: &mut BTreeSet<Fault>) {
    let (status, faults) = d.get("/v1/faults");
    assert_eq!(status, 200, "{faults}");
    for x in faults.as_array().expect("fault list") {
        if x["plugin"]["name"] != PLUGIN {
            continue;
        }
        assert_eq!(x["stage"], "placement", "{x}");
        seen.insert(Fault {
            at_ms: x["at_ms"].as_u64().expect("at_ms"),
            cycle: x["cycle"].as_u64().expect("cycle"),
            kind: x["fault"]["kind"].as_str().expect("kind").to_string(),
            message: x["fault"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            fell_back: x["fell_back"].as_bool().expect("fell_back"),
        });
    }
}

fn quarantined(d: &Daemon) -> bool {
    let (_, policy) = d.get("/v1/policy");
    policy["quarantined"]
        .as_array()
        .expect("quarantined list")
        .iter()
        .any(|q| q == &json!(format!("placement:{PLUGIN}")))
}

/// One quarantine as the operator found it.
struct Quarantine {
    seed: u64,
    record: Fault,
    causes: Vec<Fault>,
}

#[test]
fn faulty_placement_plugin_under_load() {
    let t0 = Instant::now();
    let d = Daemon::start(4);
    let (status, info) = d.post_bytes("/v1/plugins", gantry_components::FAULT_INJECTOR);
    assert_eq!(status, 201, "{info}");
    assert_eq!(info["name"], PLUGIN, "{info}");
    let (mut seed, mut refusals) = enable(&d, 1);
    let mut live_since_ms = 0u64;

    let mut ids: Vec<u64> = Vec::with_capacity(JOBS);
    let mut seen: BTreeSet<Fault> = BTreeSet::new();
    let mut quarantines: Vec<Quarantine> = Vec::new();
    // Set once `/v1/policy` shows the quarantine; cleared when the operator re-enables.
    let mut noticed_at: Option<Instant> = None;
    // Whether the live injector pipeline has not been quarantined yet.
    let mut armed = true;
    let mut allocation_checks = 0u32;
    while ids.len() < JOBS || noticed_at.is_some() {
        assert!(t0.elapsed() < MAX_TIME, "soak ran past {MAX_TIME:?}");
        for _ in 0..BATCH.min(JOBS - ids.len()) {
            ids.push(d.submit(&job(ids.len())));
        }
        std::thread::sleep(PACE);
        d.check_allocations();
        allocation_checks += 1;
        poll_faults(&d, &mut seen);
        if armed && noticed_at.is_none() && quarantined(&d) {
            noticed_at = Some(Instant::now());
        }
        let Some(noticed) = noticed_at else {
            continue;
        };
        // The operator looks for why: the `quarantined` record of this episode (written
        // by the next cycle with work, which the fallback decides) and the faults before it.
        // Only the new pipeline can fault with a real kind; the old, quarantined one may
        // still write `quarantined` records from cycles before the swap, so the episode's
        // record is the first one after the episode's first real fault.
        let episode: Vec<Fault> = seen
            .iter()
            .filter(|f| f.cycle > 0 && f.kind != "quarantined" && f.at_ms >= live_since_ms)
            .cloned()
            .collect();
        let first_cycle = episode.iter().map(|f| f.cycle).min().unwrap_or(u64::MAX);
        let record = seen
            .iter()
            .filter(|f| f.kind == "quarantined" && f.cycle > first_cycle)
            .min_by_key(|f| f.cycle)
            .cloned();
        let Some(record) = record else {
            assert!(
                noticed.elapsed() < WAIT,
                "quarantined, but no `quarantined` fault within {WAIT:?}\n{}",
                d.log_tail()
            );
            if ids.len() >= JOBS {
                // No more load of our own: give the next cycle something to decide.
                ids.push(d.submit(&job(ids.len())));
            }
            continue;
        };
        let causes: Vec<Fault> = episode
            .into_iter()
            .filter(|f| f.cycle < record.cycle)
            .collect();
        let causes = causes[causes.len().saturating_sub(3)..].to_vec();
        quarantines.push(Quarantine {
            seed,
            record,
            causes,
        });
        noticed_at = None;
        armed = false;
        if ids.len() < JOBS && quarantines.len() < MAX_QUARANTINES {
            armed = true;
            live_since_ms = now_ms();
            let (s, r) = enable(&d, seed + 1);
            seed = s;
            refusals += r;
        }
    }

    // Every job, faulty cycles or not, starts and succeeds.
    let deadline = Instant::now() + MAX_TIME.saturating_sub(t0.elapsed()).max(WAIT);
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for &id in &ids {
        let job = d.wait_for(&format!("job {id} to finish"), WAIT, || {
            let job = d.job(id);
            let state = job["state"].as_str().unwrap_or_default();
            TERMINAL.contains(&state).then_some(job)
        });
        assert!(Instant::now() < deadline, "soak ran past {MAX_TIME:?}");
        *states
            .entry(job["state"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
        assert_eq!(job["state"], "succeeded", "{job}");
    }
    d.check_allocations();
    poll_faults(&d, &mut seen);

    // Faults in live cycles were all answered by the fallback; dry-run faults (cycle 0)
    // refused a swap instead.
    let live: Vec<&Fault> = seen.iter().filter(|f| f.cycle > 0).collect();
    for f in &live {
        assert!(f.fell_back, "a live fault without fallback: {f:?}");
    }
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &live {
        *per_kind.entry(f.kind.as_str()).or_default() += 1;
    }
    let dry_run = seen.iter().filter(|f| f.cycle == 0).count();
    // The invalid plans, by what the host's validation found.
    let mut invalid: BTreeMap<&str, usize> = BTreeMap::new();
    for f in live.iter().filter(|f| f.kind == "invalid-output") {
        let what = if f.message.contains("booked beyond capacity") {
            "double-booked GPU"
        } else if f.message.contains("all or nothing") {
            "half a gang"
        } else if f.message.contains("started twice") {
            "same job started twice"
        } else {
            "other"
        };
        *invalid.entry(what).or_default() += 1;
    }

    let (_, policy) = d.get("/v1/policy");
    let (_, metrics) = d.get_text("/metrics");
    let metric_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("gantry_plugin_faults_total") && l.contains(PLUGIN))
        .collect();

    println!(
        "soak: {} jobs in {:.1}s, states {states:?}, {allocation_checks} allocation checks",
        ids.len(),
        t0.elapsed().as_secs_f64()
    );
    println!("soak: live-cycle faults of {PLUGIN} (all fell back): {per_kind:?}");
    println!("soak: invalid plans: {invalid:?}");
    println!("soak: dry-run faults (swap refused, next seed): {dry_run} ({refusals} refusals)");
    println!("soak: /v1/policy fault_counts: {}", policy["fault_counts"]);
    for l in &metric_lines {
        println!("soak: /metrics {l}");
    }
    for (i, q) in quarantines.iter().enumerate() {
        let causes: Vec<String> = q
            .causes
            .iter()
            .map(|f| format!("cycle {} {}", f.cycle, f.kind))
            .collect();
        println!(
            "soak: quarantine {} (seed {}): cycle {} \"{}\" after [{}]",
            i + 1,
            q.seed,
            q.record.cycle,
            q.record.message,
            causes.join(", ")
        );
    }

    for kind in KINDS {
        assert!(
            per_kind.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} fault in the soak: {per_kind:?}"
        );
    }
    assert!(
        invalid.get("double-booked GPU").is_some_and(|n| *n > 0) && !invalid.contains_key("other"),
        "invalid plans: {invalid:?}"
    );
    assert!(
        !quarantines.is_empty(),
        "never quarantined: {per_kind:?}\n{policy}"
    );
    for q in &quarantines {
        assert!(
            q.record.message.contains("faults in a row"),
            "{:?}",
            q.record
        );
        assert!(q.record.fell_back, "{:?}", q.record);
        assert_eq!(
            q.causes.len(),
            3,
            "the faults before a quarantine: {:?}",
            q.causes
        );
        assert!(
            q.causes.iter().all(|f| KINDS.contains(&f.kind.as_str())),
            "{:?}",
            q.causes
        );
    }
    for kind in KINDS {
        assert!(
            metric_lines
                .iter()
                .any(|l| l.contains(&format!("\"{kind}\""))),
            "/metrics does not count {kind}: {metric_lines:?}"
        );
    }
    let (status, health) = d.get("/v1/health");
    assert_eq!(status, 200, "{health}");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
