//! Accounting end to end (Gantry issue 4, item 9): a live daemon runs jobs of several users
//! and accounts with whole and fractional GPUs and 2-task gangs; `GET /v1/accounting` has one
//! record per task, its GPU-seconds match milli × (end − start) computed from the job records
//! within 1 %, a user token sees only its own records, `gantry accounting` prints the same
//! totals, and the records survive SIGKILL + restart (twice) without duplicates while a job
//! was running across the first one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, gantry_bin, token_into};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;

/// A job of `count` tasks holding `gpus` whole GPUs or `gpu_milli` of one each, running
/// `script`.
fn job(d: &Daemon, name: &str, count: u32, gpus: u32, gpu_milli: u32, script: &str) -> Value {
    let mut spec = d.shell_job(name, count, gpus, script);
    spec["tasks"][0]["gpu_milli"] = json!(gpu_milli);
    spec
}

/// GPU-seconds of a finished job from its record: Σ task milli × (job end − task start).
fn gpu_seconds_of(job: &Value) -> f64 {
    let end = job["end_ms"].as_u64().expect("end_ms");
    job["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let start = t["started_ms"]
                .as_u64()
                .or(job["start_ms"].as_u64())
                .unwrap();
            let milli: u64 = t["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["milli"].as_u64().unwrap())
                .sum();
            milli as f64 * (end - start) as f64 / 1e6
        })
        .sum()
}

fn near(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 0.01 * expected
}

/// The per-name totals of a report section, by name.
fn by_name(report: &Value, key: &str) -> BTreeMap<String, Value> {
    report[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t.clone()))
        .collect()
}

