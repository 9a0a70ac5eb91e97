//! Benchmark: the embedded store (sled + SQLite) against the replicated one (etcd +
//! PostgreSQL), in one run on this machine.
//!
//! `cargo bench -p gantry --bench store_backends` starts a 3-member etcd cluster and a
//! PostgreSQL server on 127.0.0.1 (`gantry_store::test_etcd`, `test_postgres`: Debian's
//! etcd-server and postgresql) and prints:
//!
//! 1. **Submits**: the real `gantry` binary on each backend pair (4 fake GPUs), 8 clients
//!    submitting tiny jobs; submits/s and p50/p99 latency of a durable `201`, then the
//!    cycles run and their mean length (`gantry_cycle_duration_seconds`) from the first
//!    submit until every job has started.
//! 2. **Failover**: two controllers on etcd, each with its own local node; the leader is
//!    SIGKILLed; time until the standby leads and until it started a job submitted to it.
//! 3. **History queries**: the same history (`GANTRY_BENCH_HISTORY`, default 20,000 ended
//!    jobs with an accounting record and 3 events each) in SQLite and in PostgreSQL; time of
//!    an accounting query by user, a page of a user's jobs, a job's events and 1,000 reads
//!    of archived jobs by id.
//!
//! `GANTRY_BENCH_JOBS` (default 2000) sets the submits per backend. `GANTRY_BENCH_BASELINE`,
//! the path of another build's `gantry`, adds its submits on etcd to the same run (a
//! before/after comparison); `GANTRY_BENCH_PARTS` (default `submits,failover,history`)
//! picks the parts.

mod common;

use common::{Daemon, Result, Serve, agent, env_usize};
use gantry_store::test_etcd::TestEtcd;
use gantry_store::test_postgres::TestPostgres;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn start(dir: &std::path::Path, listen: &str, config: &str) -> Result<(Daemon, String)> {
    start_binary(env!("CARGO_BIN_EXE_gantry").as_ref(), dir, listen, config)
}

fn start_binary(
    binary: &std::ffi::OsStr,
    dir: &std::path::Path,
    listen: &str,
    config: &str,
) -> Result<(Daemon, String)> {
    let config = format!(
        "{config}\n[execution]\nrun_as_user = false\ncgroups = \"off\"\n[auth]\nanonymous_role = \"admin\"\n"
    );
    let serve = Serve {
        binary,
        listen,
        args: &["--gpus", "4", "--no-nvml"],
        config: &config,
        keep_stderr: false,
    };
    serve.start(dir)
}

