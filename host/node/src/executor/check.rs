//! A service's check command, run exactly as the service's tasks run: as the job's user, inside
//! the cgroup of the task it checks (so its limits and GPU fencing apply and it cannot outlive
//! the task's cgroup), with the environment a task gets (`environment.rs`: never the daemon's
//! own, never its tokens), in the working directory entered as that user, in a process group
//! of its own so that a check that runs too long is killed whole.
//!
//! Owns: preparing that command. Does not own when checks run or what their result means
//! (`scheduler::service`), nor waiting for it (`scheduler::service::probe`).

use std::path::Path;
use std::process::Stdio;

use super::cgroup::{self, TaskCgroup};
use super::child::{ChildSetup, Ids};
use super::{Executor, TaskIdentity, environment};

/// Why a check command cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The command is empty.
    #[error("the check command is empty")]
    Empty,
    /// The job's user may not run anything here.
    #[error("cannot run the check as the job's user: {0}")]
    Identity(#[from] super::IdentityError),
    /// A path or variable cannot be handed to the kernel.
    #[error("cannot prepare the check: {0}")]
    Prepare(#[from] std::io::Error),
}

impl Executor {
    /// The check command `argv` of the service task (`job_id`, `task_index`) whose job's user
    /// is `user` (`anonymous`: see [`Executor::identity`]), with `env` (the job's variables) and working directory `workdir`, ready to
    /// spawn: stdin and stdout closed, stderr piped (its last line is the check's error), in a
    /// new process group, killed when dropped.
    pub fn check_command(
        &self,
        argv: &[String],
        (user, anonymous): (&str, bool),
        (job_id, task_index): (u64, u32),
        env: &[(String, String)],
        workdir: &Path,
    ) -> Result<tokio::process::Command, CheckError> {
        let (program, args) = argv.split_first().ok_or(CheckError::Empty)?;
        let identity: Option<TaskIdentity> = self.identity(user, anonymous)?;
        let procs = match self.isolation.cgroups() {
            Some(version) => {
                let name = cgroup::task_name(self.isolation.parent(), job_id, task_index);
                TaskCgroup::open(version, &name).procs_files()
            }
            None => Vec::new(),
        };
        let ids = identity.as_ref().map(|i| Ids {
            uid: i.uid,
            gid: i.gid,
            groups: i.groups.clone(),
        });
        let workdir = (!workdir.as_os_str().is_empty()).then_some(workdir);
        let setup = ChildSetup::new(&procs, ids.as_ref(), workdir)?;
        let env = environment::task_env(identity.as_ref(), self.isolation.env_passthrough(), env);
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A session of its own (no controlling terminal, its own process group) and no
        // descriptor above 2, then the user switch.
        // SAFETY: `apply` and `new_session_for_child` make only async-signal-safe calls on
        // data prepared before the fork (see child.rs, process_hygiene.rs).
        unsafe {
            cmd.pre_exec(move || {
                crate::process_hygiene::new_session_for_child()?;
                setup.apply()
            });
        }
        Ok(cmd)
    }
}