#[test]
fn totals_match_the_job_records_users_see_their_own_and_the_cli_prints_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let make = |user: &str, accounts: &str, role: &str| token_into(&file, user, accounts, role);
    let (alice, bob, olga) = (
        make("alice", "ml,vision", "user"),
        make("bob", "cv", "user"),
        make("olga", "infra", "operator"),
    );
    let d = Daemon::start_with_config(4, &std::fs::read_to_string(&file).unwrap());
    // Runs of several seconds: the job records' start and end are when the daemon saw them,
    // a few ms after the processes', which must stay well inside the 1 % the totals are held to.
    let mut vision = job(&d, "frac-gang", 2, 0, 500, "sleep 5");
    vision["account"] = json!("vision");
    let submitted = [
        d.submit_as(&alice, &job(&d, "whole", 1, 1, 0, "sleep 5")),
        d.submit_as(&alice, &vision),
        d.submit_as(&alice, &job(&d, "cpu-only", 1, 0, 0, "sleep 3")),
        d.submit_as(&bob, &job(&d, "gang", 2, 1, 0, "sleep 5")),
        d.submit_as(&bob, &job(&d, "quarter", 1, 0, 250, "sleep 3; exit 3")),
    ];
    let mut expected: BTreeMap<(&str, String), f64> = BTreeMap::new();
    for id in submitted {
        let j = d.wait_for(&format!("job {id} to end"), WAIT, || {
            let (_, j) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
            j["end_ms"].as_u64().map(|_| j)
        });
        let gpu_s = gpu_seconds_of(&j);
        for (kind, who) in [
            ("user", &j["spec"]["user"]),
            ("account", &j["spec"]["account"]),
        ] {
            *expected
                .entry((kind, who.as_str().unwrap().to_string()))
                .or_default() += gpu_s;
        }
    }
    let (status, all) = d.get_as(&olga, "/v1/accounting");
    assert_eq!(status, 200, "{all}");
    let records = all["records"].as_array().unwrap();
    assert_eq!(records.len(), 7, "one record per task: {all}");
    let ends: Vec<u64> = records
        .iter()
        .map(|r| r["end_ms"].as_u64().unwrap())
        .collect();
    assert!(
        ends.windows(2).all(|w| w[0] <= w[1]),
        "time order: {ends:?}"
    );
    let quarter = records.iter().find(|r| r["job_name"] == "quarter").unwrap();
    assert_eq!(quarter["exit"], json!({"Exited": 3}), "{quarter}");
    let (users, accounts) = (by_name(&all, "users"), by_name(&all, "accounts"));
    for ((kind, who), want) in &expected {
        let totals = if *kind == "user" { &users } else { &accounts };
        let got = totals[who]["gpu_seconds"].as_f64().unwrap();
        assert!(
            near(got, *want),
            "{kind} {who}: {got} GPU-s, job records say {want}"
        );
        assert!(near(
            totals[who]["gpu_hours"].as_f64().unwrap() * 3600.0,
            *want
        ));
    }
    assert!(expected[&("user", "alice".into())] > 3.5, "{expected:?}");
    assert_eq!(
        (
            users["alice"]["jobs"].clone(),
            users["alice"]["records"].clone()
        ),
        (json!(3), json!(4))
    );
    assert_eq!(
        (
            users["bob"]["jobs"].clone(),
            users["bob"]["records"].clone()
        ),
        (json!(2), json!(3))
    );
    assert_eq!(accounts["vision"]["records"], 2);

    // A user sees only their own records; asking for another user's is refused by name.
    let (status, mine) = d.get_as(&alice, "/v1/accounting");
    assert_eq!(status, 200);
    assert!(
        mine["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["user"] == "alice")
    );
    assert_eq!(mine["total"]["records"], 4);
    assert_eq!(mine["total"]["gpu_seconds"], users["alice"]["gpu_seconds"]);
    let (status, refused) = d.get_as(&alice, "/v1/accounting?user=bob");
    assert_eq!((status, &refused["error"]["field"]), (403, &json!("user")));
    let (status, one) = d.get_as(&olga, &format!("/v1/accounting?job={}", submitted[3]));
    assert_eq!((status, one["total"]["records"].clone()), (200, json!(2)));
    let (status, bad) = d.get_as(&olga, "/v1/accounting?since=last-tuesday");
    assert_eq!((status, &bad["error"]["field"]), (400, &json!("since")));
    let (_, none) = d.get_as(&olga, "/v1/accounting?until=1970-01-02T00:00:00Z");
    assert_eq!(none["total"]["records"], 0);

    // The CLI prints the same totals (GPU-seconds to 0.1).
    let cli = |args: &[&str]| {
        let out = Command::new(gantry_bin())
            .env("GANTRY_TOKEN", &olga)
            .args(["--server", d.url(), "accounting"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let table = cli(&["--since", "1h"]);
    for (name, totals) in users.iter().chain(&accounts) {
        let want = format!("{:.1}", totals["gpu_seconds"].as_f64().unwrap());
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no totals line for {name}:\n{table}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[4], want, "GPU-seconds of {name}: {line}\n{table}");
        assert_eq!(cells[1], totals["jobs"].to_string(), "{line}");
    }
    let gang_rows: Vec<&str> = table.lines().filter(|l| l.contains("frac-gang")).collect();
    assert_eq!(gang_rows.len(), 2, "{table}");
    for row in gang_rows {
        assert!(row.split_whitespace().any(|c| c.ends_with(":500")), "{row}");
    }
    let json_out: Value = serde_json::from_str(&cli(&["--user", "bob", "--json"])).unwrap();
    assert_eq!(json_out["total"]["records"], 3);
    assert!(
        json_out["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["user"] == "bob")
    );
}

#[test]
fn records_survive_a_sigkill_and_restart_without_duplicates() {
    let mut d = Daemon::start(2);
    let done = d.submit(&job(&d, "before", 1, 1, 0, "sleep 0.3"));
    d.wait_state(done, "succeeded");
    let (_, before) = d.get("/v1/accounting");
    assert_eq!(before["total"]["records"], 1, "{before}");

    // A gang running while the daemon is SIGKILLed ends after the restart, seen by adoption.
    let running = d.submit(&d.blocking_job("across", 2, 1));
    d.task_env(running, 0);
    d.task_env(running, 1);
    d.restart_after_sigkill();
    d.release(running);
    let ended = d.wait_state(running, "succeeded");
    let (_, after) = d.get("/v1/accounting");
    let records = after["records"].as_array().unwrap();
    assert_eq!(records.len(), 3, "{after}");
    assert_eq!(
        records[0], before["records"][0],
        "the earlier record is kept as it was"
    );
    let across: Vec<&Value> = records.iter().filter(|r| r["job_id"] == running).collect();
    let tasks: Vec<u64> = across
        .iter()
        .map(|r| r["task_index"].as_u64().unwrap())
        .collect();
    assert_eq!(tasks.len(), 2, "{after}");
    assert!(tasks.contains(&0) && tasks.contains(&1), "{tasks:?}");
    let job_end = ended["end_ms"].as_u64().unwrap();
    for r in &across {
        let t = &ended["tasks"][r["task_index"].as_u64().unwrap() as usize];
        assert_eq!(r["start_ms"], t["started_ms"], "{r}");
        let (start, end) = (
            r["start_ms"].as_u64().unwrap(),
            r["end_ms"].as_u64().unwrap(),
        );
        // Its end is when its exit record was written: before the daemon saw it (adoption
        // polls), never after.
        assert!(end <= job_end && end + 1000 >= job_end, "{r} vs {ended}");
        assert_eq!(r["gpus"][0]["milli"], 1000);
        assert_eq!(r["gpu_milli_seconds"], end - start, "one GPU: {r}");
    }
    // Another restart replays nothing twice.
    d.restart_after_sigkill();
    let (status, again) = d.get("/v1/accounting");
    assert_eq!(status, 200);
    assert_eq!(again, after);
}
