//! `gantry store migrate`: a controller that ran on its embedded store (sled + SQLite) is
//! stopped, its state and history are copied to etcd and PostgreSQL (started by the test
//! on 127.0.0.1), and a controller started on those finds every job as it was — pending,
//! ended and archived — with its events and accounting, and numbers new jobs on.

use gantry_e2e::agents::Agent;
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use gantry_store::test_etcd::TestEtcd;
use gantry_store::test_postgres::TestPostgres;
use serde_json::json;

/// The moved controller's cluster token (its agent's too).
const TOKEN: &str = "store-migrate-cluster-token-0123456789";

#[test]
fn a_stopped_controller_moves_to_etcd_and_postgres_with_nothing_lost() {
    let etcd = TestEtcd::start(1).expect("etcd for the test");
    let pg = TestPostgres::start().expect("PostgreSQL for the test");
    let url = pg.database("gantry").expect("a database");
    let mut old = Daemon::start_with_config(1, "[retention]\nmin_job_age_s = 0\n");
    let done = old.submit(&old.shell_job("done", 1, 0, "exit 0"));
    old.wait_state(done, "succeeded");
    let mut held = old.shell_job("held", 1, 0, "exit 0");
    held["hold"] = json!(true);
    let held = old.submit(&held);
    old.wait_for("the ended job to leave memory", WAIT, || {
        let (_, text) = old.get_text("/metrics");
        text.lines()
            .any(|l| l == "gantry_jobs_in_memory 1")
            .then_some(())
    });

    let target = format!("etcd:{},postgres:{url}", etcd.endpoints().join(","));
    let mut report = None;
    old.restart_after_sigkill_with(|data| {
        let out = std::process::Command::new(gantry_bin())
            .args(["store", "migrate", "--from"])
            .arg(data)
            .args(["--to", &target])
            .output()
            .expect("run gantry store migrate");
        report = Some(out);
    });
    let out = report.expect("the migration ran");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("1 jobs") && said.contains("1 archived jobs"),
        "{said}"
    );
    assert!(
        !said.contains(&url),
        "no connection string in the report: {said}"
    );

    let moved = Daemon::start_with_config(
        1,
        &format!(
            "[cluster]\nlocal_node = false\ntoken = \"{TOKEN}\"\n[store]\nbackend = \"etcd\"\nendpoints = {:?}\netcd_isolated = true\n[history]\nbackend = \"postgres\"\nurl = {url:?}\n",
            etcd.endpoints()
        ),
    );
    moved.wait_for("the controller to lead", WAIT, || {
        let (_, health) = moved.get("/v1/health");
        (health["leadership"]["role"] == json!("leader")).then_some(())
    });
    // With several controllers possible (etcd), tasks run on agents only.
    let _agent = Agent::start(&moved, moved.url(), "node-a", 1, TOKEN);
    assert_eq!(moved.job(done)["state"], json!("succeeded"));
    assert_eq!(moved.job(held)["state"], json!("pending"));
    let (_, events) = moved.get(&format!("/v1/jobs/{done}/events"));
    assert!(events.as_array().is_some_and(|e| e.len() >= 2), "{events}");
    let (_, accounting) = moved.get(&format!("/v1/accounting?job={done}"));
    assert_eq!(
        accounting["records"].as_array().map(Vec::len),
        Some(1),
        "{accounting}"
    );
    let next = moved.submit(&moved.shell_job("next", 1, 0, "exit 0"));
    assert!(next > held, "ids number on: {next} after {held}");
    moved.wait_state(next, "succeeded");
    let (status, body) = moved.post(&format!("/v1/jobs/{held}/release"), &json!({}));
    assert_eq!(status, 200, "{body}");
    moved.wait_state(held, "succeeded");
}
