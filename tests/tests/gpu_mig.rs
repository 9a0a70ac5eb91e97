//! MIG slices as schedulable devices, on the fake NVML library (issue 47, item 2): a GPU in
//! MIG mode is offered as its slices, each asked for by its profile; a job gets exactly the
//! slice it was placed on (its `MIG-…` UUID in `CUDA_VISIBLE_DEVICES`), a job asking for a
//! profile with no free slice waits, a whole-GPU job gets the GPU that is not in MIG mode,
//! and `gantry nodes -l` shows who holds which slice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::fake_nvml::{FakeGpus, gpu, node_toml};
use gantry_e2e::{Daemon, WAIT, gantry_bin};
use serde_json::{Value, json};
use std::process::Command;

const A100: &str = "NVIDIA A100-SXM4-80GB";

fn slice(profile: &str, n: u32, memory_mib: u64) -> Value {
    json!({
        "profile": profile,
        "uuid": format!("MIG-{n:08x}-fake-4e56-8f00-{profile}"),
        "memory_mib": memory_mib,
    })
}

/// An operator destroys the 3g.40gb instance in `slot` (whose job is `id`) and makes a
/// 1g.10gb one in its place: the job is requeued, saying why, and the nodes show the new
/// layout.
fn replace_slice_and_see_the_job_requeued(d: &Daemon, fake: &mut FakeGpus, id: u64, slot: usize) {
    fake.update(|s| {
        s["devices"][0]["mig"]["devices"][slot] = slice("1g.10gb", 7, 9_856);
    });
    let requeued = d.wait_for("the job to be requeued", WAIT, || {
        let job = d.job(id);
        (job["requeues"] == 1).then_some(job)
    });
    let (_, events) = d.get(&format!("/v1/jobs/{id}/events"));
    assert!(
        events.to_string().contains("MIG slice 3g.40gb"),
        "{events}\n{requeued}"
    );
    d.wait_for("the new layout in /v1/nodes", WAIT, || {
        let (_, nodes) = d.get("/v1/nodes");
        nodes.to_string().contains("1g.10gb").then_some(())
    });
}

/// A job of one task on one device of `model`, recording its environment.
fn job_on(d: &Daemon, name: &str, model: &str) -> u64 {
    let mut spec = d.blocking_job(name, 1, 1);
    spec["tasks"][0]["gpu_models"] = json!([model]);
    d.submit(&spec)
}

