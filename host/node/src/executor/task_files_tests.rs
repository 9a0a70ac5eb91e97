//! Tests of `task_files.rs`: which directory on the way stops a user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn the_first_directory_closed_to_a_user_is_found_from_the_top() {
    // <root 0755>/private 0700/data 0711/jobs 0755, like a data dir in a 0700 `mktemp -d`.
    let root = tempfile::tempdir().unwrap();
    chmod(root.path(), 0o755);
    let private = root.path().join("private");
    let jobs = private.join("data/jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    chmod(&private, 0o700);
    chmod(&private.join("data"), 0o711);
    chmod(&jobs, 0o755);
    let owner = std::fs::metadata(&private).unwrap().uid();

    let blocked = blocking_ancestor(&jobs, Searcher::OTHERS).expect("the 0700 directory");
    assert_eq!(
        blocked,
        Blocked {
            path: private.clone(),
            mode: 0o700,
            owner
        }
    );
    assert_eq!(
        blocked.to_string(),
        format!("{} is mode 0700, owned by uid {owner}", private.display())
    );
    // Its owner and root pass; so does a member of its group once the group may search.
    let as_owner = Searcher {
        uid: owner,
        gid: 4242,
        groups: &[],
    };
    assert_eq!(blocking_ancestor(&jobs, as_owner), None);
    let root_user = Searcher {
        uid: 0,
        gid: 0,
        groups: &[],
    };
    assert_eq!(blocking_ancestor(&jobs, root_user), None);
    chmod(&private, 0o710);
    let gid = std::fs::metadata(&private).unwrap().gid();
    let member = Searcher {
        uid: 4242,
        gid: 4242,
        groups: &[gid],
    };
    assert_eq!(blocking_ancestor(&jobs, member), None);
    assert!(blocking_ancestor(&jobs, Searcher::OTHERS).is_some());
    // Opened to all: nothing stops anyone; a missing tail says nothing.
    chmod(&private, 0o711);
    assert_eq!(blocking_ancestor(&jobs, Searcher::OTHERS), None);
    assert_eq!(
        blocking_ancestor(&jobs.join("no/such"), Searcher::OTHERS),
        None
    );
}

#[test]
fn a_start_error_names_the_closed_directory_and_whose_setup_it_is() {
    let root = tempfile::tempdir().unwrap();
    chmod(root.path(), 0o755);
    let private = root.path().join("private");
    let work = private.join("data/jobs/7/work");
    std::fs::create_dir_all(&work).unwrap();
    chmod(&private, 0o700);
    let log = private.join("data/jobs/7/task-0.log");
    let nobody = Searcher {
        uid: 65534,
        gid: 65534,
        groups: &[],
    };
    let text = unreachable(nobody, Some(&work), "true", &log);
    assert!(
        text.starts_with(&format!(
            "; uid 65534 cannot reach its working directory {}: {} is mode 0700",
            work.display(),
            private.display()
        )) && text
            .contains("the daemon's data directory must be under directories every user may enter"),
        "{text}"
    );
    // A job's own directory closed to its user: named, without blaming the daemon.
    let own = root.path().join("own");
    std::fs::create_dir(&own).unwrap();
    chmod(&own, 0o700);
    let text = unreachable(nobody, None, &own.join("run.sh").to_string_lossy(), &log);
    assert!(
        text.contains(&format!(
            "cannot reach its command's directory {}",
            own.display()
        )) && !text.contains("daemon"),
        "{text}"
    );
    // Nothing closed: nothing said.
    chmod(&private, 0o755);
    assert_eq!(unreachable(nobody, Some(&work), "true", &log), "");
}
