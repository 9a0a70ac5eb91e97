//! Issue 27's sbatch-compatibility suite: batch scripts in the shapes the SLURM
//! documentation shows (a named job with a time limit, arrays with a step and a limit,
//! several tasks, CPUs, a GPU, memory, a working directory, a partition, a failing script,
//! a dependency, a warning signal before the time limit, a job submitted held), written
//! for this project. Each is
//! submitted as a real user (`nobody`) from that user's own directory through the CLI over
//! the daemon's socket, and checked for its output, its SLURM variables and how it ended.
//! (`srun` inside a script is out of scope: Gantry has no job steps.)
//!
//! Needs root (it runs the CLI as another account); CI runs it as root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::as_user::{
    cli_as_nobody, daemon_for_users, nobodys_dir, nobodys_file, submitted_ids,
};
use gantry_e2e::root::require_root;
use serde_json::Value;
use std::path::Path;

/// A user's session: the daemon, its socket, the user's directory and environment.
struct Session {
    d: Daemon,
    socket: std::path::PathBuf,
    home: tempfile::TempDir,
}

impl Session {
    fn new() -> Self {
        require_root("this test runs the CLI as another account");
        let (d, socket) = daemon_for_users(2);
        Self {
            d,
            socket,
            home: nobodys_dir(),
        }
    }