#[test]
fn a_mig_job_gets_exactly_its_slice_and_a_whole_gpu_job_the_whole_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let mut mig_gpu = gpu(0, A100, 81_920);
    mig_gpu["mig"] = json!({
        "enabled": true,
        "devices": [
            slice("1g.10gb", 0, 9_856),
            slice("1g.10gb", 1, 9_856),
            slice("2g.20gb", 2, 19_968),
        ],
    });
    let fake = FakeGpus::new(
        dir.path(),
        "mig",
        json!({ "devices": [mig_gpu, gpu(1, A100, 81_920)], "xid_events": [] }),
    );
    let d = Daemon::start_on_fake_nvml(fake.path(), &node_toml(""));
    let node = d.get("/v1/nodes").1[0].clone();
    let gpus = node["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{node}");
    let slices: Vec<(u64, String)> = gpus[0]["mig_slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["index"].as_u64().unwrap(),
                s["profile"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        slices,
        [
            (1000, "1g.10gb".to_string()),
            (1001, "1g.10gb".to_string()),
            (1002, "2g.20gb".to_string())
        ],
        "{node}"
    );
    let uuid_of = |index: u64| -> String {
        gpus[0]["mig_slices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["index"] == index)
            .unwrap()["uuid"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // Two 1g.10gb jobs get the two 1g.10gb slices, one each.
    let a = job_on(&d, "a", "1g.10gb");
    let b = job_on(&d, "b", "1g.10gb");
    let seen: Vec<String> = [a, b]
        .iter()
        .map(|&id| d.task_env(id, 0)["CUDA_VISIBLE_DEVICES"].clone())
        .collect();
    let mut want = vec![uuid_of(1000), uuid_of(1001)];
    let mut got = seen.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "each 1g.10gb job sees exactly its slice");
    // The 2g.20gb slice, and the whole GPU that is not in MIG mode.
    let big = job_on(&d, "big", "2g.20gb");
    assert_eq!(d.task_env(big, 0)["CUDA_VISIBLE_DEVICES"], uuid_of(1002));
    let whole = job_on(&d, "whole", A100);
    assert_eq!(d.task_env(whole, 0)["CUDA_VISIBLE_DEVICES"], "1");

    // A third 1g.10gb job waits: both such slices are held.
    let c = job_on(&d, "c", "1g.10gb");
    d.wait_for("the third 1g.10gb job to wait", WAIT, || {
        let job = d.job(c);
        (job["state"] == "pending" && job["reason"]["message"].is_string()).then_some(())
    });

    // Who holds which slice.
    let out = Command::new(gantry_bin())
        .args(["--server", d.url(), "nodes", "-l"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("MIG 1002"))
        .unwrap_or_else(|| panic!("no line for slice 1002:\n{text}"));
    assert!(line.contains(&format!("job {big} (1000 milli)")), "{line}");
    let holders = text
        .lines()
        .filter(|l| l.contains("MIG ") && l.contains("job "))
        .count();
    assert_eq!(holders, 3, "{text}");

    // A freed slice goes to the job that waited for it.
    d.release(a);
    d.wait_state(a, "succeeded");
    d.wait_state(c, "running");
    assert_eq!(d.task_env(c, 0)["CUDA_VISIBLE_DEVICES"], seen[0]);
    d.check_allocations();
}

#[test]
fn a_new_mig_layout_is_reported_and_a_job_on_a_slice_gone_is_requeued_uncharged() {
    let dir = tempfile::tempdir().unwrap();
    let mut mig_gpu = gpu(0, A100, 81_920);
    mig_gpu["mig"] = json!({
        "enabled": true,
        "devices": [slice("3g.40gb", 0, 40_192), slice("3g.40gb", 1, 40_192)],
    });
    let mut fake = FakeGpus::new(
        dir.path(),
        "mig",
        json!({ "devices": [mig_gpu], "xid_events": [] }),
    );
    let d = Daemon::start_on_fake_nvml(fake.path(), &node_toml(""));
    // The job's first run waits; its run after the requeue ends at once.
    let mut spec = d.shell_job(
        "on-a-slice",
        1,
        1,
        "if [ \"$SLURM_RESTART_COUNT\" != 0 ]; then exit 0; fi; sleep 120",
    );
    spec["tasks"][0]["gpu_models"] = json!(["3g.40gb"]);
    let id = d.submit(&spec);
    let job = d.wait_state(id, "running");
    let held = job["tasks"][0]["gpus"][0]["index"].as_u64().unwrap();
    let slot = (held - 1000) as usize;

    // The node reports the new layout, and the job runs again on the 3g.40gb slice left.
    replace_slice_and_see_the_job_requeued(&d, &mut fake, id, slot);
    d.wait_state(id, "succeeded");
    let (_, acct) = d.get(&format!("/v1/accounting?job={id}"));
    let first = acct["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == 0)
        .cloned()
        .unwrap_or_default();
    assert!(
        first["uncharged"]
            .as_str()
            .is_some_and(|u| u.contains("is gone")),
        "{acct}"
    );
    d.check_allocations();
}

#[test]
fn an_agents_new_mig_layout_reaches_the_controller_and_requeues_the_job_on_a_slice_gone() {
    const TOKEN: &str = "e2e-cluster-token-0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let mut mig_gpu = gpu(0, A100, 81_920);
    mig_gpu["mig"] = json!({
        "enabled": true,
        "devices": [slice("3g.40gb", 0, 40_192), slice("3g.40gb", 1, 40_192)],
    });
    let mut fake = FakeGpus::new(
        dir.path(),
        "agent-mig",
        json!({ "devices": [mig_gpu], "xid_events": [] }),
    );
    let d = Daemon::start_with_config(
        0,
        &format!(
            "[cluster]\ntoken = \"{TOKEN}\"\nlocal_node = false\nheartbeat_interval_ms = 200\n"
        ),
    );
    let agent = gantry_e2e::agents::Agent::start_on_fake_nvml(
        &d,
        d.url(),
        "mig-agent",
        TOKEN,
        &node_toml(""),
        fake.path(),
    );
    let mut spec = d.shell_job(
        "on-an-agents-slice",
        1,
        1,
        "if [ \"$SLURM_RESTART_COUNT\" != 0 ]; then exit 0; fi; env > \"$OUTDIR/env-$GANTRY_JOB_ID-0\"; sleep 120",
    );
    spec["tasks"][0]["gpu_models"] = json!(["3g.40gb"]);
    let id = d.submit(&spec);
    let job = d.wait_state(id, "running");
    assert_eq!(job["tasks"][0]["node"], agent.name(), "{job}");
    let slot = (job["tasks"][0]["gpus"][0]["index"].as_u64().unwrap() - 1000) as usize;
    // The task on the agent sees exactly its slice.
    let uuid = fake.scenario()["devices"][0]["mig"]["devices"][slot]["uuid"].clone();
    assert_eq!(json!(d.task_env(id, 0)["CUDA_VISIBLE_DEVICES"]), uuid);

    replace_slice_and_see_the_job_requeued(&d, &mut fake, id, slot);
    d.wait_state(id, "succeeded");
    d.check_allocations();
}

#[test]
fn slices_pack_onto_the_gpu_already_in_use_through_the_0_3_contract() {
    // GPU 0 has three 1g.10gb slices, GPU 1 two. The default placement (`first-fit`, a 0.3
    // component) sees each slice's GPU (`gpu.parent`) and fills the GPU with the fewest
    // free slices first; by index alone (a 0.2 plugin) the jobs would take 1000, 1001, 1002.
    let dir = tempfile::tempdir().unwrap();
    let mig = |n: u32, slots: &[u32]| {
        let mut g = gpu(n, A100, 81_920);
        g["mig"] = json!({
            "enabled": true,
            "devices": slots.iter().map(|&k| slice("1g.10gb", k, 9_856)).collect::<Vec<_>>(),
        });
        g
    };
    let (gpu0, gpu1) = (mig(0, &[0, 1, 2]), mig(1, &[10, 11]));
    let fake = FakeGpus::new(
        dir.path(),
        "mig-pack",
        json!({ "devices": [gpu0, gpu1], "xid_events": [] }),
    );
    let d = Daemon::start_on_fake_nvml(fake.path(), &node_toml(""));
    let node = d.get("/v1/nodes").1[0].clone();
    let index_of = |uuid: &str| -> u64 {
        node["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["mig_slices"].as_array().cloned().unwrap_or_default())
            .find(|s| s["uuid"] == uuid)
            .unwrap_or_else(|| panic!("no slice {uuid} in {node}"))["index"]
            .as_u64()
            .unwrap()
    };
    let mut got = Vec::new();
    for name in ["a", "b", "c"] {
        let id = job_on(&d, name, "1g.10gb");
        got.push(index_of(&d.task_env(id, 0)["CUDA_VISIBLE_DEVICES"]));
    }
    assert_eq!(got, [1010, 1011, 1000], "{node}");
    d.check_allocations();
}
