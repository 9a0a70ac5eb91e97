//! Issue 45: SLURM's own command names as Gantry, run as a plain user (`nobody`) from that
//! user's directory with the links of `gantry slurm-links` first on `PATH`, against a daemon
//! started as root: `sbatch` (a script with `#SBATCH` lines, `--parsable`, `--wrap`,
//! arrays), `squeue`, `sacct`, `scancel`, `sinfo`, `scontrol` (show, hold/release of arrays
//! and members, requeue) and `srun` (a step inside a job, an interactive job outside one);
//! SLURM's warning-signal scope; and bad input refused with nothing submitted.
//!
//! Needs root (it runs the commands as another account); CI runs it as root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::slurm::{SlurmSession, lines};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// Polls `sacct -j ID` until its state is `state`; the sacct line `JobID|State|ExitCode|...`.
fn wait_sacct(s: &SlurmSession, id: &str, state: &str) -> String {
    gantry_e2e::poll_until(
        &format!("job {id} to be {state} in sacct"),
        WAIT,
        || s.d.log_tail(),
        || {
            let out = s.ok(
                "sacct",
                &["-j", id, "-n", "-P", "-o", "JobID,State,ExitCode,Restarts"],
            );
            let all = lines(&out);
            // `CANCELLED by UID` is a CANCELLED state.
            let is = |l: &&str| {
                l.split('|')
                    .nth(1)
                    .is_some_and(|st| st.split(" by ").next() == Some(state))
            };
            (!all.is_empty() && all.iter().all(is)).then(|| out.clone())
        },
    )
}

