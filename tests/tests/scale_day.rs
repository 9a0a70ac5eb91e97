//! The `scale_32` benchmark's day (`host/gantry/benches/scale_32/`), small: a controller and
//! four real agents with 8 fake GPUs each, about 300 jobs from four clients (arrays, gangs of
//! 2 to 4 nodes, interactive jobs, sleepers, cancellations, requeues) under the fair-share +
//! backfill pipeline, and two agents SIGKILLed mid-run and restarted after their nodes were
//! declared down. The same stream, clients and verdict as the benchmark: every acknowledged
//! job ends as the day asked (cancelled or succeeded), and no task reaches its end twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../host/gantry/benches/scale_32/check.rs"]
mod check;
#[path = "../../host/gantry/benches/scale_32/day.rs"]
#[allow(dead_code)]
mod day;
#[path = "../../host/gantry/benches/scale_32/gantry_api.rs"]
#[allow(dead_code)]
mod gantry_api;

use day::{Cluster, Kind, Res};
use gantry_api::{GantryAgents, GantryApi};
use gantry_e2e::Daemon;
use gantry_e2e::agents::Agent;
use std::sync::Mutex;
use std::time::Duration;

const TOKEN: &str = "e2e-scale-day-token-0123456789abcdef";
const AGENTS: usize = 4;
const DOWN_AFTER_MS: u64 = 1500;

struct SmallCluster<'a> {
    d: &'a Daemon,
    api: GantryApi,
    agents: Vec<Mutex<Agent>>,
}

impl GantryAgents for SmallCluster<'_> {
    fn api(&self) -> &GantryApi {
        &self.api
    }
    fn node_name(&self, i: usize) -> String {
        format!("day-{i}")
    }
    fn kill_agent(&self, i: usize) -> Res<()> {
        self.agents[i].lock().map_err(|_| "poisoned")?.sigkill();
        Ok(())
    }
    fn restart_agent(&self, i: usize) -> Res<()> {
        self.agents[i]
            .lock()
            .map_err(|_| "poisoned")?
            .restart(self.d);
        Ok(())
    }
    fn down_for(&self) -> Duration {
        Duration::from_millis(DOWN_AFTER_MS) + Duration::from_secs(3)
    }
}

#[test]
fn a_small_day_on_four_agents_loses_nothing_and_runs_nothing_twice_across_agent_kills() {
    let d = Daemon::start_with_config(
        1,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\nnode_down_after_ms = {DOWN_AFTER_MS}\n"
        ),
    );
    let agents: Vec<Mutex<Agent>> = (0..AGENTS)
        .map(|i| Mutex::new(Agent::start(&d, d.url(), &format!("day-{i}"), 8, TOKEN)))
        .collect();
    let cluster = SmallCluster {
        d: &d,
        api: GantryApi::new(d.url()),
        agents,
    };
    cluster.api.use_day_pipeline().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = day::marker_file(&dir.path().join("day")).unwrap();

    // A wide gang, one rank on every node, at idle: every rank starts.
    let id = cluster.submit_wide(AGENTS, &marker).unwrap();
    day::wide_ranks_started(&marker, &id, AGENTS, Duration::from_secs(60)).unwrap();

    let items = day::plan(300, AGENTS as u32, 20, 49);
    assert!(items.iter().any(|k| matches!(k, Kind::Gang { .. })));
    assert!(items.contains(&Kind::Cancelled) && items.contains(&Kind::Requeued));
    let log = day::run_day(
        &cluster,
        &items,
        &marker,
        &[1, 2],
        Duration::from_secs(300),
        &|_, _| {},
    );
    assert!(log.errors.is_empty(), "{:?}", log.errors);
    assert_eq!(log.losses.len(), 2, "{:?}", log.losses);
    for loss in &log.losses {
        assert!(
            loss.noticed_after_s.is_some() && loss.requeued_after_s.is_some(),
            "node {} was not noticed down or its jobs never left it: {loss:?}",
            loss.node
        );
    }
    assert!(
        log.submitted.iter().any(|s| s.requeued),
        "no requeue was accepted"
    );
    let states = cluster.api.final_states().unwrap();
    let verdict = check::verify(&log, &marker, &states).unwrap();
    assert_eq!(verdict.acknowledged, day::jobs_in(&items));
    assert!(verdict.clean(), "{}", verdict.summary());
    assert!(
        verdict.cancelled > 0 && verdict.succeeded > 0,
        "{}",
        verdict.summary()
    );
}
