//! Crash safety under load: eight concurrent clients submit jobs while the test SIGKILLs the
//! daemon at random moments (at least 5 times) and restarts it on the same data directory.
//! Afterwards every job that got a 2xx is present exactly once with the spec it was submitted
//! with, no submission (acknowledged or not) exists twice, no job appears that nobody submitted,
//! every job finishes and succeeds having run exactly once (each run appends a line to a file of
//! its own), no GPU is booked by a job that is not running, and job ids are never reused. After
//! each restart, every job acknowledged before the kill is already there. It also prints how the
//! daemon recovered tasks whose start was stored but whose pid was not (adopted, ended, requeued).
//!
//! Each submission carries a unique name, so a duplicate shows as a name listed twice. A request
//! that failed in transport (the daemon died under it) is not acknowledged: its job may or may not
//! exist, but at most once.
//!
//! Size: `GANTRY_CRASH_JOBS` acknowledged jobs (default 1,000, the CI size; the issue's long run
//! is `GANTRY_CRASH_JOBS=10000`), `GANTRY_CRASH_KILLS` kills (default 5, at least 5);
//! `GANTRY_CRASH_SEED` replays the random kill moments and job mix of an earlier run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, TERMINAL, id_of};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Concurrent submitting clients.
const CLIENTS: usize = 8;

/// Fake GPUs on the daemon: whole-GPU and quarter-GPU jobs share them.
const GPUS: u32 = 8;

/// Bound on the whole submission phase (kills included).
const SUBMIT_BOUND: Duration = Duration::from_secs(480);

/// After a transport error, how long a client waits for a new daemon before trying again anyway.
const RECONNECT_WAIT: Duration = Duration::from_secs(5);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

/// xorshift64*: enough randomness for kill moments and the job mix, replayable from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// Each run of a job appends a line to `<out>/runs-<id>`, so a job run twice shows.
const RECORD_RUN: &str = r#"echo run >> "$OUTDIR/runs-$GANTRY_JOB_ID""#;

/// A job of one of four kinds, picked by `kind`: CPU only; a quarter of a GPU; one whole GPU;
/// CPU only and running for 300 ms (so that some are still running at a kill).
fn spec(name: &str, kind: u64, out: &str) -> Value {
    let (gpus, gpu_milli, script) = match kind % 4 {
        0 => (0, 0, RECORD_RUN.to_string()),
        1 => (0, 250, RECORD_RUN.to_string()),
        2 => (1, 0, RECORD_RUN.to_string()),
        _ => (0, 0, format!("sleep 0.3; {RECORD_RUN}")),
    };
    json!({
        "name": name,
        "argv": ["/bin/sh", "-c", script],
        "env": {"OUTDIR": out},
        "tasks": [{"count": 1, "gpus": gpus, "gpu_milli": gpu_milli, "cpu_milli": 1, "memory_mib": 1}],
    })
}

/// What the daemon is reachable at, and how many times it was restarted.
struct Target {
    base: RwLock<String>,
    generation: AtomicU64,
}

/// What the clients learned: acknowledged submissions (id → (name, spec)), names whose request
/// failed in transport or with a 5xx, and any unexpected answer.
#[derive(Default)]
struct Ledger {
    acked: Vec<(u64, String, Value)>,
    unacked: BTreeSet<String>,
    server_errors: u64,
    unexpected: Vec<String>,
}

/// The base URL the daemon of `generation` printed (the harness's `daemon-<gen>.out`).
fn base_of(d: &Daemon, generation: u64) -> String {
    let path = d
        .out_dir()
        .parent()
        .expect("out dir has a parent")
        .join(format!("daemon-{generation}.out"));
    let text = std::fs::read_to_string(&path).expect("daemon stdout");
    text.lines()
        .find_map(|l| l.strip_prefix("gantry listening on "))
        .unwrap_or_else(|| panic!("no address in {}", path.display()))
        .trim()
        .to_string()
}

fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(30)))
        .build();
    ureq::Agent::new_with_config(config)
}