#[test]
fn a_batch_script_runs_with_slurm_variables_and_srun_steps() {
    let s = SlurmSession::start(4);
    let home = s.home.path().display().to_string();
    s.file(
        "job.sh",
        &format!(
            "#!/bin/bash\n#SBATCH -J hello\n#SBATCH -t 5\n#SBATCH --gres=gpu:1\n\
             #SBATCH -o {home}/out-%j.txt\n#SBATCH --wckey=abc\n\
             echo \"id=$SLURM_JOB_ID name=$SLURM_JOB_NAME nodes=$SLURM_JOB_NODELIST nn=$SLURM_NNODES\"\n\
             echo \"gpus=$SLURM_JOB_GPUS on_node=$SLURM_GPUS_ON_NODE tpn=$SLURM_TASKS_PER_NODE submit=$SLURM_SUBMIT_DIR\"\n\
             srun --unbuffered --output {home}/step-%j_%t.out -n 2 \
             bash -c 'echo rank $SLURM_PROCID of $SLURM_NTASKS step $SLURM_STEP_ID'\n"
        ),
    );
    let out = s.run("sbatch", &["job.sh"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    let id = printed
        .strip_prefix("Submitted batch job ")
        .map(str::trim)
        .unwrap_or_else(|| panic!("{printed:?}"))
        .to_string();
    // A real sbatch option Gantry does not serve is a one-line note.
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(
        notes.contains("--wckey=abc") && notes.contains("not supported"),
        "{notes}"
    );
    wait_sacct(&s, &id, "COMPLETED");
    let text = std::fs::read_to_string(s.home.path().join(format!("out-{id}.txt"))).unwrap();
    let node = s.ok("sinfo", &["-N", "-h", "-o", "%N"]).trim().to_string();
    assert!(
        text.contains(&format!("id={id} name=hello nodes={node} nn=1")),
        "{text}"
    );
    assert!(text.contains("on_node=1 tpn=1"), "{text}");
    assert!(text.contains(&format!("submit={home}")), "{text}");
    for rank in 0..2 {
        let step =
            std::fs::read_to_string(s.home.path().join(format!("step-{id}_{rank}.out"))).unwrap();
        assert_eq!(step, format!("rank {rank} of 2 step 0\n"));
    }
    // sacct's fields, and sinfo's GRES.
    let line = s.ok(
        "sacct",
        &[
            "-j",
            &id,
            "-X",
            "-n",
            "-P",
            "-o",
            "JobID,JobName,State,ExitCode,NodeList,AllocTRES",
        ],
    );
    let fields: Vec<&str> = line.trim().split('|').collect();
    assert_eq!(
        &fields[..5],
        [id.as_str(), "hello", "COMPLETED", "0:0", node.as_str()],
        "{line}"
    );
    assert!(fields[5].contains("gres/gpu=1"), "{line}");
    assert_eq!(
        s.ok("sinfo", &["-N", "-h", "-o", "%N %G"]).trim(),
        format!("{node} gpu:4")
    );

    // Nothing exported: the system's default PATH, never the root daemon's.
    let out = format!("{home}/path-%j.txt");
    let id = s.ok(
        "sbatch",
        &[
            "--parsable",
            "--export=NONE",
            "-o",
            &out,
            "--wrap",
            "echo $PATH",
        ],
    );
    let id = id.trim();
    wait_sacct(&s, id, "COMPLETED");
    let path = std::fs::read_to_string(s.home.path().join(format!("path-{id}.txt"))).unwrap();
    assert_eq!(
        path,
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    );
}

#[test]
fn squeue_scontrol_scancel_and_arrays_behave_as_slurms() {
    let s = SlurmSession::start(4);
    let id = s
        .ok("sbatch", &["--parsable", "--wrap", "sleep 300"])
        .trim()
        .to_string();
    gantry_e2e::poll_until(
        "the job to run",
        WAIT,
        || s.d.log_tail(),
        || {
            let out = s.ok("squeue", &["-h", "-j", &id, "-o", "%i %T %u %j"]);
            (out.trim() == format!("{id} RUNNING nobody wrap")).then_some(())
        },
    );
    assert!(
        s.ok("squeue", &["--me", "-h", "-o", "%i"])
            .lines()
            .any(|l| l.trim() == id)
    );
    let shown = s.ok("scontrol", &["show", "job", &id]);
    assert!(
        shown.contains(&format!("JobId={id} ")) && shown.contains("JobState=RUNNING"),
        "{shown}"
    );
    // A SIGTERM'd job ends CANCELLED, as sacct spells it, with SLURM's exit code form.
    s.ok("scancel", &[&id]);
    let line = wait_sacct(&s, &id, "CANCELLED");
    // Who cancelled it, by uid (nobody's), as sacct says it.
    assert!(line.contains("|CANCELLED by 65534|0:15|"), "{line}");
    // Cancelling it again is reported, not a failure (as SLURM).
    let again = s.run("scancel", &[&id]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already completing or completed"));

    // An array: --parsable prints the array's id; members are ID_INDEX with their extent.
    let array = s
        .ok(
            "sbatch",
            &[
                "--parsable",
                "--array=0-3%2",
                "--wrap",
                "echo $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT/$SLURM_ARRAY_TASK_MAX",
            ],
        )
        .trim()
        .to_string();
    let done = wait_sacct(&s, &array, "COMPLETED");
    let ids: Vec<&str> = lines(&done)
        .iter()
        .map(|l| l.split('|').next().unwrap())
        .collect();
    assert_eq!(
        ids,
        (0..4).map(|i| format!("{array}_{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn hold_release_and_requeue_take_arrays_and_members() {
    let s = SlurmSession::start(4);
    let array = s
        .ok(
            "sbatch",
            &["--parsable", "--hold", "--array=0-2", "--wrap", "true"],
        )
        .trim()
        .to_string();
    let state = |member: u32| {
        let out = s.ok(
            "sacct",
            &[
                "-j",
                &format!("{array}_{member}"),
                "-n",
                "-P",
                "-o",
                "State",
            ],
        );
        out.trim().to_string()
    };
    // One member released: it alone runs.
    s.ok("scontrol", &["release", &format!("{array}_1")]);
    wait_sacct(&s, &format!("{array}_1"), "COMPLETED");
    assert_eq!((state(0), state(2)), ("PENDING".into(), "PENDING".into()));
    // The array's id releases every member left.
    s.ok("scontrol", &["release", &array]);
    wait_sacct(&s, &array, "COMPLETED");

    // scontrol requeue stops a running job and runs it again, counted in SLURM_RESTART_COUNT.
    let home = s.home.path().display().to_string();
    let id = s
        .ok(
            "sbatch",
            &[
                "--parsable",
                "-o",
                &format!("{home}/requeue-%j.out"),
                "--wrap",
                "echo run $SLURM_RESTART_COUNT; [ \"$SLURM_RESTART_COUNT\" -ge 1 ] || sleep 300",
            ],
        )
        .trim()
        .to_string();
    let log = s.home.path().join(format!("requeue-{id}.out"));
    gantry_e2e::poll_until(
        "the first run",
        WAIT,
        || s.d.log_tail(),
        || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|t| t.contains("run 0"))
                .map(|_| ())
        },
    );
    s.ok("scontrol", &["requeue", &id]);
    let line = wait_sacct(&s, &id, "COMPLETED");
    assert!(line.trim().ends_with("|1"), "one requeue: {line}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "run 0\nrun 1\n");
    // A job that is not running cannot be requeued.
    assert!(!s.run("scontrol", &["requeue", &id]).status.success());
}

#[test]
fn the_warning_signal_reaches_the_steps_and_not_the_batch_shell() {
    let s = SlurmSession::start(2);
    let home = s.home.path().display().to_string();
    // --signal=USR1@55 on a one-minute limit: at 5 s. The step's shell traps it and ends;
    // the batch shell has no trap, is not signalled (as in SLURM), and goes on.
    s.file(
        "warn.sh",
        &format!(
            "#!/bin/bash\n#SBATCH -t 1\n#SBATCH --signal=USR1@55\n#SBATCH -o {home}/warn-%j.out\n\
             srun sh -c 'trap \"echo step got USR1; exit 0\" USR1; while :; do sleep 0.2; done'\n\
             echo batch shell goes on\n"
        ),
    );
    let id = s
        .ok("sbatch", &["--parsable", "warn.sh"])
        .trim()
        .to_string();
    wait_sacct(&s, &id, "COMPLETED");
    let text = std::fs::read_to_string(s.home.path().join(format!("warn-{id}.out"))).unwrap();
    assert!(
        text.contains("step got USR1\n") && text.ends_with("batch shell goes on\n"),
        "{text:?}"
    );
}

#[test]
fn srun_outside_a_job_is_an_interactive_job() {
    let s = SlurmSession::start(2);
    let out = s.run(
        "srun",
        &[
            "-t",
            "1",
            "-n",
            "1",
            "--gres=gpu:1",
            "sh",
            "-c",
            "echo hi $SLURM_GPUS_ON_NODE",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "hi 1");
    let failed = s.run("srun", &["sh", "-c", "exit 3"]);
    assert_eq!(failed.status.code(), Some(3));
}

#[test]
fn bad_input_is_refused_and_nothing_is_submitted() {
    let s = SlurmSession::start(2);
    s.file("job.sh", "#!/bin/sh\necho hi\n");
    s.file("dos.sh", "#!/bin/sh\r\necho hi\r\n");
    s.file("noshebang.sh", "echo hi\n");
    for (args, says) in [
        (vec!["--bogus", "job.sh"], "unknown option --bogus"),
        (vec!["--tme=5", "job.sh"], "did you mean --time?"),
        (
            vec!["-t", "soon", "job.sh"],
            "not a whole number of time units",
        ),
        (
            vec!["--gres=gpu:64", "job.sh"],
            "no node in this cluster could ever hold this job",
        ),
        (
            vec!["--dependency=afterok:99999", "job.sh"],
            "job 99999 does not exist",
        ),
        (vec!["dos.sh"], "dos2unix"),
        (vec!["noshebang.sh"], "first"),
        (vec!["job.sh", "an-argument"], "arguments after the script"),
    ] {
        let out = s.run("sbatch", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            err.starts_with("sbatch: error: ") && err.contains(says),
            "{args:?}: {err}"
        );
    }
    let listed = s.ok(
        "sacct",
        &["-a", "-n", "-P", "-o", "JobID", "-S", "now-1hours"],
    );
    assert!(
        lines(&listed).is_empty(),
        "something was submitted: {listed}"
    );
    assert!(!s.run("sacct", &["-o", "JobID,Frobnicate"]).status.success());
    assert!(!s.run("squeue", &["--frobnicate"]).status.success());
}

#[test]
fn gantry_jobs_reads_slurms_states_and_me_and_root_submits_without_its_own_path() {
    let s = SlurmSession::start(2);
    let id = s
        .ok("sbatch", &["--parsable", "--wrap", "sleep 300"])
        .trim()
        .to_string();
    gantry_e2e::poll_until(
        "the job to run",
        WAIT,
        || s.d.log_tail(),
        || {
            let out = s.ok("gantry", &["jobs", "--me", "-t", "PD,R"]);
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(id.as_str()) && l.contains("running"))
                .then_some(())
        },
    );
    let others = s.ok("gantry", &["jobs", "-u", "somebody-else", "-t", "R"]);
    assert!(!others.contains(&format!("\n{id} ")), "{others}");
    let bad = s.run("gantry", &["jobs", "-t", "SOMETIMES"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid job state"));
    s.ok("scancel", &[&id]);

    // Root submitting for nobody (as the demo does): root's PATH and home stay with root.
    let home = s.home.path().display().to_string();
    let out = std::process::Command::new(s.bin.path().join("gantry"))
        .args([
            "submit",
            "-D",
            &home,
            "-o",
            &format!("{home}/root-%j.txt"),
            "--",
            "sh",
            "-c",
            "echo $PATH $HOME",
        ])
        .env_clear()
        .env("PATH", "/root/private/bin:/usr/bin:/bin")
        .env("HOME", "/root")
        .env("USER", "nobody")
        .env("GANTRY_SERVER", format!("unix:{}", s.socket.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|w| w.parse::<u64>().ok())
        .unwrap()
        .to_string();
    wait_sacct(&s, &id, "COMPLETED");
    let text = std::fs::read_to_string(s.home.path().join(format!("root-{id}.txt"))).unwrap();
    assert!(
        text.starts_with("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ")
            && !text.contains("/root"),
        "{text:?}"
    );
}

#[test]
fn tasks_share_the_gpus_of_their_node_as_in_slurm() {
    // (Two tasks for three GPUs: this machine has two cores, a task takes one.)
    let s = SlurmSession::start(4);
    let home = s.home.path().display().to_string();
    let id = s
        .ok(
            "sbatch",
            &[
                "--parsable",
                "-n",
                "2",
                "--gres=gpu:3",
                "-o",
                &format!("{home}/share-%j-%t.out"),
                "--wrap",
                "echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $SLURM_GPUS_ON_NODE",
            ],
        )
        .trim()
        .to_string();
    wait_sacct(&s, &id, "COMPLETED");
    let mut seen = Vec::new();
    for rank in 0..2 {
        let text =
            std::fs::read_to_string(s.home.path().join(format!("share-{id}-{rank}.out"))).unwrap();
        let words: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(words[0], rank.to_string(), "{text}");
        assert_eq!(words[1].split(',').count(), 3, "{text}");
        assert_eq!(words[2], "3", "{text}");
        seen.push(words[1].to_string());
    }
    assert!(
        seen.iter().all(|g| *g == seen[0]),
        "every task sees the same GPUs: {seen:?}"
    );
    // The interactive job takes the same shape.
    let out = s.run(
        "gantry",
        &[
            "run",
            "-n",
            "3",
            "--gres=gpu:2",
            "--cpu-milli",
            "100",
            "-t",
            "1",
            "--",
            "sh",
            "-c",
            "echo $CUDA_VISIBLE_DEVICES",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(',')
            .count(),
        2
    );
}

/// Another local user's SLURM commands get no more than the API gives them: `nobody` can
/// neither requeue, cancel, hold nor signal a job of the account `daemon`, and the job runs on.
#[test]
fn another_users_job_cannot_be_requeued_cancelled_or_signalled_through_slurms_commands() {
    let s = SlurmSession::start(2);
    let id = s.d.submit(&serde_json::json!({
        "argv": ["sleep", "300"], "user": "daemon", "workdir": "/tmp",
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    s.d.wait_state(id, "running");
    let id = id.to_string();
    for (cmd, args) in [
        ("scontrol", vec!["requeue", id.as_str()]),
        ("scancel", vec![id.as_str()]),
        ("scancel", vec!["--signal", "USR1", id.as_str()]),
        ("scontrol", vec!["hold", id.as_str()]),
    ] {
        let out = s.run(cmd, &args);
        assert!(!out.status.success(), "{cmd} {args:?} was allowed");
    }
    let job = s.d.job(id.parse().unwrap());
    assert_eq!(job["state"], "running", "{job}");
    assert_eq!(job["requeues"], 0, "{job}");
}
