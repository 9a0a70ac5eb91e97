//! Two controllers on one etcd (`[store] backend = "etcd"`), history in PostgreSQL, tasks
//! on two real agents that know both controllers: one leads, the other stands by.
//!
//! - SIGKILL of the leader under a steady submit load from several clients: the standby
//!   leads within a bounded time (printed), every acknowledged job is there once and runs
//!   once, and tasks that were running are adopted, not started again.
//! - SIGSTOP of the leader past its lease: the standby takes over; after SIGCONT the old
//!   leader launches nothing (etcd refuses its writes, agents its calls) and steps down to
//!   standby by itself.
//!
//! etcd (three members here), PostgreSQL and the agents run on 127.0.0.1 from the
//! distribution's packages (`.ci/run` installs them); a missing one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::controllers::{
    BOUND, LEASE_S, cluster, http, job, leadership, starts, submit_to_leader, wait_job, wait_role,
};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn sigkill_of_the_leader_hands_over_to_the_standby_without_losing_or_repeating_a_job() {
    let mut c = cluster(3);
    let urls = vec![c.a.url().to_string(), c.b.url().to_string()];
    let out = c.out.path().to_path_buf();
    let long: Vec<u64> = (0..2)
        .map(|i| submit_to_leader(&urls, &job(&out, &format!("long-{i}"), true)).unwrap())
        .collect();
    let pids: Vec<u64> = long
        .iter()
        .map(|&id| {
            let running = wait_job(&urls[0], id, "ran", |j| j["tasks"][0]["pid"].is_u64());
            running["tasks"][0]["pid"].as_u64().unwrap()
        })
        .collect();

    // A steady load from three clients, across the failover.
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|n| {
            let (urls, out) = (urls.clone(), out.clone());
            let (acked, stop) = (acknowledged.clone(), stop.clone());
            std::thread::spawn(move || {
                for i in 0..40 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = submit_to_leader(&urls, &job(&out, &format!("c{n}-{i}"), false))
                        .expect("a controller took the job within the bound");
                    acked.lock().unwrap().push(id);
                    std::thread::sleep(Duration::from_millis(40));
                }
            })
        })
        .collect();
    let started = Instant::now();
    while acknowledged.lock().unwrap().len() < 15 {
        assert!(started.elapsed() < BOUND, "the load never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Instant::now();
    c.a.sigkill();
    while c.b.log_lines("this controller leads").is_empty() {
        assert!(killed.elapsed() < BOUND, "the standby never won");
        std::thread::sleep(Duration::from_millis(10));
    }
    let won_ms = killed.elapsed().as_millis();
    wait_role(c.b.url(), "leader");
    let leads_ms = killed.elapsed().as_millis();
    let probe = submit_to_leader(&urls, &job(&out, "probe", false)).unwrap();
    wait_job(c.b.url(), probe, "started", |j| {
        !starts(&out, probe).is_empty() || j["state"] == "succeeded"
    });
    let first_start_ms = killed.elapsed().as_millis();
    println!(
        "failover: lease {LEASE_S} s; after the leader's SIGKILL the standby won the election \
         in {won_ms} ms, served as leader in {leads_ms} ms and started its first job in \
         {first_start_ms} ms"
    );
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }

    let acked = acknowledged.lock().unwrap().clone();
    let mut unique = acked.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), acked.len(), "an id was given twice");
    for &id in &acked {
        let done = wait_job(c.b.url(), id, "succeeded", |j| {
            j["state"] == json!("succeeded")
        });
        // Once per run: a run lost with a silent node and requeued is a run of its own.
        let runs = 1 + done["requeues"].as_u64().unwrap() as usize;
        assert_eq!(
            starts(&out, id).len(),
            runs,
            "job {id} ran {:?}\n{done}\n{}",
            starts(&out, id),
            c.evidence(id)
        );
    }
    // The long jobs kept running through the failover: adopted, not started again.
    for (&id, &pid) in long.iter().zip(&pids) {
        let job = wait_job(c.b.url(), id, "adopted", |j| j["state"] == json!("running"));
        assert_eq!(job["tasks"][0]["pid"].as_u64(), Some(pid), "{job}");
        std::fs::write(out.join(format!("release-{id}")), "").unwrap();
    }
    for &id in &long {
        wait_job(c.b.url(), id, "succeeded", |j| {
            j["state"] == json!("succeeded")
        });
        assert_eq!(starts(&out, id).len(), 1, "job {id} started again");
    }
    assert_eq!(c.agents.len(), 2);
}