/// One client: submits until `quota` submissions are acknowledged (or `stop` is set), each
/// attempt with a fresh name; on a transport error waits for the next daemon and goes on.
fn client(
    index: usize,
    out: &str,
    quota: u64,
    seed: u64,
    target: &Target,
    ledger: &Mutex<Ledger>,
    stop: &AtomicBool,
) {
    let agent = agent();
    let mut rng = Rng(seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut acked = 0;
    let mut attempt = 0u64;
    while acked < quota && !stop.load(Ordering::Relaxed) {
        attempt += 1;
        let name = format!("crash-c{index}-a{attempt}");
        let spec = spec(&name, rng.next(), out);
        let generation = target.generation.load(Ordering::SeqCst);
        let url = format!("{}/v1/jobs", target.base.read().unwrap());
        let answer = agent
            .post(&url)
            .header("content-type", "application/json")
            .send(spec.to_string().as_bytes())
            .and_then(|mut r| {
                let status = r.status().as_u16();
                r.body_mut().read_to_string().map(|text| (status, text))
            });
        match answer {
            Ok((status, text)) if (200..300).contains(&status) => {
                let body: Value = serde_json::from_str(&text).expect("2xx body is JSON");
                ledger
                    .lock()
                    .unwrap()
                    .acked
                    .push((id_of(&body), name, spec));
                acked += 1;
            }
            Ok((status, text)) if status >= 500 => {
                let mut l = ledger.lock().unwrap();
                l.unacked.insert(name);
                l.server_errors += 1;
                drop(l);
                eprintln!("client {index}: {status} {text}");
            }
            Ok((status, text)) => {
                ledger
                    .lock()
                    .unwrap()
                    .unexpected
                    .push(format!("{name}: {status} {text}"));
                stop.store(true, Ordering::Relaxed);
            }
            Err(_) => {
                ledger.lock().unwrap().unacked.insert(name);
                // The daemon is (most likely) being restarted: wait for the next one.
                let deadline = Instant::now() + RECONNECT_WAIT;
                while target.generation.load(Ordering::SeqCst) == generation
                    && Instant::now() < deadline
                    && !stop.load(Ordering::Relaxed)
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// How often the daemons' logs (all generations) report each way of recovering a started task
/// whose pid was not yet stored: its shim found running, its end found recorded, never launched.
fn recoveries(d: &Daemon, generations: u64) -> [usize; 3] {
    let dir = d
        .out_dir()
        .parent()
        .expect("out dir has a parent")
        .to_path_buf();
    let needles = [
        "found the shim of a task whose pid was not stored",
        "ended while the daemon was down",
        "not launched before a restart",
    ];
    let mut counts = [0; 3];
    for generation in 0..=generations {
        for ext in ["out", "err"] {
            let text = std::fs::read_to_string(dir.join(format!("daemon-{generation}.{ext}")))
                .unwrap_or_default();
            for (count, needle) in counts.iter_mut().zip(needles) {
                *count += text.lines().filter(|l| l.contains(needle)).count();
            }
        }
    }
    counts
}

/// Every job the daemon knows, newest first.
fn all_jobs(d: &Daemon) -> Vec<Value> {
    let (status, list) = d.get("/v1/jobs?limit=100000");
    assert_eq!(status, 200, "{list}");
    list.as_array().expect("job list").clone()
}

#[test]
fn sigkills_under_concurrent_submits_lose_and_duplicate_nothing() {
    let jobs = env_u64("GANTRY_CRASH_JOBS", 1000).max(CLIENTS as u64);
    let kills = env_u64("GANTRY_CRASH_KILLS", 5).max(5);
    let seed = env_u64(
        "GANTRY_CRASH_SEED",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |t| t.as_nanos() as u64)
            | 1,
    );
    eprintln!("crash_load: {jobs} jobs, {kills} kills, GANTRY_CRASH_SEED={seed}");
    let mut rng = Rng(seed);

    let mut d = Daemon::start(GPUS);
    let target = Arc::new(Target {
        base: RwLock::new(base_of(&d, 0)),
        generation: AtomicU64::new(0),
    });
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let out = d.out_dir().to_str().expect("UTF-8 temp dir").to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let quota = jobs / CLIENTS as u64 + u64::from((i as u64) < jobs % CLIENTS as u64);
            let (target, ledger, stop) = (target.clone(), ledger.clone(), stop.clone());
            let out = out.clone();
            std::thread::spawn(move || client(i, &out, quota, seed, &target, &ledger, &stop))
        })
        .collect();

    // Spread the kills over the expected submission time (first guess: 300 jobs/s, then the
    // rate measured so far), each at a random moment within its slot.
    let mut restart_times = Vec::new();
    for k in 0..kills {
        let done = ledger.lock().unwrap().acked.len() as u64;
        let elapsed = started.elapsed().as_millis() as u64;
        let rate_per_s = if done > 50 {
            (done * 1000 / elapsed.max(1)).max(1)
        } else {
            300
        };
        let left_ms = jobs.saturating_sub(done) * 1000 / rate_per_s;
        let slot = (left_ms / (kills - k + 1)).clamp(100, 10_000);
        std::thread::sleep(Duration::from_millis(rng.range(slot / 4, slot)));
        assert!(
            started.elapsed() < SUBMIT_BOUND,
            "submission phase ran past {SUBMIT_BOUND:?}"
        );
        let before: Vec<(u64, String)> = {
            let l = ledger.lock().unwrap();
            l.acked.iter().map(|(id, n, _)| (*id, n.clone())).collect()
        };
        let t0 = Instant::now();
        d.restart_after_sigkill();
        restart_times.push(t0.elapsed());
        *target.base.write().unwrap() = base_of(&d, k + 1);
        target.generation.store(k + 1, Ordering::SeqCst);
        // Everything acknowledged before the kill survived it.
        let listed: BTreeMap<u64, String> = all_jobs(&d)
            .iter()
            .map(|j| {
                (
                    id_of(j),
                    j["spec"]["name"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        for (id, name) in &before {
            assert_eq!(
                listed.get(id),
                Some(name),
                "kill {}: acknowledged job {id} ({name}) missing after restart\n{}",
                k + 1,
                d.log_tail()
            );
        }
        d.check_allocations();
        eprintln!(
            "kill {}: {} acknowledged before it, all present; restart took {:?}",
            k + 1,
            before.len(),
            restart_times[k as usize]
        );
    }

    let deadline = started + SUBMIT_BOUND;
    while clients.iter().any(|c| !c.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("client thread panicked");
    }
    let submit_time = started.elapsed();
    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("clients are done")
        .into_inner()
        .unwrap();
    assert!(
        ledger.unexpected.is_empty(),
        "unexpected answers to submissions: {:?}",
        ledger.unexpected
    );
    assert_eq!(
        ledger.acked.len() as u64,
        jobs,
        "clients did not get every submission acknowledged within {SUBMIT_BOUND:?}"
    );

    // Every job finishes (bounded: generous per job, on a slow shared machine).
    let finish_bound = Duration::from_secs(120 + jobs / 20);
    let listed = d.wait_for("every job to finish", finish_bound, || {
        let list = all_jobs(&d);
        list.iter()
            .all(|j| TERMINAL.contains(&j["state"].as_str().unwrap_or("")))
            .then_some(list)
    });
    let total_time = started.elapsed();

    // Ids unique, names unique (no submission stored twice), nothing nobody submitted.
    let mut by_id: BTreeMap<u64, &Value> = BTreeMap::new();
    let mut by_name: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for j in &listed {
        let id = id_of(j);
        assert!(by_id.insert(id, j).is_none(), "job id {id} listed twice");
        let name = j["spec"]["name"].as_str().expect("spec.name");
        by_name.entry(name).or_default().push(id);
    }
    let duplicates: Vec<_> = by_name.iter().filter(|(_, ids)| ids.len() > 1).collect();
    let acked_names: BTreeMap<&str, u64> = ledger
        .acked
        .iter()
        .map(|(id, n, _)| (n.as_str(), *id))
        .collect();
    let strangers: Vec<_> = by_name
        .keys()
        .filter(|n| !acked_names.contains_key(*n) && !ledger.unacked.contains(**n))
        .collect();
    // Each acknowledged submission: present once, under its id, as submitted, succeeded.
    let mut acked_ids = BTreeSet::new();
    let mut missing = Vec::new();
    let mut not_succeeded = Vec::new();
    for (id, name, spec) in &ledger.acked {
        assert!(acked_ids.insert(*id), "id {id} acknowledged twice");
        let Some(job) = by_id.get(id) else {
            missing.push((*id, name.clone()));
            continue;
        };
        assert_eq!(
            &job["spec"]["name"], name,
            "job {id} has another name: {job}"
        );
        assert_eq!(job["spec"]["argv"], spec["argv"], "job {id}: {job}");
        for f in ["count", "gpus", "gpu_milli", "cpu_milli", "memory_mib"] {
            assert_eq!(
                job["spec"]["tasks"][0][f], spec["tasks"][0][f],
                "job {id}: tasks[0].{f}: {job}"
            );
        }
        if job["state"] != "succeeded" || job["exit_code"] != 0 {
            not_succeeded.push(format!(
                "{id} {} exit {} ({})",
                job["state"], job["exit_code"], job["reason"]["message"]
            ));
        }
    }
    let unacked_present = ledger
        .unacked
        .iter()
        .filter(|n| by_name.contains_key(n.as_str()))
        .count();
    let unacked_failed: Vec<_> = by_name
        .iter()
        .filter(|(n, _)| ledger.unacked.contains(**n))
        .filter_map(|(_, ids)| by_id.get(&ids[0]))
        .filter(|j| j["state"] != "succeeded")
        .map(|j| format!("{} {} ({})", id_of(j), j["state"], j["reason"]["message"]))
        .collect();

    // No job ran twice (or, having succeeded, not at all).
    let runs_of = |id: u64| {
        std::fs::read_to_string(d.out_dir().join(format!("runs-{id}")))
            .map_or(0, |t| t.lines().count())
    };
    let ran_twice: Vec<_> = by_id.keys().filter(|id| runs_of(**id) > 1).collect();
    let never_ran: Vec<_> = by_id
        .iter()
        .filter(|(id, j)| j["state"] == "succeeded" && runs_of(**id) == 0)
        .map(|(id, _)| id)
        .collect();

    // No GPU booked by a job that is not running (none runs now), and ids move on.
    d.check_allocations();
    let (_, nodes) = d.get("/v1/nodes");
    for gpu in nodes[0]["gpus"].as_array().expect("gpus") {
        assert_eq!(
            gpu["allocated_milli"], 0,
            "GPU booked after every job ended: {gpu}"
        );
    }
    let fresh = d.submit(&spec("crash-fresh", 0, &out));
    let max_id = by_id.keys().next_back().copied().unwrap_or(0);
    assert!(
        fresh > max_id,
        "new job id {fresh} reuses or precedes {max_id}"
    );
    d.wait_state(fresh, "succeeded");

    let [found, ended, requeued] = recoveries(&d, kills);
    eprintln!(
        "crash_load: started tasks without a stored pid after a kill: {found} still running \
         (adopted), {ended} ended meanwhile, {requeued} never launched (requeued)"
    );
    eprintln!(
        "crash_load: {} acknowledged, {} unacknowledged ({} of them stored, {} answered 5xx), \
         {} jobs listed, {} duplicates, {} missing, {} not succeeded, {} run twice, {} kills; \
         submit phase {:.1} s ({:.0} acknowledged submits/s), all finished after {:.1} s \
         ({:.0} jobs/s end to end); restarts took {:?}",
        ledger.acked.len(),
        ledger.unacked.len(),
        unacked_present,
        ledger.server_errors,
        listed.len(),
        duplicates.len(),
        missing.len(),
        not_succeeded.len(),
        ran_twice.len(),
        kills,
        submit_time.as_secs_f64(),
        ledger.acked.len() as f64 / submit_time.as_secs_f64(),
        total_time.as_secs_f64(),
        listed.len() as f64 / total_time.as_secs_f64(),
        restart_times,
    );
    assert!(
        duplicates.is_empty(),
        "submissions stored twice: {duplicates:?}"
    );
    assert!(ran_twice.is_empty(), "jobs that ran twice: {ran_twice:?}");
    assert!(
        never_ran.is_empty(),
        "jobs that succeeded without running: {never_ran:?}"
    );
    assert!(strangers.is_empty(), "jobs nobody submitted: {strangers:?}");
    assert!(missing.is_empty(), "acknowledged jobs lost: {missing:?}");
    assert!(
        not_succeeded.is_empty(),
        "acknowledged jobs that did not succeed: {not_succeeded:?}"
    );
    assert!(
        unacked_failed.is_empty(),
        "stored unacknowledged jobs that did not succeed: {unacked_failed:?}"
    );
}
