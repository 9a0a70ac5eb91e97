//! Plugins cannot block the host: WASI sleeps end at once (plugin time is frozen), and a
//! plugin that waits for its clock to move runs into its deadline instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_components as comp;
use gantry_contract::{Cycle, Job, Priority, TaskGroup};
use gantry_engine::{FaultKind, PolicyFault};
use gantry_plugin_runtime::{Limits, Runtime, RuntimeOptions};
use std::sync::mpsc;
use std::time::Duration;

/// Far longer than any call may take, far shorter than the fixture's hour-long sleep.
const BOUND: Duration = Duration::from_secs(30);

fn jobs(n: u64) -> Vec<Job> {
    (1..=n)
        .map(|id| Job {
            id,
            tasks: vec![TaskGroup {
                count: 1,
                gpus: 1,
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect()
}

/// Instantiates hostile-sleep with `config` and calls `score` `calls` times on another
/// thread; panics if the calls do not all return within [`BOUND`].
fn score_sleeper(
    config: &str,
    limits: Limits,
    calls: usize,
) -> (Vec<Result<usize, PolicyFault>>, u64) {
    let config = config.to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::new(RuntimeOptions::default()).unwrap();
        let mut p = rt
            .load(comp::HOSTILE_SLEEP)
            .unwrap()
            .instantiate(&config, limits)
            .unwrap();
        let ctx = Cycle {
            id: 1,
            now_ms: 1_000,
            ..Default::default()
        };
        let jobs = jobs(3);
        let results: Vec<_> = (0..calls)
            .map(|_| p.score(&ctx, &jobs, &[0.0; 3]).map(|s| s.len()))
            .collect();
        let _ = tx.send((results, p.reinstantiations()));
    });
    rx.recv_timeout(BOUND)
        .unwrap_or_else(|e| panic!("a sleeping plugin held the host for {BOUND:?}: {e}"))
}

#[test]
fn an_hour_long_sleep_returns_at_once() {
    let (results, reinstantiations) = score_sleeper("{}", Limits::default(), 2);
    for r in results {
        assert_eq!(r.unwrap(), 3, "the sleep ends and the plugin answers");
    }
    assert_eq!(reinstantiations, 0);
}

#[test]
fn waiting_for_the_clock_to_move_hits_the_deadline() {
    let limits = Limits {
        deadline_ms: 50,
        ..Limits::default()
    };
    let (results, reinstantiations) = score_sleeper(r#"{"until_clock_moves": true}"#, limits, 2);
    for r in results {
        let err = r.unwrap_err();
        assert_eq!(err.kind, FaultKind::DeadlineExceeded, "{err}");
    }
    assert_eq!(reinstantiations, 2);
}
