//! History on PostgreSQL (`[history] backend = "postgres"`): a real daemon keeps the jobs
//! that left memory, their events and accounting in a PostgreSQL server this test starts
//! on 127.0.0.1 (the distribution's `postgresql` package; the test fails, saying so, where
//! it is missing), finds them there through the API as it does in SQLite, and still does
//! after a restart. A controller that cannot reach its history server does not start, and
//! says which server.

use gantry_e2e::{Daemon, WAIT, gantry_bin};
use gantry_store::test_postgres::TestPostgres;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn in_memory(d: &Daemon) -> u64 {
    let (_, text) = d.get_text("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix("gantry_jobs_in_memory "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

fn count(pg: &mut postgres::Client, sql: &str, id: u64) -> i64 {
    let id = i64::try_from(id).expect("small id");
    pg.query_one(sql, &[&id]).expect(sql).get(0)
}

#[test]
fn a_daemon_keeps_its_history_in_postgres_and_finds_it_after_a_restart() {
    let server = TestPostgres::start().expect("a PostgreSQL server for the test");
    let url = server.database("gantry").expect("a database");
    let mut d = Daemon::start_with_config(
        1,
        &format!(
            "[retention]\nmin_job_age_s = 0\n[history]\nbackend = \"postgres\"\nurl = {url:?}\n"
        ),
    );
    let (status, health) = d.get("/v1/health");
    assert_eq!(status, 200);
    assert_eq!(health["store"]["history"], json!("postgres"), "{health}");

    let ok = d.submit(&d.shell_job("ok", 1, 0, "echo hello; exit 0"));
    let bad = d.submit(&d.shell_job("bad", 1, 0, "exit 3"));
    d.wait_state(ok, "succeeded");
    d.wait_state(bad, "failed");
    d.wait_for("ended jobs to leave memory", WAIT, || {
        (in_memory(&d) == 0).then_some(())
    });

    // The rows are in PostgreSQL itself, not in a file beside the daemon.
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    for id in [ok, bad] {
        assert_eq!(
            count(&mut pg, "SELECT count(*) FROM jobs WHERE id = $1", id),
            1
        );
        assert!(count(&mut pg, "SELECT count(*) FROM events WHERE job = $1", id) >= 2);
        assert_eq!(
            count(
                &mut pg,
                "SELECT count(*) FROM accounting WHERE job_id = $1",
                id
            ),
            1
        );
    }
    assert!(
        !d.out_dir()
            .parent()
            .expect("the test directory")
            .join("data/history/jobs.sqlite3")
            .exists(),
        "no SQLite history was made"
    );

    let read_back = |d: &Daemon| {
        let job = d.job(bad);
        assert_eq!(
            (&job["state"], &job["exit_code"]),
            (&json!("failed"), &json!(3))
        );
        let (status, list) = d.get("/v1/jobs?state=failed");
        assert_eq!(status, 200);
        let ids: Vec<u64> = list
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|j| j["id"].as_u64())
            .collect();
        assert_eq!(ids, [bad]);
        let (status, events) = d.get(&format!("/v1/jobs/{ok}/events"));
        assert_eq!(status, 200);
        assert!(
            events
                .as_array()
                .expect("events")
                .iter()
                .any(|e| e["kind"] == json!("submitted")),
            "{events}"
        );
        let (status, records) = d.get(&format!("/v1/accounting?job={ok}"));
        assert_eq!(status, 200, "{records}");
        let list: &Vec<Value> = records["records"].as_array().expect("records");
        assert_eq!(list.len(), 1, "{records}");
    };
    read_back(&d);
    d.restart_after_sigkill();
    read_back(&d);
}

#[test]
fn a_controller_that_cannot_reach_its_history_server_does_not_start_and_names_it() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("gantry.toml");
    std::fs::write(
        &config,
        format!(
            "[history]\nbackend = \"postgres\"\nurl = \"postgres://gantry:hunter2@127.0.0.1:{port}/gantry\"\n"
        ),
    )
    .expect("write config");
    gantry_e2e::make_private(&config);
    let mut child = Command::new(gantry_bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--no-nvml",
            "--gpus",
            "1",
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start gantry");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("gantry kept running without its history server");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("postgres at 127.0.0.1:{port}/gantry")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2"),
        "the password stays secret: {stderr}"
    );
}

#[test]
fn while_postgres_is_away_jobs_are_taken_and_run_and_their_accounting_waits_for_it() {
    let mut server = TestPostgres::start().expect("a PostgreSQL server for the test");
    let url = server.database("gantry").expect("a database");
    let d = Daemon::start_with_config(
        1,
        &format!(
            "[retention]\nmin_job_age_s = 0\n[history]\nbackend = \"postgres\"\nurl = {url:?}\n"
        ),
    );
    server.kill();
    let id = d.submit(&d.shell_job("during", 1, 0, "exit 0"));
    d.wait_state(id, "succeeded");
    let accounted = |d: &Daemon| {
        let (status, body) = d.get(&format!("/v1/accounting?job={id}"));
        if status == 200 {
            body["records"].as_array().map_or(0, Vec::len)
        } else {
            0
        }
    };
    assert_eq!(accounted(&d), 0, "history is away");
    server.run().expect("the server again");
    d.wait_for(
        "the queued accounting record to reach history",
        WAIT,
        || (accounted(&d) == 1).then_some(()),
    );
    d.wait_for("the ended job to move to history", WAIT, || {
        (in_memory(&d) == 0).then_some(())
    });
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    assert_eq!(
        count(&mut pg, "SELECT count(*) FROM jobs WHERE id = $1", id),
        1
    );
    assert_eq!(
        count(
            &mut pg,
            "SELECT count(*) FROM accounting WHERE job_id = $1",
            id
        ),
        1
    );
    assert_eq!(d.job(id)["state"], json!("succeeded"));
}
