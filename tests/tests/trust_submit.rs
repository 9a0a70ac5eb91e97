//! What one submission may ask for (issue 16, items 6 and 7), end to end against a real
//! daemon on 127.0.0.1: a user may not raise its own tier above its queue's
//! `limits.max_user_tier` (with a token, without one, or through `gantry submit --tier` on
//! an `#SBATCH` script) while an operator may; `max_requeues` is bounded; an array that
//! would copy a large spec into thousands of members is refused quickly without the
//! daemon's memory growing; an env entry `execve` would refuse (over 128 KiB) or an invalid
//! env name is refused at submit naming it; a user's pending jobs are bounded; a task's log
//! stops at `limits.max_log_mib` with a line saying so; a launch on a full disk fails with a
//! reason naming it (a tiny tmpfs: needs root, as in CI; the test fails without it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::{Daemon, gantry_bin, token_into};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A daemon with `limits` as its `[limits]` table and two tokens: alice (user) and olga
/// (operator); returns the daemon and their tokens.
fn with_tokens(gpus: u32, limits: &str) -> (Daemon, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    let alice = token_into(&file, "alice", "ml", "user");
    let olga = token_into(&file, "olga", "infra", "operator");
    let tokens = std::fs::read_to_string(&file).unwrap();
    let d = Daemon::start_with_config(gpus, &format!("{tokens}\n[limits]\n{limits}\n"));
    (d, alice, olga)
}

/// Asserts a refusal with `status` whose JSON error names `field`.
fn refused(answer: &(u16, Value), status: u16, field: &str) {
    let (got, body) = answer;
    assert_eq!(*got, status, "{body}");
    assert_eq!(body["error"]["field"], field, "{body}");
}

fn quick(d: &Daemon) -> Value {
    d.shell_job("quick", 1, 0, "true")
}

#[test]
fn a_user_may_not_raise_its_tier_and_an_operator_may() {
    let (d, alice, olga) = with_tokens(1, "max_user_tier = {\"*\" = 0, urgent = 5}");
    let mut spec = quick(&d);
    spec["tier"] = json!(2_147_483_647);
    let answer = d.post_as(&alice, "/v1/jobs", &spec);
    refused(&answer, 403, "tier");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_user_tier"), "{message}");
    // An operator may set any tier; the job keeps it.
    let id = d.submit_as(&olga, &spec);
    let (status, job) = d.get_as(&olga, &format!("/v1/jobs/{id}"));
    assert_eq!(
        (status, &job["spec"]["tier"]),
        (200, &json!(2_147_483_647)),
        "{job}"
    );
    // A queue's own limit: up to 5 in `urgent`, not 6; other queues get "*".
    spec["queue"] = json!("urgent");
    spec["tier"] = json!(5);
    d.submit_as(&alice, &spec);
    spec["tier"] = json!(6);
    refused(&d.post_as(&alice, "/v1/jobs", &spec), 403, "tier");
    spec["queue"] = json!("default");
    spec["tier"] = json!(1);
    refused(&d.post_as(&alice, "/v1/jobs", &spec), 403, "tier");
    // Lowering one's own priority is always allowed.
    spec["tier"] = json!(-3);
    d.submit_as(&alice, &spec);
}

#[test]
fn without_a_token_a_request_is_a_user_for_the_tier_rule() {
    // The default role of a caller without identity (the harness otherwise trusts it).
    let d = Daemon::start_with_config(1, "[auth]\nanonymous_role = \"user\"\n");
    let mut spec = quick(&d);
    spec["tier"] = json!(2_147_483_647);
    spec["user"] = json!("root");
    refused(&d.post("/v1/jobs", &spec), 403, "tier");
    spec["tier"] = json!(0);
    d.submit(&spec);
    let (_, jobs) = d.get("/v1/jobs");
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
}

