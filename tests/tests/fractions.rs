//! Fractional GPUs in a live daemon: tasks asking less than a whole GPU share a device,
//! partly used GPUs are filled before an empty one is opened, and each task's
//! environment names its device, its share and the device memory its share entitles it to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, id_of};
use serde_json::json;

#[test]
fn quarter_gpu_tasks_fill_one_device_before_the_next_and_see_their_share() {
    let d = Daemon::start(2);
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut job = d.blocking_job(&format!("quarter-{i}"), 1, 0);
        job["tasks"] =
            json!([{"count": 1, "gpus": 0, "gpu_milli": 250, "cpu_milli": 100, "memory_mib": 64}]);
        let (status, created) = d.post("/v1/jobs", &job);
        assert_eq!(status, 201, "{created}");
        ids.push(id_of(&created));
    }
    let envs: Vec<_> = ids.iter().map(|id| d.task_env(*id, 0)).collect();
    // The first four share GPU 0; only the fifth opens GPU 1.
    for env in &envs[..4] {
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0", "{env:?}");
        assert_eq!(env["GANTRY_GPU_SHARE"], "0:250");
        assert_eq!(env["GANTRY_GPU_MILLI"], "250");
        // 81,920 MiB per configured GPU (the default), a quarter of it.
        assert_eq!(env["GANTRY_GPU_MEMORY_LIMIT_MIB"], "20480");
        assert_eq!(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=20480M");
        assert_eq!(env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "25");
    }
    assert_eq!(envs[4]["CUDA_VISIBLE_DEVICES"], "1");
    assert_eq!(envs[4]["GANTRY_GPU_SHARE"], "1:250");
    d.check_allocations();
    let (_, nodes) = d.get("/v1/nodes");
    let gpus = nodes[0]["gpus"].as_array().unwrap();
    assert_eq!(gpus[0]["allocated_milli"], 1000);
    assert_eq!(gpus[1]["allocated_milli"], 250);

    // A task without a GPU share gets no share variables.
    let mut whole = d.blocking_job("cpu-only", 1, 0);
    whole["tasks"] =
        json!([{"count": 1, "gpus": 0, "gpu_milli": 0, "cpu_milli": 100, "memory_mib": 64}]);
    let (_, created) = d.post("/v1/jobs", &whole);
    let env = d.task_env(id_of(&created), 0);
    assert!(!env.contains_key("GANTRY_GPU_SHARE"), "{env:?}");
    for id in ids.iter().chain([id_of(&created)].iter()) {
        d.release(*id);
    }
}
