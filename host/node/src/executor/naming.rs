//! The names the executor gives things and reads back: a task cgroup's name
//! (`.../job-<id>-task-<i>`, parsed by [`task_key`]), the child cgroup a container runs in
//! ([`CONTAINER_CHILD`]) and the hidden subcommand under which the daemon's binary acts as a
//! task's shim ([`SHIM_SUBCOMMAND`]). `cgroup.rs`, `container_launch.rs`, `mod.rs`,
//! `shim.rs` and `shim_args.rs` all use them; this file uses none of its siblings.
//!
//! Owns these names only. Does not own the cgroups (`cgroup.rs`) or the shim (`shim.rs`).

/// The hidden subcommand under which the daemon binary acts as the shim.
pub const SHIM_SUBCOMMAND: &str = "task-shim";

/// The child cgroup a task's OCI runtime puts its container in (`container_launch.rs`).
pub(crate) const CONTAINER_CHILD: &str = "ctr";

/// The (job id, task index) of a task cgroup's name (`.../job-<id>-task-<i>`).
pub(crate) fn task_key(name: &str) -> Option<(u64, u32)> {
    let last = name.rsplit('/').next()?;
    let (job, task) = last.strip_prefix("job-")?.split_once("-task-")?;
    Some((job.parse().ok()?, task.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_names() {
        assert_eq!(task_key("gantry/job-12-task-3"), Some((12, 3)));
        assert_eq!(task_key("a/b/job-1-task-0"), Some((1, 0)));
        assert_eq!(task_key("gantry/other"), None);
        assert_eq!(task_key("gantry/job-1-task-x"), None);
    }
}
