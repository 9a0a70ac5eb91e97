//! Launching a started job's tasks: who they run as, their command (argv, or its script
//! written to the job directory), their working directory, one executor launch per task with
//! its GPUs, CPU and memory (the executor turns these into cgroup limits), and stopping the
//! gang when one cannot start.
//!
//! A task that runs as the job's user (daemon as root, `execution.run_as_user`) and has no
//! `workdir` of its own works in `<job dir>/work`, owned by that user; the job directory itself
//! stays the daemon's, because the daemon writes the logs, exit records and script there as
//! root and must not follow links a task could plant.
//!
//! Tasks placed on an agent's node are handed to `remote_launch.rs`; the rest start here.
//!
//! Owns: building each [`TaskLaunch`]. Does not own the task's environment (`task_env`),
//! processes (`executor`) or agents (`remote_launch`).

use super::Scheduler;
use super::apply::host_reason;
use crate::executor::{TaskExit, TaskLaunch, task_files};
use crate::model::{JobRecord, StopCause};
use gantry_contract::ReasonCode;

impl Scheduler {
    pub(crate) fn launch(&self, job: &mut JobRecord) {
        let (remote, local): (Vec<usize>, Vec<usize>) =
            (0..job.tasks.len()).partition(|&i| self.agent_of(&job.tasks[i].node).is_some());
        if !remote.is_empty() {
            self.ports_on_rank0_node(job);
        }
        if !local.is_empty() {
            self.launch_local(job, &local);
        }
        if !remote.is_empty() && job.stopping.is_none() {
            self.launch_remote(job, &remote);
        }
    }

    /// Starts tasks `indices` of `job` with the local executor.
    fn launch_local(&self, job: &mut JobRecord, indices: &[usize]) {
        let identity = match self
            .inner
            .executor
            .identity(&job.spec.user, job.spec.anonymous)
        {
            Ok(identity) => identity,
            Err(e) => return self.launch_failed(job, e.to_string()),
        };
        let dir = self.job_dir(job.id);
        let argv = match task_files::command(
            &dir,
            &job.spec.argv,
            job.spec.script.as_deref(),
            identity.as_ref(),
        ) {
            Ok(a) => a,
            Err(e) => return self.launch_failed(job, format!("cannot write the job script: {e}")),
        };
        let workdir = match (self.inner.executor).workdir(
            job.spec.workdir.as_deref(),
            &dir,
            identity.as_ref(),
        ) {
            Ok(dir) => dir,
            Err(e) => {
                let message = format!("cannot prepare the job's working directory: {e}");
                return self.launch_failed(job, message);
            }
        };
        for &i in indices {
            let task = &job.tasks[i];
            let launch = TaskLaunch {
                job_id: job.id,
                task_index: i as u32,
                argv: argv.clone(),
                env: self.task_env(job, i),
                workdir: Some(workdir.clone()),
                log_path: self.log_path(job.id, i),
                exit_path: self.exit_path(job.id, i),
                gpus: task.gpus.iter().map(|g| g.index).collect(),
                cpu_milli: task.cpu_milli,
                memory_mib: task.memory_mib,
                identity: identity.clone(),
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
        let kill = Some(std::time::Duration::ZERO);
        for i in 0..job.tasks.len() {
            let key = Self::task_key(job, i);
            let t = &mut job.tasks[i];
            if t.exit.is_some() {
                continue;
            }
            match t.pid {
                Some(pid) => {
                    let _ = self.signal_task(&t.node, key, Some(pid), libc::SIGKILL, kill);
                }
                None => t.exit = Some(TaskExit::Lost),
            }
        }
        job.reason = Some(host_reason(ReasonCode::Other, message));
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
    }
}
