//! Start forecasts on a real daemon (issue 48): a pending job behind a running one is
//! forecast to start when that one ends, by its time limit while there is no history and
//! by the runtimes of the user's jobs of the same name once some ended (learnt again from
//! history after a restart); `gantry job`
//! shows it as `StartTime=` and `gantry jobs --start` lists it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::process::Command;

/// A one-GPU job named `train` with a one-hour limit that runs until released.
fn train(d: &Daemon) -> Value {
    let mut spec = d.blocking_job("train", 1, 1);
    spec["time_limit_s"] = json!(3600);
    spec
}

/// The job's forecast once it names `after` (the job it waits for).
fn forecast_after(d: &Daemon, id: u64, after: u64) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let job = d.job(id);
        let f = job["start_forecast"].clone();
        let named = f["reason"]
            .as_str()
            .is_some_and(|r| r.contains(&format!("when job {after} ends")));
        if named {
            return f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no forecast of job {id} naming job {after}: {job}\n{}",
            d.log_tail()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_pending_job_is_forecast_to_start_when_the_job_ahead_ends() {
    let d = Daemon::start(1);
    let first = d.submit(&train(&d));
    let started = d.wait_state(first, "running")["start_ms"].as_u64().unwrap();
    let second = d.submit(&train(&d));

    // No history: the job ahead runs its time limit.
    let f = forecast_after(&d, second, first);
    assert_eq!(f["p50_ms"], started + 3_600_000, "{f}");
    assert_eq!(f["p90_ms"], started + 3_600_000, "{f}");
    assert!(
        f["reason"].as_str().unwrap().contains("first in line"),
        "{f}"
    );

    let shown = Command::new(gantry_bin())
        .args(["--server", d.url(), "job", &second.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("StartForecast=") && text.contains("StartTime=2"),
        "{text}"
    );
    let listed = Command::new(gantry_bin())
        .args(["--server", d.url(), "jobs", "--start"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&listed.stdout);
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{second} ")))
        .unwrap_or_else(|| panic!("no line for job {second}:\n{table}"));
    assert!(line.contains(&format!("when job {first} ends")), "{table}");

    // The first ends after a few seconds: `train` now has a history, and the job behind
    // the second is forecast by it, not by the hour of its limit.
    d.release(first);
    d.wait_state(first, "succeeded");
    let second_start = d.wait_state(second, "running")["start_ms"]
        .as_u64()
        .unwrap();
    let third = d.submit(&train(&d));
    let f = forecast_after(&d, third, second);
    let p50 = f["p50_ms"].as_u64().unwrap();
    assert!(
        p50 < second_start + 600_000,
        "learnt from the first run, not the one-hour limit: {f}"
    );
    d.release(second);
    d.release(third);
    d.wait_state(third, "succeeded");

    // A restarted controller learns the runtimes again from its history.
    let mut d = d;
    d.stop_gracefully();
    d.start_again(None);
    let fourth = d.submit(&train(&d));
    let fourth_start = d.wait_state(fourth, "running")["start_ms"]
        .as_u64()
        .unwrap();
    let fifth = d.submit(&train(&d));
    let f = forecast_after(&d, fifth, fourth);
    let p50 = f["p50_ms"].as_u64().unwrap();
    assert!(
        p50 < fourth_start + 600_000,
        "learnt from history after a restart, not the one-hour limit: {f}"
    );
    d.release(fourth);
    d.release(fifth);
    d.wait_state(fifth, "succeeded");
}

/// `POST /v1/jobs/forecast` with `spec` (and `replaces`), once its reason has `want` (the
/// forecaster's snapshot may be older than the last submit for a moment).
fn what_if(d: &Daemon, spec: &Value, replaces: Option<u64>, want: &str) -> Value {
    d.wait_for("a what-if with the reason wanted", WAIT, || {
        let (status, f) = d.post(
            "/v1/jobs/forecast",
            &json!({"spec": spec, "replaces": replaces}),
        );
        assert!(status == 200 || status == 400, "{f}");
        f["reason"].as_str()?.contains(want).then_some(f)
    })
}

#[test]
fn what_ifs_answer_without_submitting_and_never_is_not_an_error() {
    let d = Daemon::start(2);
    let holder = d.submit(&train(&d));
    d.wait_state(holder, "running");
    let mut wide = d.blocking_job("wide", 1, 2);
    wide["time_limit_s"] = json!(3600);
    let wide_id = d.submit(&wide);
    let (_, before) = d.get("/v1/jobs");
    let count = before.as_array().unwrap().len();

    // Another job of two GPUs waits behind the pending one, which waits for the holder;
    // the pending one with one GPU instead has room now.
    let f = what_if(&d, &wide, None, &format!("when job {wide_id} ends"));
    assert!(f["reason"].as_str().unwrap().contains("1 job ahead"), "{f}");
    let mut narrow = wide.clone();
    narrow["tasks"][0]["gpus"] = json!(1);
    let f = what_if(&d, &narrow, Some(wide_id), "room now");
    assert!(f["p50_ms"].as_u64().is_some(), "{f}");
    // A shape no node can hold: never, and why.
    let mut huge = wide.clone();
    huge["tasks"][0]["gpus"] = json!(16);
    let f = what_if(&d, &huge, None, "never:");
    assert!(f["p50_ms"].is_null(), "{f}");
    // Bad input names the field; a job that is not pending cannot be varied.
    let (status, e) = d.post("/v1/jobs/forecast", &json!({"spec": wide, "bogus": 1}));
    assert_eq!(status, 400, "{e}");
    let (status, e) = d.post(
        "/v1/jobs/forecast",
        &json!({"spec": wide, "replaces": holder}),
    );
    assert!((400..500).contains(&status), "{e}");
    assert_eq!(e["error"]["field"], "replaces", "{e}");
    // Another user firing what-ifs in parallel: one runs at a time, the rest get a 429
    // naming `forecast`, none fails, and the daemon keeps answering.
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let asks: Vec<_> = (0..12)
            .map(|_| s.spawn(|| d.post("/v1/jobs/forecast", &json!({"spec": wide}))))
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });
    for (status, body) in &answers {
        match status {
            200 => assert!(body["reason"].is_string(), "{body}"),
            429 => assert_eq!(body["error"]["field"], "forecast", "{body}"),
            _ => panic!("a what-if answered {status}: {body}"),
        }
    }
    assert!(answers.iter().any(|(s, _)| *s == 200), "{answers:?}");
    // Nothing was submitted.
    let (_, after) = d.get("/v1/jobs");
    assert_eq!(after.as_array().unwrap().len(), count, "{after}");

    // The command line: a variant of the pending job, and a job not submitted.
    let out = Command::new(gantry_bin())
        .args([
            "--server",
            d.url(),
            "job",
            &wide_id.to_string(),
            "--what-if",
            "--gpus",
            "1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("as it is: ~") && text.contains("with 1 GPU: ~"),
        "{text}"
    );
    assert!(text.contains("sooner"), "{text}");
    let out = Command::new(gantry_bin())
        .args([
            "--server",
            d.url(),
            "submit",
            "--test-only",
            "--gpus",
            "16",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("never:") && text.contains("nothing was submitted"),
        "{text}"
    );
    d.release(holder);
    d.release(wide_id);
    d.wait_state(wide_id, "succeeded");
}
