//! Issue 26, D12 (the last part): a job run as another user that names no `workdir` works in
//! a scratch directory under the daemon's data directory; its writes there must not fill the
//! file system that holds the daemon's state. The scratch directory is a tmpfs of
//! `execution.work_dir_mib` owned by the task's user, unmounted when the job ends
//! (`host/node/src/executor/scratch.rs`, `docs/security.md`).
//!
//! Needs root (it switches users and mounts); CI runs it as root, and anywhere else it fails
//! saying so rather than pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::root::require_root;
use serde_json::json;
use std::fs;

/// Tasks as their users, no cgroups, an 8 MiB scratch directory.
const SMALL_SCRATCH: &str =
    "[execution]\nrun_as_user = true\ncgroups = \"off\"\nwork_dir_mib = 8\n";

fn mounted_at(path: &std::path::Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = path.to_str().unwrap();
    mounts
        .lines()
        .any(|l| l.split_whitespace().nth(4) == Some(path))
}

#[test]
fn a_job_without_a_workdir_writes_into_a_bounded_scratch_tmpfs_that_goes_with_the_job() {
    require_root("this test switches users and mounts a tmpfs");
    let d = Daemon::start_with_config(1, SMALL_SCRATCH);
    let script = "pwd; stat -f -c 'fs=%T' .; stat -c 'owner=%U mode=%a' .; \
                  head -c 50000000 /dev/zero > big 2>/dev/null && echo WROTE || echo full; \
                  stat -c 'size=%s' big";
    let id = d.submit(&json!({
        "name": "filler",
        "user": "nobody",
        "argv": ["/bin/sh", "-c", script],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    d.wait_state(id, "succeeded");
    let (status, text) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("fs=tmpfs"),
        "the scratch dir is no tmpfs: {text}"
    );
    assert!(text.contains("owner=nobody mode=700"), "{text}");
    assert!(
        text.contains("full") && !text.contains("WROTE"),
        "50 MB fit in an 8 MiB scratch dir: {text}"
    );
    let size: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("size="))
        .expect("the size line")
        .trim()
        .parse()
        .unwrap();
    assert!(size <= 8 << 20, "the scratch file grew to {size} bytes");
    let work = text.lines().next().unwrap().trim().to_string();
    assert!(work.ends_with(&format!("jobs/{id}/work")), "{text}");
    // The job ended: its tmpfs is unmounted, and nothing it wrote is on the daemon's disk.
    let work = std::path::Path::new(&work);
    assert!(!mounted_at(work), "the scratch tmpfs outlived its job");
    assert_eq!(fs::read_dir(work).unwrap().count(), 0, "files left behind");

    // A job that names its workdir works there, no scratch directory.
    let own = d.submit(&json!({
        "name": "workdir-given",
        "user": "nobody",
        "workdir": "/tmp",
        "argv": ["/bin/sh", "-c", "pwd"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    d.wait_state(own, "succeeded");
    let (_, text) = d.get_text(&format!("/v1/jobs/{own}/logs"));
    assert_eq!(text.trim(), "/tmp", "a job's own workdir is used as given");
}

/// Polls (bounded) until `path` is no longer a mount point.
fn wait_unmounted(path: &std::path::Path) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if !mounted_at(path) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn a_restarted_daemon_keeps_a_running_jobs_scratch_and_releases_a_stale_one() {
    require_root("this test switches users and mounts a tmpfs");
    let mut d = Daemon::start_with_config(1, SMALL_SCRATCH);
    let id = d.submit(&json!({
        "name": "sleeper",
        "user": "nobody",
        "argv": ["/bin/sh", "-c", "echo kept > note; exec sleep 300"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    d.wait_state(id, "running");
    let data = d.out_dir().parent().unwrap().join("data");
    let work = data.join(format!("jobs/{id}/work"));
    let stale = data.join("jobs/999/work");
    // `running` is committed before the launch (which mounts the scratch) runs off the job
    // table's lock: a daemon killed in between requeues the job, rightly, since nothing ran.
    // Look, and kill, only once the task has run.
    gantry_e2e::poll_until(
        "the task's note",
        std::time::Duration::from_secs(20),
        String::new,
        || work.join("note").exists().then_some(()),
    );
    assert!(mounted_at(&work), "the running job has no scratch tmpfs");
    // A daemon killed while a task ran: the next one finds a scratch tmpfs of a job that is
    // not running (here one made by hand) beside the running job's.
    d.restart_after_sigkill_with(|data| {
        let dir = data.join("jobs/999/work");
        fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "gantry-work"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount failed");
    });
    assert!(
        wait_unmounted(&stale),
        "the stale scratch tmpfs was not released"
    );
    assert_eq!(d.job(id)["state"], "running");
    assert!(mounted_at(&work), "the adopted job lost its scratch tmpfs");
    assert_eq!(fs::read_to_string(work.join("note")).unwrap(), "kept\n");
    let (status, body) = d.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert!(status < 300, "{status} {body}");
    d.wait_state(id, "cancelled");
    assert!(
        wait_unmounted(&work),
        "the cancelled job's scratch stayed mounted"
    );
}