#[test]
fn gantry_submit_tier_on_an_sbatch_array_is_refused_for_a_user() {
    let (d, alice, _) = with_tokens(1, "");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sweep.sh"),
        "#!/bin/sh\n#SBATCH --array=0-3 -c 1 --mem=64M\ntrue\n",
    )
    .unwrap();
    let out = Command::new(gantry_bin())
        .current_dir(dir.path())
        .env("GANTRY_TOKEN", &alice)
        .env("HOME", dir.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["--server", d.url(), "submit", "--tier", "9", "sweep.sh"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("tier"), "{stderr}");
    let (_, jobs) = d.get_as(&alice, "/v1/jobs");
    assert_eq!(
        jobs.as_array().unwrap().len(),
        0,
        "no member was submitted: {jobs}"
    );
}

#[test]
fn max_requeues_over_the_bound_is_refused_naming_it() {
    let d = Daemon::start(1);
    let mut spec = quick(&d);
    for n in [4_000_000_000u64, 1001] {
        spec["max_requeues"] = json!(n);
        refused(&d.post("/v1/jobs", &spec), 400, "max_requeues");
    }
    spec["max_requeues"] = json!(1000);
    d.submit(&spec);
}

/// The daemon's resident memory, KiB.
fn rss_kib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

#[test]
fn a_large_array_is_refused_quickly_and_memory_does_not_jump() {
    let d = Daemon::start(1);
    let before = rss_kib(&d);
    // 200 KB of env in 100 variables (each one fine for execve), 2,000 members: 400 MB.
    let mut spec = quick(&d);
    for i in 0..100 {
        spec["env"][format!("PAD{i}")] = json!("x".repeat(2000));
    }
    spec["array"] = json!({"indices": (0..2000).collect::<Vec<u32>>()});
    let t = Instant::now();
    let answer = d.post("/v1/jobs", &spec);
    let took = t.elapsed();
    refused(&answer, 413, "array");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_submission_bytes"), "{message}");
    // One value over what execve takes, in the same array: refused naming it.
    spec["env"]["BIG"] = json!("x".repeat(200_000));
    refused(&d.post("/v1/jobs", &spec), 400, "env.BIG");
    assert!(took < Duration::from_secs(5), "refused after {took:?}");
    let after = rss_kib(&d);
    assert!(
        after.saturating_sub(before) < 200 * 1024,
        "the daemon grew from {before} KiB to {after} KiB"
    );
    let (_, jobs) = d.get("/v1/jobs");
    assert_eq!(
        jobs.as_array().unwrap().len(),
        0,
        "nothing was stored: {jobs}"
    );
    // The same spec as a small array fits.
    spec["env"].as_object_mut().unwrap().remove("BIG");
    spec["array"] = json!({"indices": [0, 1]});
    d.submit(&spec);
}

#[test]
fn env_entries_execve_would_refuse_and_bad_names_are_refused_naming_them() {
    let d = Daemon::start(1);
    let cases = [
        (json!({"NAME": "v".repeat(130 * 1024)}), "env.NAME"),
        (json!({"": "v"}), "env."),
        (json!({"A=B": "v"}), "env.A=B"),
        (json!({"A\u{0}B": "v"}), "env.A\u{0}B"),
    ];
    for (env, field) in cases {
        let mut spec = quick(&d);
        spec["env"] = env;
        refused(&d.post("/v1/jobs", &spec), 400, field);
    }
    let mut spec = quick(&d);
    spec["argv"] = json!(["/bin/echo", "a".repeat(130 * 1024)]);
    refused(&d.post("/v1/jobs", &spec), 400, "argv[1]");
    // Just under the limit: accepted, and it runs.
    spec["argv"] = json!(["/bin/sh", "-c", "exit 0", "a".repeat(100 * 1024)]);
    spec["env"] = json!({"NAME": "v".repeat(120 * 1024)});
    let id = d.submit(&spec);
    d.wait_state(id, "succeeded");
}

