//! What the tests that need root share: the check that they run as root (they fail, never
//! skip, elsewhere), a directory every account may write, and a cgroup parent of a test's
//! own, removed with its task cgroups when dropped.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Fails the test unless it runs as root, saying `why` it needs root.
pub fn require_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "{why} and needs root (CI runs it as root)");
}

/// A directory everyone may enter and write (for files a job's user writes).
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("cannot create a temp dir");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777))
        .expect("cannot open the temp dir");
    dir
}

/// The cgroup v1 controllers a task cgroup lives in, and "" for the v2 hierarchy.
const HIERARCHIES: [&str; 6] = ["memory", "cpu", "cpuacct", "pids", "devices", ""];

/// A cgroup parent of the test's own (`execution.cgroup_parent`), removed with its task
/// cgroups when dropped.
pub struct CgroupParent(pub String);

impl CgroupParent {
    /// A parent named `<prefix>-<pid>`.
    pub fn new(prefix: &str) -> Self {
        Self(format!("{prefix}-{}", std::process::id()))
    }
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        for c in HIERARCHIES {
            let parent = PathBuf::from(format!("/sys/fs/cgroup/{c}/{}", self.0));
            for entry in fs::read_dir(&parent).into_iter().flatten().flatten() {
                if entry.path().is_dir() {
                    let _ = fs::remove_dir(entry.path());
                }
            }
            let _ = fs::remove_dir(&parent);
        }
    }
}
