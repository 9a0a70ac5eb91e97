//! Launching a started job's tasks: its command (argv, or its script written to the job
//! directory), one executor launch per task, and stopping the gang when one cannot start.
//!
//! Owns: building each [`TaskLaunch`]. Does not own the task's environment (`task_env`) or
//! processes (`executor`).

use super::Scheduler;
use super::apply::host_reason;
use crate::executor::{TaskExit, TaskLaunch};
use crate::model::{JobRecord, StopCause};
use gantry_contract::ReasonCode;
use std::path::PathBuf;

impl Scheduler {
    pub(crate) fn launch(&self, job: &mut JobRecord) {
        let argv = match self.command(job) {
            Ok(a) => a,
            Err(e) => return self.launch_failed(job, format!("cannot write the job script: {e}")),
        };
        for i in 0..job.tasks.len() {
            let launch = TaskLaunch {
                job_id: job.id,
                task_index: i as u32,
                argv: argv.clone(),
                env: self.task_env(job, i),
                workdir: Some(
                    job.spec
                        .workdir
                        .clone()
                        .map(PathBuf::from)
                        .unwrap_or_else(|| self.job_dir(job.id)),
                ),
                log_path: self.log_path(job.id, i),
                exit_path: self.exit_path(job.id, i),
            };
            match self.inner.executor.launch(&launch) {
                Ok(t) => job.tasks[i].pid = Some(t.pid),
                Err(e) => {
                    return self.launch_failed(job, format!("task {i} failed to launch: {e}"));
                }
            }
        }
    }

    pub(crate) fn launch_failed(&self, job: &mut JobRecord, message: String) {
        tracing::error!(job = job.id, "{message}");
        job.stopping = Some(StopCause::LaunchFailed);
        for t in &mut job.tasks {
            match t.pid {
                Some(pid) => self.inner.executor.kill_now(pid),
                None => t.exit = Some(TaskExit::Lost),
            }
        }
        job.reason = Some(host_reason(ReasonCode::Other, message));
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
    }

    /// argv for the job: its argv, or its script written to the job directory.
    fn command(&self, job: &JobRecord) -> std::io::Result<Vec<String>> {
        let dir = self.job_dir(job.id);
        std::fs::create_dir_all(&dir)?;
        let Some(script) = &job.spec.script else {
            return Ok(job.spec.argv.clone());
        };
        let path = dir.join("script");
        std::fs::write(&path, script)?;
        let path = path.to_string_lossy().into_owned();
        Ok(if script.starts_with("#!") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            vec![path]
        } else {
            vec!["/bin/sh".into(), path]
        })
    }
}