    /// Writes `script` as `name` in the user's directory and submits it with `gantry submit
    /// name`; the ids printed.
    fn sbatch(&self, name: &str, script: &str) -> Vec<u64> {
        nobodys_file(self.home.path(), name, script);
        let env = [
            ("PATH", "/usr/bin:/bin"),
            ("USER", "nobody"),
            ("HOME", "/nonexistent"),
        ];
        let out = cli_as_nobody(&self.socket, self.home.path(), &env, &["submit", name]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        submitted_ids(&out)
    }

    fn log(&self, id: u64, task: usize) -> String {
        let (status, text) = self.d.get_text(&format!("/v1/jobs/{id}/logs?task={task}"));
        assert_eq!(status, 200, "{text}");
        text
    }

    /// Submits `script`, waits for its one job to end in `state`; the job and its log.
    fn run(&self, name: &str, script: &str, state: &str) -> (Value, String) {
        let ids = self.sbatch(name, script);
        assert_eq!(ids.len(), 1, "{name}: {ids:?}");
        let job = self.d.wait_state(ids[0], state);
        let log = self.log(ids[0], 0);
        (job, log)
    }
}

/// The value of `NAME=value` in a log of `env`-like lines.
fn var(log: &str, name: &str) -> String {
    log.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {log:?}"))
        .to_string()
}

#[test]
fn the_shapes_of_the_sbatch_documentation_run_as_sbatch_would_run_them() {
    let s = Session::new();

    // 1. A named job with a time limit in SLURM's form; what it sees of itself.
    let (job, log) = s.run(
        "hello.sh",
        "#!/bin/sh\n#SBATCH --job-name=hello\n#SBATCH --time=00:05:00\n\
         echo SLURM_JOB_NAME=$SLURM_JOB_NAME\necho SLURM_JOB_ID=$SLURM_JOB_ID\n\
         echo SLURM_JOB_USER=$SLURM_JOB_USER\necho SLURM_NTASKS=$SLURM_NTASKS\n\
         echo SLURM_SUBMIT_DIR=$SLURM_SUBMIT_DIR\necho PWD=$(pwd)\necho WHO=$(id -un)\n",
        "succeeded",
    );
    assert_eq!(job["spec"]["time_limit_s"], 300);
    assert_eq!(var(&log, "SLURM_JOB_NAME"), "hello");
    assert_eq!(var(&log, "SLURM_JOB_ID"), job["id"].to_string());
    assert_eq!(var(&log, "SLURM_JOB_USER"), "nobody");
    assert_eq!(var(&log, "SLURM_NTASKS"), "1");
    assert_eq!(var(&log, "WHO"), "nobody");
    let home = s.home.path().canonicalize().unwrap();
    assert_eq!(Path::new(&var(&log, "SLURM_SUBMIT_DIR")), home);
    assert_eq!(
        Path::new(&var(&log, "PWD")),
        home,
        "works where it was submitted"
    );

    // 2. An array with a step and a limit of one at a time: indices 1, 4, 7.
    let ids = s.sbatch(
        "sweep.sh",
        "#!/bin/sh\n#SBATCH --array=1-7:3%1\n\
         echo TASK=$SLURM_ARRAY_TASK_ID OF=$SLURM_ARRAY_JOB_ID\n",
    );
    assert_eq!(ids.len(), 3, "{ids:?}");
    for (id, index) in ids.iter().zip([1, 4, 7]) {
        s.d.wait_state(*id, "succeeded");
        assert_eq!(
            s.log(*id, 0).trim(),
            format!("TASK={index} OF={}", ids[0]),
            "member {id}"
        );
    }
    let spans: Vec<(u64, u64)> = ids
        .iter()
        .map(|id| {
            let j = s.d.job(*id);
            (
                j["start_ms"].as_u64().unwrap(),
                j["end_ms"].as_u64().unwrap(),
            )
        })
        .collect();
    for w in spans.windows(2) {
        assert!(w[1].0 >= w[0].1, "%1: members overlapped: {spans:?}");
    }

    // 3. Two tasks: each runs the script with its own rank.
    let ids = s.sbatch(
        "ranks.sh",
        "#!/bin/sh\n#SBATCH --ntasks=2\n\
         echo RANK=$SLURM_PROCID OF=$SLURM_NTASKS LOCAL=$SLURM_LOCALID\n",
    );
    s.d.wait_state(ids[0], "succeeded");
    assert_eq!(s.log(ids[0], 0).trim(), "RANK=0 OF=2 LOCAL=0");
    assert_eq!(s.log(ids[0], 1).trim(), "RANK=1 OF=2 LOCAL=1");

    // 4. CPUs per task, memory, a GPU.
    let (job, log) = s.run(
        "resources.sh",
        "#!/bin/sh\n#SBATCH --cpus-per-task=2\n#SBATCH --mem=256M\n#SBATCH --gres=gpu:1\n\
         echo SLURM_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK\n\
         echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\n",
        "succeeded",
    );
    assert_eq!(var(&log, "SLURM_CPUS_PER_TASK"), "2");
    let gpus = var(&log, "CUDA_VISIBLE_DEVICES");
    assert!(gpus == "0" || gpus == "1", "one GPU: {gpus}");
    assert_eq!(job["spec"]["tasks"][0]["memory_mib"], 256);
    assert_eq!(job["spec"]["tasks"][0]["cpu_milli"], 2000);

    // 5. A working directory and a partition.
    let (job, log) = s.run(
        "where.sh",
        "#!/bin/sh\n#SBATCH --chdir=/tmp\n#SBATCH --partition=default\n\
         echo PWD=$(pwd)\necho SLURM_JOB_PARTITION=$SLURM_JOB_PARTITION\n",
        "succeeded",
    );
    assert_eq!(var(&log, "PWD"), "/tmp");
    assert_eq!(var(&log, "SLURM_JOB_PARTITION"), "default");
    assert_eq!(job["spec"]["queue"], "default");

    // 6. A script that fails: its exit code, as sacct would show it.
    let (job, log) = s.run(
        "fails.sh",
        "#!/bin/sh\necho before\nexit 3\necho never\n",
        "failed",
    );
    assert_eq!(job["exit_code"], 3);
    assert_eq!(log, "before\n");

    // 7. A dependency: the second starts only after the first succeeded.
    let first = s.sbatch("first.sh", "#!/bin/sh\nsleep 1\necho first\n")[0];
    let second = s.sbatch(
        "second.sh",
        &format!("#!/bin/sh\n#SBATCH --dependency=afterok:{first}\necho second\n"),
    )[0];
    let a = s.d.wait_state(first, "succeeded");
    let b = s.d.wait_state(second, "succeeded");
    assert!(
        b["start_ms"].as_u64().unwrap() >= a["end_ms"].as_u64().unwrap(),
        "{a} {b}"
    );
    assert_eq!(b["spec"]["dependencies"][0]["job"], first);

    // 8. A warning signal before the time limit (--signal=B:USR1@60 on a 65 s limit: at 5 s),
    //    which the script's shell catches (B:, as in SLURM: without it the shell is not
    //    signalled, only what it runs) to save its work and end cleanly.
    let (job, log) = s.run(
        "checkpoint.sh",
        "#!/bin/bash\n#SBATCH --time=00:01:05\n#SBATCH --signal=B:USR1@60\n\
         trap 'echo saving; exit 0' USR1\necho started\nwhile :; do sleep 0.2; done\n",
        "succeeded",
    );
    // (bash reports the `sleep` the signal ended too: "User defined signal 1".)
    assert!(
        log.starts_with("started\n") && log.ends_with("saving\n"),
        "{log:?}"
    );
    let ran_ms = job["end_ms"].as_u64().unwrap() - job["start_ms"].as_u64().unwrap();
    assert!(ran_ms < 60_000, "the signal came late: {ran_ms} ms");

    // 9. Submitted held (--hold): it waits, naming how to release it, until its user does.
    let held = s.sbatch(
        "later.sh",
        "#!/bin/sh
#SBATCH --hold
echo released
",
    )[0];
    let reason = s.d.wait_for("the hold's reason", gantry_e2e::WAIT, || {
        let job = s.d.job(held);
        assert_eq!(job["state"], "pending", "{job}");
        let message = job["reason"]["message"].as_str()?.to_string();
        message.contains("held by nobody").then_some(message)
    });
    assert!(
        reason.contains(&format!("gantry release {held}")),
        "{reason}"
    );
    let env = [("PATH", "/usr/bin:/bin")];
    let out = cli_as_nobody(
        &s.socket,
        s.home.path(),
        &env,
        &["release", &held.to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.d.wait_state(held, "succeeded");
    assert_eq!(s.log(held, 0), "released\n");
}

#[test]
fn output_and_error_go_to_the_files_sbatch_writes_as_the_user() {
    use std::os::unix::fs::MetadataExt;
    let s = Session::new();
    let (job, log) = s.run(
        "split.sh",
        "#!/bin/sh\n#SBATCH --output=out-%j.txt\n#SBATCH -e err-%x-%t.txt\necho to-out\necho to-err >&2\n",
        "succeeded",
    );
    let id = job["id"].as_u64().unwrap();
    let home = s.home.path();
    let out = home.join(format!("out-{id}.txt"));
    let err = home.join("err-split.sh-0.txt");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "to-out\n");
    assert_eq!(std::fs::read_to_string(&err).unwrap(), "to-err\n");
    assert_eq!(
        std::fs::metadata(&out).unwrap().uid(),
        65534,
        "written as the user"
    );
    assert!(
        log.contains("stdout goes to out-"),
        "the log says where: {log}"
    );

    // --output alone takes both streams, as with sbatch.
    let (job, _) = s.run(
        "both.sh",
        "#!/bin/sh\n#SBATCH -o both-%j.log\necho one\necho two >&2\n",
        "succeeded",
    );
    let both = home.join(format!("both-{}.log", job["id"]));
    assert_eq!(std::fs::read_to_string(&both).unwrap(), "one\ntwo\n");

    // A file the user may not write is never written by root: the task fails, saying why.
    let (job, log) = s.run(
        "denied.sh",
        "#!/bin/sh\n#SBATCH --output=/root/gantry-e2e-denied.txt\necho never\n",
        "failed",
    );
    assert_eq!(job["exit_code"], 127, "{job}");
    assert!(log.contains("--output/--error file"), "{log}");
    assert!(!Path::new("/root/gantry-e2e-denied.txt").exists());
}