#[test]
fn a_paused_leader_is_fenced_launches_nothing_and_steps_down() {
    let c = cluster(1);
    let urls = vec![c.a.url().to_string(), c.b.url().to_string()];
    let out = c.out.path().to_path_buf();
    // A job the paused leader will find startable when it wakes: it may begin in 4 s.
    let mut later = job(&out, "later", false);
    later["begin_ms"] = json!(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            + 4_000
    );
    let later = submit_to_leader(&urls, &later).unwrap();
    c.a.signal(libc::SIGSTOP);
    let paused = Instant::now();
    wait_role(c.b.url(), "leader");
    // Past the job's begin time and the old lease, the new leader runs it, once.
    let later_done = wait_job(c.b.url(), later, "succeeded", |j| {
        j["state"] == json!("succeeded")
    });
    let during = submit_to_leader(&urls[1..], &job(&out, "during", true)).unwrap();
    wait_job(c.b.url(), during, "running", |j| {
        j["state"] == json!("running")
    });
    assert!(paused.elapsed() > Duration::from_secs(LEASE_S));
    c.a.signal(libc::SIGCONT);
    // The old leader notices its term is over and comes back as a standby on a new port.
    let started = Instant::now();
    let standby_url = loop {
        let addresses = c.a.listening_addresses();
        if addresses.len() >= 2
            && let Some(l) = leadership(addresses.last().unwrap())
            && l["role"] == json!("standby")
        {
            break addresses.last().unwrap().clone();
        }
        assert!(
            started.elapsed() < BOUND,
            "the old leader never stepped down"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        leadership(&standby_url).unwrap()["leader"]["name"],
        json!("ctl-b")
    );
    assert!(
        c.a.log_tail().contains("stepping down"),
        "{}",
        c.a.log_tail()
    );
    // Nothing ran twice: not the job the old leader found startable, not the one running.
    // Each run starts once; a run the new leader lost (its node silent past
    // `node_down_after_ms` on a loaded machine) and requeued is a run of its own.
    let runs = 1 + later_done["requeues"].as_u64().unwrap() as usize;
    assert_eq!(
        starts(&out, later).len(),
        runs,
        "{:?}\n{later_done}\n{}",
        starts(&out, later),
        c.evidence(later)
    );
    std::fs::write(out.join(format!("release-{during}")), "").unwrap();
    wait_job(c.b.url(), during, "succeeded", |j| {
        j["state"] == json!("succeeded")
    });
    assert_eq!(starts(&out, during).len(), 1);
    assert_eq!(c.agents.len(), 2);
}

/// `gantry --server URLS ARGS...`: the CLI given every controller's address.
fn cli(urls: &[String], args: &[&str]) -> std::process::Output {
    std::process::Command::new(gantry_e2e::gantry_bin())
        .arg("--server")
        .arg(urls.join(","))
        .args(args)
        .env_remove("GANTRY_TOKEN")
        .output()
        .expect("run the gantry CLI")
}

#[test]
fn losing_etcd_stops_scheduling_says_why_and_scheduling_resumes_when_it_returns() {
    let mut c = cluster(3);
    let out = c.out.path().to_path_buf();
    let urls = || vec![c.a.url().to_string(), c.b.url().to_string()];
    // One member of three lost: nothing changes.
    c.etcd.kill(0);
    let before = submit_to_leader(&urls(), &job(&out, "one-member-down", false)).unwrap();
    wait_job(c.a.url(), before, "succeeded", |j| {
        j["state"] == json!("succeeded")
    });
    let listed = cli(&urls(), &["jobs", "--all"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        text.contains(&before.to_string()),
        "the CLI found the leader: {text}"
    );
    let long = submit_to_leader(&urls(), &job(&out, "long", true)).unwrap();
    let pid =
        wait_job(c.a.url(), long, "ran", |j| j["tasks"][0]["pid"].is_u64())["tasks"][0]["pid"]
            .as_u64()
            .unwrap();

    // Every member lost: no controller leads, and each says why.
    c.etcd.kill(1);
    c.etcd.kill(2);
    let started = Instant::now();
    let why = loop {
        let standing: Vec<Value> = urls().iter().filter_map(|u| leadership(u)).collect();
        if standing.len() == 2
            && standing
                .iter()
                .all(|l| l["role"] == json!("standby") && l["store_error"].is_string())
        {
            break standing[0]["store_error"].clone();
        }
        assert!(
            started.elapsed() < BOUND,
            "the controllers never said etcd was gone"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(why.as_str().unwrap().contains("etcd"), "{why}");
    let mut refused = http().get(format!("{}/v1/jobs", urls()[0])).call().unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    let body: Value = refused.body_mut().read_json().unwrap();
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("state store cannot be reached"), "{body}");
    let listed = cli(&urls(), &["jobs"]);
    let said = String::from_utf8_lossy(&listed.stderr).to_string();
    assert!(!listed.status.success());
    assert!(
        said.contains("state store cannot be reached"),
        "{said} {:?} {:?}",
        urls(),
        urls().iter().map(|u| leadership(u)).collect::<Vec<_>>()
    );

    // etcd is back: a controller leads again by itself, nothing was lost or run twice.
    for i in 0..3 {
        c.etcd.restart(i).unwrap();
    }
    c.etcd.wait_ready().unwrap();
    let started = Instant::now();
    let leader = loop {
        if let Some(u) = urls()
            .into_iter()
            .find(|u| leadership(u).is_some_and(|l| l["role"] == json!("leader")))
        {
            break u;
        }
        assert!(started.elapsed() < BOUND, "no controller led again");
        std::thread::sleep(Duration::from_millis(100));
    };
    let job_now = wait_job(&leader, long, "adopted", |j| j["state"] == json!("running"));
    assert_eq!(job_now["tasks"][0]["pid"].as_u64(), Some(pid), "{job_now}");
    std::fs::write(out.join(format!("release-{long}")), "").unwrap();
    wait_job(&leader, long, "succeeded", |j| {
        j["state"] == json!("succeeded")
    });
    assert_eq!(starts(&out, long).len(), 1);
    assert_eq!(starts(&out, before).len(), 1);
    let after = submit_to_leader(&urls(), &job(&out, "after", false)).unwrap();
    wait_job(&leader, after, "succeeded", |j| {
        j["state"] == json!("succeeded")
    });
}
