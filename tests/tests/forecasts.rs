//! Start forecasts on a real daemon (issue 48): a pending job behind a running one is
//! forecast to start when that one ends, by its time limit while there is no history and
//! by the runtimes of the user's jobs of the same name once some ended; `gantry job`
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
    d.wait_for("a forecast naming the job it waits for", WAIT, || {
        let f = d.job(id)["start_forecast"].clone();
        let reason = f["reason"].as_str()?.to_string();
        reason
            .contains(&format!("when job {after} ends"))
            .then_some(f)
    })
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
}

/// `POST /v1/jobs/forecast` with `spec` (and `replaces`), once the forecaster's snapshot
/// shows `running` running.
fn what_if(d: &Daemon, spec: &Value, replaces: Option<u64>, running: u64) -> Value {
    d.wait_for("a what-if on a snapshot with the running job", WAIT, || {
        let (status, f) = d.post(
            "/v1/jobs/forecast",
            &json!({"spec": spec, "replaces": replaces}),
        );
        assert_eq!(status, 200, "{f}");
        let reason = f["reason"].as_str()?.to_string();
        (reason.contains(&format!("when job {running} ends"))
            || reason.starts_with("never")
            || reason.starts_with("room now"))
        .then_some(f)
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

    // A job of two GPUs waits for the holder; the same with one GPU has room now.
    let f = what_if(&d, &wide, None, holder);
    assert!(
        f["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("job {holder} ends")),
        "{f}"
    );
    let mut narrow = wide.clone();
    narrow["tasks"][0]["gpus"] = json!(1);
    let f = what_if(&d, &narrow, Some(wide_id), holder);
    assert!(f["reason"].as_str().unwrap().starts_with("room now"), "{f}");
    // A shape no node can hold: never, and why.
    let mut huge = wide.clone();
    huge["tasks"][0]["gpus"] = json!(16);
    let f = what_if(&d, &huge, None, holder);
    assert!(f["reason"].as_str().unwrap().starts_with("never:"), "{f}");
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
