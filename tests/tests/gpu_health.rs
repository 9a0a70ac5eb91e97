//! GPUs as NVML reports them, on the fake NVML library (issue 47): a controller and an agent
//! read their GPUs through `node.nvml_library`, so inventory, the health watcher and the
//! node check run the daemon's real NVML code path without a GPU.
//!
//! Proved here: the inventory equals the scenario; an Xid 79 mid-job on the agent's GPU
//! stops a two-node gang once and requeues it, its GPU time uncharged, the GPU out of
//! service (with the failed node check in `gantry nodes -l`) until the node check passes,
//! then the job runs again and succeeds; an unknown Xid is reported as a fault, and a
//! malformed scenario or an Xid for a GPU the scenario does not have is reported while the
//! daemon keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::agents::{Agent, node};
use gantry_e2e::fake_nvml::{FakeGpus, node_toml};
use gantry_e2e::{Daemon, WAIT, gantry_bin, tasks};
use serde_json::{Value, json};
use std::process::Command;

const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";

/// Node settings: health polled every second; the node check passes once `ok` exists.
fn health_toml(ok: &std::path::Path) -> String {
    node_toml(&format!(
        "health_check = [\"sh\", \"-c\", \"test -e {}\"]\nhealth_check_every_s = 1\n",
        ok.display()
    ))
}

/// The GPUs of node `name` in `/v1/nodes`.
fn gpus_of(d: &Daemon, name: &str) -> Vec<Value> {
    node(d, name)
        .and_then(|n| n["gpus"].as_array().cloned())
        .unwrap_or_default()
}

fn metric(d: &Daemon, name: &str) -> f64 {
    let (_, text) = d.get_text("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A controller on `ctl` and an agent (`gpu-agent`) on `agent`, both with `health_toml(ok)`;
/// the controller's own node's name.
fn controller_and_agent(
    ctl: &FakeGpus,
    agent: &FakeGpus,
    ok: &std::path::Path,
) -> (Daemon, Agent, String) {
    let d = Daemon::start_on_fake_nvml(
        ctl.path(),
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nheartbeat_interval_ms = 200\n\n{}",
            health_toml(ok)
        ),
    );
    let a = Agent::start_on_fake_nvml(
        &d,
        d.url(),
        "gpu-agent",
        TOKEN,
        &health_toml(ok),
        agent.path(),
    );
    let (_, nodes) = d.get("/v1/nodes");
    let local = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] != a.name())
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    (d, a, local)
}

#[test]
fn an_xid_mid_job_requeues_the_gang_once_uncharged_and_the_gpu_waits_for_its_check() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("gpu-ok");
    let ctl_gpus = FakeGpus::uniform(dir.path(), "controller", 2, "NVIDIA A100-SXM4-80GB", 81_920);
    let mut agent_gpus = FakeGpus::uniform(dir.path(), "agent", 2, "NVIDIA H100 80GB HBM3", 81_559);
    let (d, agent, local) = controller_and_agent(&ctl_gpus, &agent_gpus, &ok);

    // The inventory is the scenario's, on both nodes.
    for (name, fake) in [(local.as_str(), &ctl_gpus), (agent.name(), &agent_gpus)] {
        let gpus = gpus_of(&d, name);
        let want = fake.scenario()["devices"].as_array().unwrap();
        assert_eq!(gpus.len(), want.len(), "{name}: {gpus:?}");
        for (g, w) in gpus.iter().zip(want) {
            assert_eq!(g["model"], w["name"], "{g}");
            assert_eq!(g["uuid"], w["uuid"], "{g}");
            assert_eq!(g["memory_mib"], w["memory_mib"], "{g}");
            assert_eq!(g["pci_bus_id"], w["pci_bus_id"], "{g}");
            assert_eq!(g["healthy"], true, "{g}");
        }
    }

    // A two-node gang: two tasks of two GPUs, one on each node. The first run waits; the
    // run after the requeue ends at once.
    let script = r#"if [ "$SLURM_RESTART_COUNT" != 0 ]; then exit 0; fi
