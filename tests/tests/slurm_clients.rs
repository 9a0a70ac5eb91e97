//! Issue 45: tools written for SLURM drive Gantry unchanged. Each runs from PyPI (the wheels
//! of `scripts/slurm-client-wheels`) in a venv made as a plain user (`nobody`), with the
//! links of `gantry slurm-links` first on `PATH`, against a daemon started as root:
//!
//! - submitit: an `AutoExecutor` job and a 4-member `map_array` return their results; a
//!   job is cancelled; a `Checkpointable` job gets its USR2 before the time limit, calls
//!   `scontrol requeue` from inside the job, and its second run returns;
//! - dask-jobqueue: a `SLURMCluster` scaled to 2 workers computes, then scales to 0 and its
//!   jobs end.
//!
//! batchspawner and Snakemake are not covered yet (docs/user/slurm-clients.md says so).
//! Needs root (it runs the clients as another account); CI runs it as root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::slurm::{SlurmSession, lines};

/// Runs `script` with the venv's Python as nobody; its stdout (the test fails with both
/// streams and the daemon's log when it fails).
fn python(s: &SlurmSession, venv_python: &std::path::Path, name: &str, script: &str) -> String {
    s.file(name, script);
    let out = s.run(&venv_python.display().to_string(), &[name]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.d.log_tail()
    );
    stdout
}

const SUBMITIT: &str = r#"
import os, time
import submitit

ex = submitit.AutoExecutor(folder="logs/%j")
assert ex.cluster == "slurm", ex.cluster
ex.update_parameters(timeout_min=5, slurm_partition="default", gpus_per_node=1,
                     cpus_per_task=1, mem_gb=1)

def add(a, b):
    return a + b

job = ex.submit(add, 2, 3)
print("result", job.result(), flush=True)

jobs = ex.map_array(lambda x: x * x, [1, 2, 3, 4])
print("array", " ".join(j.job_id for j in jobs), flush=True)
print("results", [j.result() for j in jobs], flush=True)

# Cancelled while it runs.
long = ex.submit(time.sleep, 600)
deadline = time.time() + 60
while long.watcher.get_state(long.job_id, mode="force") != "RUNNING":
    assert time.time() < deadline, "never ran"
    time.sleep(0.2)
long.cancel()
while long.watcher.get_state(long.job_id, mode="force") == "RUNNING":
    assert time.time() < deadline, "never cancelled"
    time.sleep(0.2)
print("cancelled", long.watcher.get_state(long.job_id, mode="force"), flush=True)

# Timed out: USR2 50 s before a one-minute limit, checkpointed, requeued, run again.
class Count(submitit.helpers.Checkpointable):
    def __init__(self):
        self.runs = 0
    def __call__(self):
        self.runs += 1
        if self.runs == 1:
            time.sleep(600)
        return self.runs, int(os.environ["SLURM_RESTART_COUNT"])

ex.update_parameters(timeout_min=1, slurm_signal_delay_s=50)
print("checkpointed", ex.submit(Count()).result(), flush=True)
"#;

#[test]
fn submitit_runs_jobs_and_arrays_cancels_and_requeues_on_its_timeout_signal() {
    let s = SlurmSession::start(4);
    let venv = s.venv(&["submitit"]);
    let out = python(&s, &venv, "submitit_run.py", SUBMITIT);
    let got = lines(&out);
    assert_eq!(got[0], "result 5", "{out}");
    let members: Vec<&str> = got[1].trim_start_matches("array ").split(' ').collect();
    let array = members[0].split('_').next().unwrap();
    assert_eq!(
        members,
        (0..4).map(|i| format!("{array}_{i}")).collect::<Vec<_>>(),
        "{out}"
    );
    assert_eq!(got[2], "results [1, 4, 9, 16]");
    assert_eq!(got[3], "cancelled CANCELLED");
    // Two runs; the second knows it is the first requeue.
    assert_eq!(got[4], "checkpointed (2, 1)");
}

const DASK: &str = r#"
import time
from dask_jobqueue import SLURMCluster
from dask.distributed import Client

cluster = SLURMCluster(cores=1, processes=1, memory="1GB", queue="default",
                       walltime="00:10:00", scheduler_options={"host": "127.0.0.1"})
cluster.scale(2)
client = Client(cluster)
client.wait_for_workers(2, timeout=90)
print("workers", len(client.scheduler_info()["workers"]), flush=True)
print("sum", client.submit(sum, client.map(lambda x: x * x, range(10))).result(timeout=60), flush=True)
jobs = sorted(cluster.workers)
print("jobs", " ".join(str(j) for j in jobs), flush=True)
cluster.scale(0)
deadline = time.time() + 60
while cluster.workers or client.scheduler_info()["workers"]:
    assert time.time() < deadline, "did not scale down"
    time.sleep(0.2)
print("workers", len(client.scheduler_info()["workers"]), flush=True)
client.close()
cluster.close()
"#;

#[test]
fn dask_jobqueue_scales_a_slurm_cluster_up_computes_and_scales_down() {
    let s = SlurmSession::start(2);
    let venv = s.venv(&["dask-jobqueue"]);
    let out = python(&s, &venv, "dask_run.py", DASK);
    let got = lines(&out);
    assert_eq!(got[0], "workers 2", "{out}");
    assert_eq!(got[1], "sum 285");
    assert_eq!(got[3], "workers 0");
    // Scaled to 0: the workers' jobs end (cancelled, or done if a worker left first).
    let listed = s.ok("squeue", &["-h", "--me", "-o", "%i"]);
    gantry_e2e::poll_until(
        "the worker jobs to end",
        std::time::Duration::from_secs(60),
        || s.d.log_tail(),
        || {
            lines(&s.ok("squeue", &["-h", "--me", "-o", "%i"]))
                .is_empty()
                .then_some(())
        },
    );
    let ended = s.ok("sacct", &["-n", "-P", "-o", "JobName,State"]);
    let states: Vec<&str> = lines(&ended)
        .into_iter()
        .filter(|l| l.starts_with("dask-worker|"))
        .collect();
    assert_eq!(states.len(), 2, "{ended} (was listed: {listed})");
    assert!(
        states
            .iter()
            .all(|l| l.ends_with("|CANCELLED") || l.ends_with("|COMPLETED")),
        "{ended}"
    );
}
