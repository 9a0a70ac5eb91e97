//! GPU use attributed by cgroup, on a daemon that puts its tasks in real cgroups and reads
//! the fake NVML library (issue 47, item 4): a process NVML reports on a GPU counts for the
//! task whose cgroup holds it (`/proc/<pid>/cgroup`, the executor's `job-<id>-task-<i>`
//! names), and only if that task holds the GPU. Another job's busy process on my GPU does
//! not make my idle notebook look busy, and is not counted for its own job either (with
//! cgroups off, a process in no task's cgroup counts for the GPU's holder: the other tests
//! of `gpu_idle_reclaim.rs` run that way).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::fake_nvml::{FakeGpus, node_toml};
use gantry_e2e::root::{CgroupParent, require_root};
use gantry_e2e::{Daemon, WAIT};
use serde_json::{Value, json};

/// Task 0's GPU use once `memory_mib` shows the scenario's figure, after two samples.
fn usage_when(d: &Daemon, id: u64, memory_mib: u64) -> Value {
    d.wait_for("the job's GPU use as the scenario says", WAIT, || {
        let u = d.job(id)["tasks"][0]["gpu_usage"].clone();
        (u["samples"].as_u64()? >= 2 && u["memory_mib"] == memory_mib).then_some(u)
    })
}

#[test]
fn another_jobs_process_on_my_gpu_is_not_my_use() {
    require_root("this test puts tasks in real cgroups");
    let parent = CgroupParent::new("gantry-gpu-use");
    let dir = tempfile::tempdir().unwrap();
    let mut gpus = FakeGpus::uniform(dir.path(), "cgroups", 2, "NVIDIA A100-SXM4-80GB", 81_920);
    let toml = format!(
        "{}\n[execution]\nrun_as_user = false\ncgroups = \"required\"\ncgroup_parent = \"{}\"\n\
         gpu_device_pattern = \"/nonexistent/nvidia{{index}}\"\n",
        node_toml("gpu_sample_every_s = 1\n"),
        parent.0
    );
    let d = Daemon::start_on_fake_nvml(gpus.path(), &toml);
    let (a, b) = (
        d.submit(&d.blocking_job("a", 1, 1)),
        d.submit(&d.blocking_job("b", 1, 1)),
    );
    let gpu_of = |id| d.wait_state(id, "running")["tasks"][0]["gpus"][0]["index"].as_u64();
    let (gpu_a, gpu_b) = (gpu_of(a).unwrap() as usize, gpu_of(b).unwrap() as usize);
    assert_ne!(gpu_a, gpu_b);
    let pid = |id| -> u64 { d.task_env(id, 0)["TASK_SHELL_PID"].parse().unwrap() };
    let (pid_a, pid_b) = (pid(a), pid(b));
    let cgroup = std::fs::read_to_string(format!("/proc/{pid_b}/cgroup")).unwrap();
    assert!(cgroup.contains(&format!("job-{b}-task-0")), "{cgroup}");

    // Job a computes on its GPU and, as NVML sees it, also on b's; b's own process is idle.
    gpus.update(|s| {
        s["devices"][gpu_a]["processes"] =
            json!([{"pid": pid_a, "used_memory_mib": 1024, "sm_util": 40}]);
        s["devices"][gpu_b]["processes"] = json!([
            {"pid": pid_a, "used_memory_mib": 4096, "sm_util": 90},
            {"pid": pid_b, "used_memory_mib": 256, "sm_util": 3},
        ]);
    });
    let used_b = usage_when(&d, b, 256);
    assert_eq!(used_b["util_percent"], 3, "{used_b}");
    let used_a = usage_when(&d, a, 1024);
    assert_eq!(used_a["util_percent"], 40, "{used_a}");

    d.release(a);
    d.release(b);
    d.wait_state(a, "succeeded");
    d.wait_state(b, "succeeded");
}