touch "$OUTDIR/first-$RANK"; sleep 120"#;
    let spec = json!({
        "name": "gang",
        "argv": ["/bin/sh", "-c", script],
        "env": {"OUTDIR": d.out_dir()},
        "tasks": tasks(2, 2),
    });
    let id = d.submit(&spec);
    let running = d.wait_state(id, "running");
    let on: Vec<&str> = running["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["node"].as_str().unwrap())
        .collect();
    assert!(
        on.contains(&agent.name()) && on.contains(&local.as_str()),
        "{running}"
    );
    d.wait_for("both ranks to start", WAIT, || {
        (d.out_dir().join("first-0").exists() && d.out_dir().join("first-1").exists()).then_some(())
    });

    // Xid 79 (fallen off the bus) on the agent's GPU 1.
    agent_gpus.xid(1, 1, 79);
    let requeued = d.wait_for("the gang to be requeued", WAIT, || {
        let job = d.job(id);
        (job["requeues"] == 1 && job["state"] == "pending").then_some(job)
    });
    let (_, events) = d.get(&format!("/v1/jobs/{id}/events"));
    assert!(
        events
            .to_string()
            .contains("GPU 1 of node gpu-agent failed (critical Xid error 79)"),
        "{events}\n{requeued}"
    );

    // Out of service, with the failed node check shown, while the gang waits.
    let faulty = d.wait_for("the failed node check to show", WAIT, || {
        let g = gpus_of(&d, agent.name()).get(1).cloned()?;
        g["health"]["check"].as_str().is_some().then_some(g)
    });
    assert_eq!(faulty["healthy"], false, "{faulty}");
    assert!(
        faulty["health"]["reason"]
            .as_str()
            .unwrap()
            .contains("critical Xid error 79"),
        "{faulty}"
    );
    assert!(
        faulty["health"]["check"]
            .as_str()
            .unwrap()
            .contains("failed"),
        "{faulty}"
    );
    let out = Command::new(gantry_bin())
        .args(["--server", d.url(), "nodes", "-l"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("UNHEALTHY") && text.contains("critical Xid error 79"),
        "{text}"
    );
    assert!(
        text.contains("out of service until the node check passes"),
        "{text}"
    );
    assert_eq!(d.job(id)["state"], "pending", "no GPU to run on yet");

    // The first run is recorded, uncharged; fair share holds nothing for it.
    let (_, acct) = d.get(&format!("/v1/accounting?job={id}"));
    let records = acct["records"].as_array().unwrap();
    assert_eq!(
        records.len(),
        2,
        "one record per task of the first run: {acct}"
    );
    for r in records {
        assert!(
            r["uncharged"]
                .as_str()
                .unwrap()
                .contains("GPU 1 of node gpu-agent"),
            "{r}"
        );
    }
    let (_, share) = d.get("/v1/fairshare");
    let charged: f64 = share["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["gpu_seconds"].as_f64().unwrap())
        .sum();
    assert_eq!(charged, 0.0, "{share}");
    assert_eq!(metric(&d, "gantry_gpu_fault_stops_total"), 1.0);

    // The node check passes: the GPU is back, the gang runs again and succeeds, once.
    std::fs::write(&ok, "").unwrap();
    let done = d.wait_state(id, "succeeded");
    assert_eq!(done["requeues"], 1, "{done}");
    let g = &gpus_of(&d, agent.name())[1];
    assert_eq!(g["healthy"], true, "{g}");
    let (_, events) = d.get(&format!("/v1/jobs/{id}/events"));
    let text = events.to_string();
    assert!(
        text.contains("gpu-fault") && text.contains("requeued"),
        "{text}"
    );
    assert!(
        !d.log_lines("is back in service").is_empty(),
        "{}",
        d.log_tail()
    );
    assert_eq!(
        metric(&d, "gantry_gpu_health_checks_total{result=\"passed\"}"),
        1.0
    );
}

#[test]
fn unknown_xids_malformed_scenarios_and_stray_events_are_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut fake = FakeGpus::uniform(dir.path(), "node", 2, "NVIDIA A100-SXM4-80GB", 81_920);
    let d = Daemon::start_on_fake_nvml(fake.path(), &node_toml(""));
    let name = d.get("/v1/nodes").1[0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(gpus_of(&d, &name).len(), 2);

    // An Xid number no table knows: a fault, named by its number.
    fake.xid(1, 0, 12345);
    let g = d.wait_for("the unknown Xid to be reported", WAIT, || {
        let g = gpus_of(&d, &name).first().cloned()?;
        (g["healthy"] == false).then_some(g)
    });
    assert!(
        g["health"]["reason"].as_str().unwrap().contains("12345"),
        "{g}"
    );

    // A malformed rewrite and an event for GPU 9 of 2: refused by the library, said in the
    // daemon's log; the last good scenario keeps serving and GPU 1 stays healthy.
    fake.write_raw("{ not json");
    d.wait_for("the malformed scenario to be reported", WAIT, || {
        (!d.log_lines("fake NVML:").is_empty()).then_some(())
    });
    fake.xid(2, 9, 79);
    d.wait_for("the stray event to be reported", WAIT, || {
        d.log_lines("fake NVML:")
            .iter()
            .any(|l| l.contains("9"))
            .then_some(())
    });
    assert_eq!(gpus_of(&d, &name)[1]["healthy"], true);
    assert_eq!(d.get("/v1/nodes").0, 200);

    // A daemon started on a malformed scenario says why and takes its GPUs from
    // configuration.
    let bad = FakeGpus::new(dir.path(), "bad", json!({}));
    bad.write_raw("[1, 2");
    let d2 = Daemon::start_on_fake_nvml(bad.path(), &node_toml(""));
    let n = &d2.get("/v1/nodes").1[0];
    assert_eq!(n["gpu_source"], "config", "{n}");
    assert!(!d2.log_lines("fake NVML:").is_empty(), "{}", d2.log_tail());
    assert!(
        !d2.log_lines("NVML unavailable").is_empty(),
        "{}",
        d2.log_tail()
    );
}

#[test]
fn a_gpu_faulty_at_discovery_returns_to_service_when_its_node_check_passes() {
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("gpu-ok");
    // GPU 1 of each node has an uncorrected ECC error when the daemon starts.
    let faulty = |name: &str| {
        let mut f = FakeGpus::uniform(dir.path(), name, 2, "NVIDIA A100-SXM4-80GB", 81_920);
        f.update(|s| s["devices"][1]["ecc_uncorrected_volatile"] = json!(1));
        f
    };
    let (ctl_gpus, agent_gpus) = (faulty("controller"), faulty("agent"));
    let (d, agent, local) = controller_and_agent(&ctl_gpus, &agent_gpus, &ok);
    for name in [local.as_str(), agent.name()] {
        let g = d.wait_for(
            "the failed node check of the GPU faulty at discovery",
            WAIT,
            || {
                let g = gpus_of(&d, name).get(1).cloned()?;
                g["health"]["check"].as_str().is_some().then_some(g)
            },
        );
        assert_eq!(g["healthy"], false, "{name}: {g}");
    }
    // A job of two GPUs on one node waits while each node has one.
    let mut spec = d.shell_job("two", 1, 2, "true");
    spec["tasks"][0]["count"] = json!(1);
    let id = d.submit(&spec);
    assert_eq!(d.job(id)["state"], "pending");

    // The operator fixes the GPUs; the node check passes on both nodes.
    std::fs::write(&ok, "").unwrap();
    for name in [local.as_str(), agent.name()] {
        d.wait_for("the GPU back in service", WAIT, || {
            let g = gpus_of(&d, name).get(1).cloned()?;
            (g["healthy"] == true).then_some(())
        });
    }
    d.wait_state(id, "succeeded");
}
