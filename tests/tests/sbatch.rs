//! `gantry submit script.sh` end to end: the real CLI binary reads a batch script's
//! `#SBATCH` directives and submits to a live daemon; an `--array` becomes one job per
//! index (each sees its `GANTRY_ARRAY_INDEX`), flags on the command line override the
//! directives, directives that are not applied are reported on stderr, and a bad directive
//! is refused naming the file, line and directive.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, gantry_bin};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

/// Runs `gantry --server <daemon> <args>` in `dir` (the job's working directory), with no
/// token.
fn gantry(d: &Daemon, dir: &Path, args: &[&str]) -> Output {
    Command::new(gantry_bin())
        .current_dir(dir)
        .env_remove("GANTRY_TOKEN")
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .args(["--server", d.url()])
        .args(args)
        .output()
        .unwrap()
}

/// The job ids of `submitted job N` lines, with the index of `(array index I)` if any.
fn submitted(out: &Output) -> Vec<(u64, Option<u64>)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "gantry submit failed: {out:?}");
    stdout
        .lines()
        .map(|l| {
            let rest = l
                .strip_prefix("submitted job ")
                .unwrap_or_else(|| panic!("{l:?}"));
            let (id, index) = match rest.split_once(" (array index ") {
                Some((id, i)) => (id, Some(i.trim_end_matches(')').parse().unwrap())),
                None => (rest, None),
            };
            (id.parse().unwrap(), index)
        })
        .collect()
}

fn log(d: &Daemon, id: u64) -> String {
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs?task=0"));
    assert_eq!(status, 200, "logs of job {id}: {text}");
    text
}

#[test]
fn an_sbatch_array_script_becomes_one_job_per_index() {
    let d = Daemon::start(8);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("array.sh"),
        "#!/bin/sh\n\
         #SBATCH --gres=gpu:2 --time=00:05:00 --array=0-3\n\
         #SBATCH --mail-type=END\n\
         #SBATCH -c 1 --mem=64M\n\
         echo \"index=$GANTRY_ARRAY_INDEX gpus=$CUDA_VISIBLE_DEVICES\"\n",
    )
    .unwrap();
    let out = gantry(&d, dir.path(), &["submit", "array.sh"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("gantry: ignored #SBATCH --mail-type=END (line 3): e-mail is not supported"),
        "{stderr}"
    );
    let members = submitted(&out);
    assert_eq!(members.len(), 4, "one line per member: {out:?}");
    let mut indices = BTreeSet::new();
    for (id, printed_index) in members {
        let job = d.wait_state(id, "succeeded");
        let spec = &job["spec"];
        assert_eq!(spec["tasks"][0]["gpus"], 2, "{job}");
        assert_eq!(spec["tasks"][0]["memory_mib"], 64, "{job}");
        assert_eq!(spec["time_limit_s"], 300, "{job}");
        assert_eq!(spec["name"], "array.sh", "{job}");
        let text = log(&d, id);
        let index: u32 = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("index="))
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("no GANTRY_ARRAY_INDEX in the log of job {id}: {text:?}"));
        assert_eq!(job["array"]["index"], index, "{job}");
        assert_eq!(printed_index, Some(u64::from(index)), "{out:?}");
        let gpus = text.split("gpus=").nth(1).unwrap_or_default().trim();
        assert_eq!(gpus.split(',').count(), 2, "job {id} sees 2 GPUs: {text:?}");
        indices.insert(index);
    }
    assert_eq!(indices, BTreeSet::from([0, 1, 2, 3]));
}

#[test]
fn command_line_flags_override_directives() {
    let d = Daemon::start(4);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("train.sh"),
        "#!/bin/sh\n\
         # Directives may follow other comments and blank lines.\n\
         \n\
         #SBATCH --time=00:05:00 --gres=gpu:2 -J from-script\n\
         #SBATCH --mem=64M --cpus-per-task=1 --output=slurm-%j.out\n\
         echo \"ran in $(pwd) with $CUDA_VISIBLE_DEVICES\"\n\
         #SBATCH --gres=gpu:4\n",
    )
    .unwrap();
    let out = gantry(
        &d,
        dir.path(),
        &["submit", "train.sh", "--time", "10m", "--gpus", "1"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // --output is applied (it was reported as ignored before the output files existed).
    assert!(!stderr.contains("ignored #SBATCH --output"), "{stderr}");
    assert!(
        stderr.contains("ignored #SBATCH --gres=gpu:4 (line 7): after the first command"),
        "{stderr}"
    );
    let ids: Vec<u64> = submitted(&out).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 1);
    let job = d.wait_state(ids[0], "succeeded");
    let spec = &job["spec"];
    assert_eq!(
        spec["time_limit_s"], 600,
        "--time 10m beats --time=00:05:00"
    );
    assert_eq!(spec["tasks"][0]["gpus"], 1, "--gpus 1 beats --gres=gpu:2");
    assert_eq!(
        spec["name"], "from-script",
        "no --name: the directive holds"
    );
    assert_eq!(spec["tasks"][0]["memory_mib"], 64);
    assert_eq!(spec["output"], "slurm-%j.out");
    // The output went to the file the directive names, in the job's directory.
    let text = std::fs::read_to_string(dir.path().join(format!("slurm-{}.out", ids[0]))).unwrap();
    assert!(
        log(&d, ids[0]).contains("stdout goes to slurm-"),
        "the log says where"
    );
    let cwd = dir.path().canonicalize().unwrap();
    assert!(
        [dir.path(), cwd.as_path()]
            .iter()
            .any(|p| text.contains(&format!("ran in {} ", p.display()))),
        "the job runs where gantry submit ran: {text:?}"
    );
    assert_eq!(
        text.trim().rsplit(' ').next().unwrap().split(',').count(),
        1,
        "one GPU visible: {text:?}"
    );
}

#[test]
fn a_bad_directive_is_refused_naming_file_line_and_directive() {
    let d = Daemon::start(1);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.sh"),
        "#!/bin/sh\n#SBATCH -J ok\n#SBATCH --time=abc\necho never\n",
    )
    .unwrap();
    let out = gantry(&d, dir.path(), &["submit", "bad.sh"]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.sh:3: --time=abc: "), "{stderr}");
    let (_, jobs) = d.get("/v1/jobs");
    assert_eq!(jobs.as_array().unwrap().len(), 0, "nothing was submitted");
    // A script and a command are one too many.
    let out = gantry(&d, dir.path(), &["submit", "bad.sh", "--", "true"]);
    assert!(!out.status.success(), "{out:?}");
}
