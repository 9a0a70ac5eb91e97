//! Issue 45: tools written for SLURM drive Gantry unchanged. Each runs from PyPI (the wheels
//! of `scripts/slurm-clients`) in a venv made as a plain user (`nobody`), with the
//! links of `gantry slurm-links` first on `PATH`, against a daemon started as root:
//!
//! - submitit: an `AutoExecutor` job and a 4-member `map_array` return their results; a
//!   job is cancelled; a `Checkpointable` job gets its USR2 before the time limit, calls
//!   `scontrol requeue` from inside the job, and its second run returns;
//! - dask-jobqueue: a `SLURMCluster` scaled to 2 workers computes, then scales to 0 and its
//!   jobs end;
//! - batchspawner: a JupyterHub (its proxy from npm) with `SlurmSpawner` starts a user's
//!   single-user server as a job, the Hub reaches it through its proxy, and stopping it
//!   cancels the job;
//! - Snakemake with `snakemake-executor-plugin-slurm`: a three-rule workflow runs each rule
//!   as a job, in order.
//!
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
# COMPLETING (SLURM's CG) while its tasks stop, as in SLURM, then CANCELLED.
while long.watcher.get_state(long.job_id, mode="force") in ("RUNNING", "COMPLETING"):
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
    assert_eq!(got[3], "cancelled CANCELLED by 65534");
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
            .all(|l| l.contains("|CANCELLED by 65534") || l.ends_with("|COMPLETED")),
        "{ended}"
    );
}

/// Drives a JupyterHub with batchspawner's `SlurmSpawner`: its batch script is batchspawner's
/// own with the user's directory in place of the passwd entry's (`nobody`'s is
/// `/nonexistent`); the Hub keeps `PATH` and `GANTRY_SERVER` for the spawner (JupyterHub 6
/// keeps no variable by default, and this daemon's socket is not at the system path).
const HUB: &str = r##"
import json, os, socket, subprocess, sys, time, urllib.request, urllib.error

home = os.getcwd()
proxy = sys.argv[1]
# As a user who activated the venv: the job finds batchspawner-singleuser on PATH.
os.environ["PATH"] = os.path.dirname(sys.executable) + ":" + os.environ["PATH"]
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
public, hub, api = free_port(), free_port(), free_port()
token = "gantry-test-token-0123456789abcdef"
script = """#!/bin/bash
#SBATCH --output={home}/jupyterhub_slurmspawner_%j.log
#SBATCH --job-name=spawner-jupyterhub
#SBATCH --chdir={home}
#SBATCH --export={{{{keepvars}}}}
#SBATCH --get-user-env=L
{{% if runtime %}}#SBATCH --time={{{{runtime}}}}
{{% endif %}}
set -euo pipefail

trap 'echo SIGTERM received' TERM
{{{{prologue}}}}
{{% if srun %}}{{{{srun}}}} {{% endif %}}{{{{cmd}}}}
echo "jupyterhub-singleuser ended gracefully"
{{{{epilogue}}}}
""".format(home=home)
jupyter = {"JUPYTER_RUNTIME_DIR": home + "/.jupyter/runtime", "JUPYTER_DATA_DIR": home + "/.jupyter/data",
           "JUPYTER_CONFIG_DIR": home + "/.jupyter", "IPYTHONDIR": home + "/.ipython"}
