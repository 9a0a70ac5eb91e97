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