fn get(url: &str) -> Option<Value> {
    agent(60).get(url).call().ok()?.body_mut().read_json().ok()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) -> Result<()> {
    let started = Instant::now();
    while !ok() {
        if started.elapsed() > Duration::from_secs(180) {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn leads(base: &str) -> bool {
    get(&format!("{base}/v1/health")).is_some_and(|h| {
        h["status"] == "ok" && (h["leadership"].is_null() || h["leadership"]["role"] == "leader")
    })
}

fn job(i: usize) -> Value {
    json!({
        "name": format!("load-{i}"),
        "argv": ["/bin/true"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 10, "memory_mib": 16}],
    })
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// The cycle histogram's count, sum and largest bucket bound reached, from `/metrics`.
fn cycles(base: &str) -> (f64, f64) {
    let text = agent(60)
        .get(format!("{base}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (
        value("gantry_cycle_duration_seconds_count "),
        value("gantry_cycle_duration_seconds_sum "),
    )
}

fn submits(label: &str, config: &str, jobs: usize) -> Result<()> {
    submits_of(env!("CARGO_BIN_EXE_gantry").as_ref(), label, config, jobs)
}

fn submits_of(binary: &std::ffi::OsStr, label: &str, config: &str, jobs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (_daemon, base) = start_binary(binary, dir.path(), "127.0.0.1:0", config)?;
    wait_until("the controller to lead", || leads(&base))?;
    let url = format!("{base}/v1/jobs");
    for i in 0..20 {
        agent(60).post(&url).send_json(job(i))?;
    }
    let (count0, sum0) = cycles(&base);
    let clients = 8;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let url = url.clone();
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let a = agent(60);
                let mut lat = Vec::new();
                for i in 0..jobs / clients {
                    let t = Instant::now();
                    let status = a.post(&url).send_json(job(c * 100_000 + i))?.status();
                    if status.as_u16() != 201 {
                        return Err(format!("submit answered {status}").into());
                    }
                    lat.push(t.elapsed());
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.join().map_err(|_| "a client panicked")??);
    }
    let wall = t0.elapsed();
    lat.sort();
    wait_until("every job to start", || {
        get(&format!("{base}/v1/jobs?state=pending&limit=1"))
            .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
    })?;
    let (count1, sum1) = cycles(&base);
    let cycles_run = (count1 - count0).max(1.0);
    println!(
        "{label:<22} {:>9.0} submits/s   p50 {:>6.2} ms   p99 {:>7.2} ms   cycles {:>5}   mean cycle {:>6.2} ms",
        lat.len() as f64 / wall.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        cycles_run,
        (sum1 - sum0) / cycles_run * 1000.0,
    );
    Ok(())
}

fn failover(replicated: &str) -> Result<()> {
    let free = || -> Result<String> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        Ok(l.local_addr()?.to_string())
    };
    let (da, db) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let config = |name: &str| format!("{replicated}name = \"{name}\"\nlease_s = 2\n");
    let (mut a, a_url) = start(da.path(), &free()?, &config("a"))?;
    wait_until("a to lead", || leads(&a_url))?;
    let (_b, b_url) = start(db.path(), &free()?, &config("b"))?;
    wait_until("b to stand by", || {
        get(&format!("{b_url}/v1/health")).is_some_and(|h| h["leadership"]["role"] == "standby")
    })?;
    // The standby compiles the built-in plugins while it waits: give it the time it would
    // have in a cluster that has run for a while.
    std::thread::sleep(Duration::from_secs(20));
    let killed = Instant::now();
    a.0.kill()?;
    a.0.wait()?;
    wait_until("b to lead", || leads(&b_url))?;
    let led = killed.elapsed();
    let mut resp = agent(60)
        .post(format!("{b_url}/v1/jobs"))
        .send_json(job(0))?;
    let id = resp.body_mut().read_json::<Value>()?["id"]
        .as_u64()
        .ok_or("no id")?;
    wait_until("the first start", || {
        get(&format!("{b_url}/v1/jobs/{id}")).is_some_and(|j| j["start_ms"].is_u64())
    })?;
    println!(
        "failover (lease 2 s): the standby served as leader {:.2} s after the leader's SIGKILL, its first start came {:.2} s after it",
        led.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    Ok(())
}

fn history(label: &str, store: &gantry_store::Store, n: u64) -> Result<()> {
    use gantry_api::model::{JobRecord, JobSpec, JobState};
    let t = Instant::now();
    let mut batch = Vec::new();
    for id in 1..=n {
        let mut spec: JobSpec = serde_json::from_value(json!({"argv": ["true"]}))?;
        spec.user = format!("user-{}", id % 50);
        let mut j = JobRecord::new(id, spec, id);
        j.state = JobState::Succeeded;
        j.end_ms = Some(1_000 + id);
        batch.push(j);
        if batch.len() == 500 {
            store.archive_jobs(&batch.iter().collect::<Vec<_>>())?;
            batch.clear();
        }
        for k in 0..3 {
            store.event(id * 10 + k, Some(id), "k", format!("event {k} of {id}"))?;
        }
        store.put_accounting(&gantry_api::accounting::AccountingRecord {
            job_id: id,
            task_index: 0,
            run: 0,
            job_name: "j".into(),
            user: format!("user-{}", id % 50),
            account: "lab".into(),
            queue: "default".into(),
            node: "n0".into(),
            gpus: vec![],
            cpu_milli: 1000,
            memory_mib: 64,
            start_ms: id,
            end_ms: 1_000 + id,
            gpu_milli_seconds: 0,
            cpu_seconds: 0.5,
            memory_peak_mib: 1,
            exit: gantry_api::task::TaskExit::Exited(0),
            oom_killed: false,
            uncharged: None,
            gpu_used_milli_seconds: None,
        })?;
    }
    let filled = t.elapsed();
    let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    };
    let by_user = time(&mut || {
        let f = gantry_store::AccountingFilter {
            user: Some("user-7".into()),
            ..Default::default()
        };
        store.accounting(&f).map(drop).map_err(Into::into)
    })?;
    let page = time(&mut || {
        let ids: Vec<u64> = store
            .ids_newest_first(Some((gantry_store::JobIndex::User, "user-7")), None)
            .take(100)
            .collect();
        (ids.len() == 100)
            .then_some(())
            .ok_or_else(|| "short page".into())
    })?;
    let events = time(&mut || store.events(Some(n / 2), 50).map(drop).map_err(Into::into))?;
    let reads = time(&mut || {
        for k in 0..1000 {
            store.job(1 + (k * 7919) % n)?.ok_or("missing")?;
        }
        Ok(())
    })?;
    println!(
        "{label:<11} filled {n} jobs in {:>6.1} s   accounting of a user {:>7.2} ms   a page of 100 of a user's jobs {:>6.2} ms   a job's events {:>5.2} ms   1,000 jobs by id {:>7.1} ms",
        filled.as_secs_f64(),
        by_user,
        page,
        events,
        reads
    );
    Ok(())
}

fn main() -> Result<()> {
    let jobs = env_usize("GANTRY_BENCH_JOBS", 2000);
    let etcd = TestEtcd::start(3)?;
    let pg = TestPostgres::start()?;
    let endpoints = format!("{:?}", etcd.endpoints());
    let replicated = |db: &str| -> Result<String> {
        Ok(format!(
            "[history]\nbackend = \"postgres\"\nurl = {:?}\n[store]\nbackend = \"etcd\"\nendpoints = {endpoints}\nprefix = \"/{db}/\"\netcd_isolated = true\n",
            pg.database(db)?
        ))
    };
    let parts =
        std::env::var("GANTRY_BENCH_PARTS").unwrap_or_else(|_| "submits,failover,history".into());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    if part("submits") {
        println!("# submits: 8 clients, {jobs} jobs per backend, each 201 durable");
        submits("sled + SQLite", "", jobs)?;
        if let Some(baseline) = std::env::var_os("GANTRY_BENCH_BASELINE") {
            let config = replicated("baseline")?;
            submits_of(&baseline, "etcd + PG, baseline", &config, jobs)?;
        }
        submits("etcd (3) + PostgreSQL", &replicated("submits")?, jobs)?;
    }
    if part("failover") {
        println!("# failover: two controllers on etcd (3 members) + PostgreSQL");
        failover(&replicated("failover")?)?;
    }
    if !part("history") {
        return Ok(());
    }
    let n = env_usize("GANTRY_BENCH_HISTORY", 20_000) as u64;
    println!("# history queries: {n} ended jobs, one accounting record and 3 events each");
    let dir = tempfile::tempdir()?;
    history("SQLite", &gantry_store::Store::open(dir.path())?, n)?;
    let other = tempfile::tempdir()?;
    let on_pg = gantry_store::Store::open_with(
        other.path(),
        16,
        &gantry_store::StateBackend::Sled,
        &gantry_store::HistoryBackend::Postgres {
            url: pg.database("history")?,
        },
    )?;
    history("PostgreSQL", &on_pg, n)?;
    Ok(())
}
