//! What the tests that need root share: the checks that they run as root and that the host
//! has cgroup v1 controllers (they fail, never skip, elsewhere), a directory every account
//! may write, and a cgroup parent of a test's own, removed with its task cgroups when
//! dropped.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Fails the test unless it runs as root, saying `why` it needs root.
pub fn require_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "{why} and needs root (CI runs it as root)");
}

/// The cgroup v1 controllers Gantry puts a task in.
pub const V1_CONTROLLERS: [&str; 5] = ["memory", "cpu", "cpuacct", "pids", "devices"];

/// Fails the test unless the host mounts the cgroup v1 controllers of [`V1_CONTROLLERS`]
/// under `/sys/fs/cgroup` (a v1 or hybrid host, as CI is), naming the missing ones and
/// whether the host is cgroup v2-only.
pub fn require_cgroup_v1() {
    let root = std::path::Path::new("/sys/fs/cgroup");
    let missing: Vec<&str> = V1_CONTROLLERS
        .into_iter()
        .filter(|c| !root.join(c).join("cgroup.procs").exists())
        .collect();
    let v2_only = root.join("cgroup.controllers").exists();
    assert!(
        missing.is_empty(),
        "this test needs the cgroup v1 controllers {missing:?} under /sys/fs/cgroup, which \
         this host lacks{} (CI runs it on a cgroup v1 hybrid host)",
        if v2_only {
            " (it is cgroup v2-only)"
        } else {
            ""
        }
    );
}

/// A directory everyone may enter and write (for files a job's user writes).
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("cannot create a temp dir");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777))
        .expect("cannot open the temp dir");
    dir
}

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
        // Every hierarchy: an OCI runtime also makes a container's cgroup in those Gantry
        // leaves alone (blkio, cpuset, freezer, systemd...).
        let mut hierarchies: Vec<PathBuf> = fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        hierarchies.push(PathBuf::from("/sys/fs/cgroup"));
        for h in hierarchies {
            remove_empty_tree(&h.join(&self.0));
        }
    }
}

/// Removes `dir` and the directories under it, deepest first (a cgroup directory goes only
/// once empty of processes and children).
fn remove_empty_tree(dir: &std::path::Path) {
    if !dir.is_dir() {
        return;
    }
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_empty_tree(&entry.path());
        }
    }
    let _ = fs::remove_dir(dir);
}