with open("jupyterhub_config.py", "w") as f:
    f.write(f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {public}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api}"
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"nobody"}}
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.SlurmSpawner.exec_prefix = ""
c.SlurmSpawner.req_runtime = "00:30:00"
c.SlurmSpawner.batch_script = {script!r}
c.Spawner.env_keep = ["PATH", "LANG", "VIRTUAL_ENV", "GANTRY_SERVER"]
c.Spawner.environment = {jupyter!r}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90
c.JupyterHub.services = [{{"name": "gantry-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "gantry-test", "scopes": ["admin:users", "admin:servers", "access:servers"], "services": ["gantry-test"]}}]
c.JupyterHub.db_url = "sqlite:///{home}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{home}/jupyterhub_cookie_secret"
""")
log = open("hub.log", "w")
hub_process = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "jupyterhub"), "-f", "jupyterhub_config.py"],
                               stdout=log, stderr=subprocess.STDOUT)
base = f"http://127.0.0.1:{public}"
def call(method, path):
    req = urllib.request.Request(base + path, method=method, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read()
            return r.status, (json.loads(body) if body else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, OSError) as e:
        return None, str(e)
def server():
    return ((call("GET", "/hub/api/users/nobody")[1] or {}).get("servers") or {}).get("")
def until(what, probe, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        v = probe()
        if v:
            return v
        time.sleep(0.3)
    sys.exit(f"timed out: {what}\n" + open("hub.log").read()[-6000:])
try:
    until("the hub", lambda: call("GET", "/hub/api/")[0] == 200, 90)
    code, body = call("POST", "/hub/api/users/nobody/server")
    print("spawn", code, flush=True)
    until("the server", lambda: (server() or {}).get("ready"), 150)
    print("job", (server() or {}).get("state", {}).get("job_id"), flush=True)
    print("through the proxy", call("GET", "/user/nobody/api/status")[0], flush=True)
    print("stop", call("DELETE", "/hub/api/users/nobody/server")[0], flush=True)
    until("the server to stop", lambda: server() is None, 90)
    print("stopped", flush=True)
finally:
    hub_process.terminate()
    hub_process.wait(timeout=30)
"##;

#[test]
fn batchspawner_starts_a_single_user_server_as_a_job_and_stopping_it_cancels_the_job() {
    let s = SlurmSession::start(2);
    let venv = s.venv(&["jupyterhub", "batchspawner", "jupyter_server"]);
    let proxy = s.proxy();
    s.file("hub.py", HUB);
    let out = s.run(
        &venv.display().to_string(),
        &["hub.py", &proxy.display().to_string()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        s.d.log_tail()
    );
    let got = lines(&stdout);
    assert!(got[0] == "spawn 201" || got[0] == "spawn 202", "{stdout}");
    // The Hub's admin view does not show the spawner's state to a service: the job is
    // found by its name instead.
    assert_eq!(got[2], "through the proxy 200", "{stdout}");
    assert_eq!(got[3], "stop 204");
    assert_eq!(got[4], "stopped");
    let jobs = s.ok("sacct", &["-n", "-P", "-o", "JobName,State"]);
    let spawned: Vec<&str> = lines(&jobs)
        .into_iter()
        .filter(|l| l.starts_with("spawner-jupyterhub|"))
        .collect();
    assert_eq!(spawned, ["spawner-jupyterhub|CANCELLED by 65534"], "{jobs}");
}

const SNAKEFILE: &str = r#"
localrules: all

rule all:
    input: "c.txt"

rule a:
    output: "a.txt"
    shell: "echo a $SLURM_JOB_ID > {output}"

rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "cat {input} > {output}; echo b $SLURM_JOB_ID >> {output}"

rule c:
    input: "b.txt"
    output: "c.txt"
    shell: "cat {input} > {output}; echo c $SLURM_JOB_ID >> {output}"
"#;

#[test]
fn snakemake_runs_each_rule_of_a_workflow_as_a_job() {
    let s = SlurmSession::start(2);
    let python = s.venv(&["snakemake", "snakemake-executor-plugin-slurm"]);
    s.file("Snakefile", SNAKEFILE);
    let snakemake = python.with_file_name("snakemake").display().to_string();
    // Snakemake's own process runs inside each job (about 1 GB), so each job asks for 2 GB.
    let out = s.run(
        &snakemake,
        &[
            "--executor",
            "slurm",
            "--jobs",
            "3",
            "--latency-wait",
            "5",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--seconds-between-status-checks",
            "1",
            "--default-resources",
            "slurm_partition=default",
            "runtime=5",
            "mem_mb=2000",
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        s.d.log_tail()
    );
    // Each rule ran in a job of its own, in order.
    let result = std::fs::read_to_string(s.home.path().join("c.txt")).unwrap();
    let ids: Vec<u64> = result
        .lines()
        .map(|l| l.split_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(
        result.lines().map(|l| &l[..1]).collect::<String>(),
        "abc",
        "{result}"
    );
    assert!(ids[0] < ids[1] && ids[1] < ids[2], "{result}");
    let jobs = s.ok("sacct", &["-n", "-P", "-o", "JobID,State"]);
    for id in ids {
        assert!(jobs.contains(&format!("{id}|COMPLETED")), "{jobs}");
    }
}