#[test]
fn a_users_pending_jobs_are_bounded() {
    let d = Daemon::start_with_config(1, "[limits]\nmax_pending_per_user = 3\n");
    let as_user = |user: &str| {
        let mut spec = d.shell_job("waits", 1, 1, "sleep 60");
        spec["user"] = json!(user);
        spec
    };
    let mut holder = d.blocking_job("holder", 1, 1);
    holder["user"] = json!("alice");
    let holder = d.submit(&holder);
    d.wait_state(holder, "running");
    let pending: Vec<u64> = (0..3).map(|_| d.submit(&as_user("alice"))).collect();
    let answer = d.post("/v1/jobs", &as_user("alice"));
    refused(&answer, 429, "user");
    let message = answer.1["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_pending_per_user"), "{message}");
    // An array counts every member.
    let mut array = as_user("bob");
    array["array"] = json!({"indices": [0, 1, 2, 3]});
    refused(&d.post("/v1/jobs", &array), 429, "user");
    // Another user is not held back; one pending job fewer lets alice submit again.
    d.submit(&as_user("bob"));
    let (status, body) = d.delete(&format!("/v1/jobs/{}", pending[0]));
    assert_eq!(status, 200, "{body}");
    d.submit(&as_user("alice"));
    d.release(holder);
}

#[test]
fn racing_submissions_of_one_user_cannot_pass_the_pending_limit_together() {
    let d = Daemon::start_with_config(1, "[limits]\nmax_pending_per_user = 4\n");
    let holder = d.submit(&d.blocking_job("holder", 1, 1));
    d.wait_state(holder, "running");
    let mut spec = d.shell_job("waits", 1, 1, "sleep 60");
    spec["user"] = json!("carol");
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| d.post("/v1/jobs", &spec).0))
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let accepted = answers.iter().filter(|s| (200..300).contains(*s)).count();
    let refused = answers.iter().filter(|s| **s == 429).count();
    assert_eq!((accepted, refused), (4, 12), "{answers:?}");
    d.release(holder);
}

#[test]
fn a_tasks_log_is_cut_at_its_limit_with_a_line_saying_so() {
    let d = Daemon::start_with_config(1, "[limits]\nmax_log_mib = 1\n");
    // 3 MB of output, then more after the cut: the task runs to its end, its log stops at 1 MiB.
    let spec = d.shell_job(
        "chatty",
        1,
        0,
        "head -c 3000000 /dev/zero | tr '\\0' y; echo; echo after-the-cut; exit 0",
    );
    let id = d.submit(&spec);
    d.wait_state(id, "succeeded");
    let (status, log) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{log}");
    let cut = "\ngantry: log cut at 1 MiB (limits.max_log_mib); further output discarded\n";
    assert!(
        log.ends_with(cut),
        "{}",
        &log[log.len().saturating_sub(300)..]
    );
    assert_eq!(log.len(), (1 << 20) + cut.len());
    assert!(!log.contains("after-the-cut"));
}

/// A tmpfs mounted at a directory until dropped (then lazily unmounted, so a daemon that
/// still holds a file there does not keep it mounted).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(
            root,
            "needs root to mount a tmpfs (CI runs the e2e tests as root)"
        );
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0711"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "mount -t tmpfs on {} failed",
            dir.display()
        );
        Self(dir.to_path_buf())
    }

    /// Writes a file until the tmpfs is full.
    fn fill(&self) {
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_launch_on_a_full_disk_fails_with_a_reason_naming_it() {
    let d = Daemon::start(1);
    // The jobs' directories (env file, script, logs, exit records) on a full 64 KiB disk.
    let jobs = d.out_dir().parent().unwrap().join("data/jobs");
    let disk = Tmpfs::mount(&jobs, "64k");
    disk.fill();
    let mut spec = quick(&d);
    spec["max_requeues"] = json!(0);
    let id = d.submit(&spec);
    let job = d.wait_state(id, "failed");
    assert_eq!(job["end_reason"], "launch-failed", "{job}");
    let message = job["reason"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("No space left on device"), "{job}");
}
