//! A controller and agents one minor version apart keep working (issue 46, item 3): an agent
//! of the previous release (0.1.0, agent protocol 1, the shared cluster token) joins this
//! build's controller and runs a job, this build's agent refused by that release's
//! controller names both (its own release, the controller's protocol), and two controllers
//! of that release on etcd are upgraded one at a time (standby, then leader) with no job
//! lost or run twice.
//!
//! The previous release's binary comes from `scripts/build-prev-release` (which `.ci/run`
//! runs before these tests, with `--ignored`): without it the tests are ignored, visibly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::Agent;
use gantry_e2e::{Daemon, workspace};
use serde_json::json;
use std::path::PathBuf;

const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
const NEEDS: &str =
    "needs the previous release's binary: scripts/build-prev-release (run by .ci/run)";

/// `target/prev-release/gantry`, which `scripts/build-prev-release` builds.
fn previous_release() -> PathBuf {
    let bin = std::env::var_os("GANTRY_PREV_BIN").map_or_else(
        || workspace().join("target/prev-release/gantry"),
        PathBuf::from,
    );
    assert!(bin.is_file(), "{NEEDS}: no {}", bin.display());
    bin
}

#[test]
#[ignore = "needs the previous release's binary: scripts/build-prev-release (run by .ci/run)"]
fn an_agent_of_the_previous_release_joins_and_runs_a_job() {
    let prev = previous_release();
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let old = Agent::start_with_binary(&d, d.url(), "old-agent", 2, TOKEN, &prev);
    let id = d.submit(&json!({
        "name": "on-the-old-agent",
        "argv": ["/bin/sh", "-c", "echo ran on $GANTRY_NODE"],
        "tasks": [{"count": 1, "gpus": 1, "gpu_milli": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["tasks"][0]["node"], old.name(), "{done}");
    let (status, out) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("ran on old-agent"), "{out}");
}

#[test]
#[ignore = "needs the previous release's binary: scripts/build-prev-release (run by .ci/run)"]
fn this_agent_refused_by_the_previous_controller_names_both_versions() {
    let prev = previous_release();
    let d = Daemon::start_with_binary(
        &prev,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let mut agent = Agent::spawn(d.url(), "new-agent", 1, TOKEN);
    let status = agent.wait_exit(std::time::Duration::from_secs(60));
    assert!(!status.success(), "{}", agent.log_tail());
    let said = agent.stderr();
    let this = format!("gantry {}", env!("CARGO_PKG_VERSION"));
    assert!(
        said.contains(&this)
            && said.contains("this controller speaks 1")
            && said.contains("upgrade the controller first"),
        "the refusal names both versions:\n{said}"
    );
}

#[test]
#[ignore = "needs the previous release's binary: scripts/build-prev-release (run by .ci/run)"]
fn two_controllers_of_the_previous_release_upgraded_one_at_a_time_lose_no_job() {
    use gantry_e2e::controllers::{
        TOKEN as CLUSTER_TOKEN, config, free_address, job, starts, submit_to_leader, wait_job,
        wait_role,
    };
    use gantry_store::test_etcd::TestEtcd;
    use gantry_store::test_postgres::TestPostgres;
    let prev = previous_release();
    let etcd = TestEtcd::start(1).expect("etcd for the test");
    let pg = TestPostgres::start().expect("PostgreSQL for the test");
    let history = pg.database("gantry").expect("a database");
    // Both controllers and the agent run 0.1.0 (this build's agent speaks a protocol a
    // 0.1.0 controller refuses: agents are upgraded after the controllers).
    let mut a = Daemon::start_listening_with_binary(
        &free_address(),
        &prev,
        &config(&etcd, &history, "ctl-a"),
    );
    wait_role(a.url(), "leader");
    let mut b = Daemon::start_listening_with_binary(
        &free_address(),
        &prev,
        &config(&etcd, &history, "ctl-b"),
    );
    wait_role(b.url(), "standby");
    let both = format!("{},{}", a.url(), b.url());
    let _agent = Agent::start_with_binary(&a, &both, "old-node", 2, CLUSTER_TOKEN, &prev);
    let urls = vec![a.url().to_string(), b.url().to_string()];
    let out = tempfile::tempdir().unwrap();
    gantry_e2e::make_private(out.path());
    let out = out.path().to_path_buf();
    // A job that runs through the whole upgrade, and one submitted before each step.
    let long = submit_to_leader(&urls, &job(&out, "long", true)).unwrap();
    wait_job(a.url(), long, "running", |j| j["state"] == "running");
    let mut quick = vec![submit_to_leader(&urls, &job(&out, "before", false)).unwrap()];

    // The standby first: it comes back as this build, standing by.
    b.stop_gracefully();
    b.start_again(None);
    wait_role(b.url(), "standby");
    quick.push(submit_to_leader(&urls, &job(&out, "b-upgraded", false)).unwrap());
    // Then the leader: SIGTERM hands over to the upgraded standby, which leads; the old
    // leader comes back as this build and stands by.
    a.stop_gracefully();
    wait_role(b.url(), "leader");
    a.start_again(None);
    wait_role(a.url(), "standby");
    quick.push(submit_to_leader(&urls, &job(&out, "a-upgraded", false)).unwrap());

    for id in &quick {
        wait_job(b.url(), *id, "succeeded", |j| j["state"] == "succeeded");
        assert_eq!(starts(&out, *id).len(), 1, "job {id} ran once");
    }
    std::fs::write(out.join(format!("release-{long}")), "").unwrap();
    wait_job(b.url(), long, "succeeded", |j| j["state"] == "succeeded");
    assert_eq!(
        starts(&out, long).len(),
        1,
        "the long job ran once, through both upgrades"
    );
}
