//! Issue 46, item 6: a daemon whose data directory lies under a directory other users may
//! not enter (a 0700 `mktemp -d`, a private home) cannot start any task of another user: the
//! user cannot reach the task's working directory under the data directory. The daemon says
//! so at start, naming the directory that blocks (`Executor::warn_if_tasks_cannot_reach`),
//! and the task's start error names it too (`executor::task_files::unreachable`), where it
//! said only `cannot start `true`: Permission denied`.
//!
//! Needs root (tasks switch users); CI runs it as root, and anywhere else it fails saying so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gantry_e2e::Daemon;
use gantry_e2e::root::require_root;
use serde_json::json;
use std::fs;
use std::os::unix::fs::PermissionsExt;

#[test]
fn a_data_dir_under_a_private_directory_is_named_at_start_and_in_the_task_error() {
    require_root("this test runs a task as nobody");
    let mut d =
        Daemon::start_with_config(1, "[execution]\nrun_as_user = true\ncgroups = \"off\"\n");
    // The daemon's directory (above its data directory) opened to all: no warning.
    let warning = "other users cannot enter the data directory";
    let mut top = None;
    d.restart_after_sigkill_with(|data| {
        let parent = data.parent().unwrap().to_path_buf();
        fs::set_permissions(&parent, fs::Permissions::from_mode(0o755)).unwrap();
        top = Some(parent);
    });
    let top = top.unwrap();
    let ok = d.submit(&json!({
        "name": "reaches", "user": "nobody", "argv": ["true"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    d.wait_state(ok, "succeeded");
    assert!(d.log_lines(warning).is_empty(), "{}", d.log_tail());

    // Closed (0700, as `mktemp -d` makes it): said at start, naming the directory.
    d.restart_after_sigkill_with(|_| {
        fs::set_permissions(&top, fs::Permissions::from_mode(0o700)).unwrap();
    });
    let said = d.wait_for("the warning at start", gantry_e2e::WAIT, || {
        d.log_lines(warning).into_iter().next()
    });
    let blocks = format!("{} is mode 0700, owned by uid 0", top.display());
    assert!(said.contains(&blocks), "{said}");

    // A task of another user fails to start, and its log says which directory stopped it.
    let id = d.submit(&json!({
        "name": "stopped", "user": "nobody", "argv": ["true"],
        "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 100, "memory_mib": 64}],
    }));
    let job = d.wait_state(id, "failed");
    assert_eq!(job["exit_code"], 127, "{job}");
    let (status, log) = d.get_text(&format!("/v1/jobs/{id}/logs"));
    assert_eq!(status, 200, "{log}");
    assert!(
        log.contains("cannot start `true`: Permission denied")
            && log.contains("uid 65534 cannot reach its working directory")
            && log.contains(&blocks)
            && log.contains(
                "the daemon's data directory must be under directories every user may enter"
            ),
        "{log}"
    );
}
