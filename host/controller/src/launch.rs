//! Launching a started job's tasks: who they run as, their command (argv, or its script
//! written to the job directory), their working directory, one executor launch per task with
//! its GPUs, CPU and memory (the executor turns these into cgroup limits), and stopping the
//! gang when one cannot start.
//!
//! Launching runs off the job table's lock, on a copy of the job taken when its start was
//! committed: looking up the user, writing files, making cgroups and spawning shims (and the
//! agents' calls) never hold up a submit or a job query. The pids are then recorded in one
//! short step under the lock ([`Scheduler::local_launch_answered`]), which first checks that
//! the run launched is still the job's current one (a job cancelled meanwhile has its new
//! tasks stopped; one no longer running has them killed).
//!
//! A task that runs as the job's user (daemon as root, `execution.run_as_user`) and has no
//! `workdir` of its own works in `<job dir>/work`, a tmpfs owned by that user; the job
//! directory itself stays the daemon's, because the daemon writes the logs, exit records and
//! script there as root and must not follow links a task could plant.
//!
//! Tasks placed on an agent's node are handed to `remote_launch.rs`; the rest start here.
//!
//! Owns: the order of each local task (`gantry_node::executor::task_order` turns it into a
//! `TaskLaunch`, as the agent does) and recording local launches. Does not own the task's
//! environment (`task_env`), processes (`executor`) or agents (`remote_launch`).

use super::job_edit::{Annotation, JobEdit};
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, lock};
use gantry_api::model::{JobRecord, JobState, StopCause};
use gantry_contract::ReasonCode;
use gantry_node::executor::TaskInput;
use gantry_node::executor::task_order::TaskOrder;
use std::time::Duration;

/// What launching a job's local tasks did: the tasks started (index, pid), and why the
/// next one could not start, if one could not.
struct LocalLaunch {
    started: Vec<(usize, u32)>,
    failed: Option<String>,
}

impl Scheduler {
    /// Launches the tasks of `job`, a copy of a job whose start was just committed. Call
    /// without the job table's lock.
    pub(crate) fn launch(&self, mut job: JobRecord) {
        let (remote, local): (Vec<usize>, Vec<usize>) =
            (0..job.tasks.len()).partition(|&i| self.agent_of(&job.tasks[i].node).is_some());
        if !remote.is_empty() {
            self.ports_on_rank0_node(&mut job);
            if !self.record_ports(&job) {
                return;
            }
        }
        if !local.is_empty() {
            let launched = self.launch_local(&job, &local);
            if !self.local_launch_answered(&job, launched) {
                return;
            }
        }
        if !remote.is_empty() {
            self.launch_remote(&job, &remote);
        }
    }

    /// Whether the run of `copy` is still `job`'s current one: running, and each task of it
    /// in the same run and not ended.
    fn same_run(job: &JobRecord, copy: &JobRecord) -> bool {
        job.state == JobState::Running
            && job.tasks.len() == copy.tasks.len()
            && (0..job.tasks.len()).all(|i| Self::task_key(job, i) == Self::task_key(copy, i))
    }

    /// Records the ports rank 0's agent chose; whether the run is still current.
    fn record_ports(&self, copy: &JobRecord) -> bool {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(copy.id).filter(|j| Self::same_run(j, copy)) else {
            return false;
        };
        job.annotate(Annotation::Ports {
            rendezvous: copy.rendezvous_port,
            service: copy.service_port,
        });
        drop(job);
        drop(st);
        true
    }

    /// Starts tasks `indices` of `job` with the local executor, stopping at the first that
    /// cannot start.
    fn launch_local(&self, job: &JobRecord, indices: &[usize]) -> LocalLaunch {
        let mut done = LocalLaunch {
            started: Vec::new(),
            failed: None,
        };
        let executor = &self.inner.executor;
        let identity = match executor.identity(&job.spec.user, job.spec.anonymous) {
            Ok(identity) => identity,
            Err(e) => {
                done.failed = Some(e.to_string());
                return done;
            }
        };
        let dir = self.job_dir(job.id);
        let files = match executor.prepare_files(
            &dir,
            &job.spec.argv,
            job.spec.script.as_deref(),
            job.spec.workdir.as_deref(),
            identity.as_ref(),
        ) {
            Ok(files) => files,
            Err(e) => {
                done.failed = Some(e.to_string());
                return done;
            }
        };
        for &i in indices {
            let task = &job.tasks[i];
            let (stdout_file, stderr_file) = super::output_files::of_task(job, i);
            let order = TaskOrder {
                job_id: job.id,
                task_index: i as u32,
                workdir: job.spec.workdir.as_deref(),
                env: self.task_env(job, i),
                dir: &dir,
                log_path: self.log_path(job.id, i),
                exit_path: self.exit_path(job.id, i),
                gpus: task.gpus.iter().map(|g| g.index).collect(),
                cpu_milli: task.cpu_milli,
                memory_mib: task.memory_mib,
                input: if i == 0 {
                    job.spec.task_input()
                } else {
                    TaskInput::None
                },
                stdout_file: stdout_file.as_deref(),
                stderr_file: stderr_file.as_deref(),
                image: job.spec.image.as_deref(),
                mounts: &job.spec.mounts,
            };
            let launch = order.launch(&files, identity.clone());
            match executor.launch(&launch) {
                Ok(t) => done.started.push((i, t.pid)),
                Err(e) => {
                    done.failed = Some(format!("task {i} failed to launch: {e}"));
                    break;
                }
            }
        }
        done
    }

    /// Records the local launches of `copy`'s run in the job; whether the rest of the job
    /// may be launched. A run that is no longer current has its new tasks killed; a job asked
    /// to stop meanwhile has them stopped; a failed launch takes the job down its path.
    fn local_launch_answered(&self, copy: &JobRecord, launched: LocalLaunch) -> bool {
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(copy.id).filter(|j| Self::same_run(j, copy)) else {
            drop(st);
            for (i, pid) in launched.started {
                tracing::info!(
                    job = copy.id,
                    task = i,
                    pid,
                    "launched after its run ended; killing it"
                );
                self.inner.executor.kill_now(pid);
            }
            return false;
        };
        for &(task, pid) in &launched.started {
            job.apply_or_log(Transition::TaskLaunched { task, pid });
        }
        let go_on = match launched.failed {
            Some(message) => {
                self.launch_failed(&mut job, message);
                false
            }
            None => {
                if job.stopping.is_some() {
                    // A stop was asked while the launch was under way: send it now.
                    let grace = Duration::from_secs(self.inner.config.kill_grace_s);
                    self.stop_tasks(&job, grace);
                }
                true
            }
        };
        drop(job);
        drop(st);
        go_on
    }

    pub(crate) fn launch_failed(&self, job: &mut JobEdit<'_>, message: String) {
        tracing::error!(job = job.id, "{message}");
        job.apply_or_log(Transition::StopRequested(StopCause::LaunchFailed));
        let kill = Some(std::time::Duration::ZERO);
        for task in 0..job.tasks.len() {
            let key = Self::task_key(job, task);
            let t = &job.tasks[task];
            if t.exit.is_some() {
                continue;
            }
            match t.pid {
                Some(pid) => {
                    let _ = self.signal_task(&t.node, key, Some(pid), libc::SIGKILL, kill);
                }
                None => {
                    job.apply_or_log(Transition::task_lost(task));
                }
            }
        }
        job.annotate(Annotation::Reason(host_reason(ReasonCode::Other, message)));
        if job.tasks.iter().all(|t| t.exit.is_some()) {
            self.finish(job);
        }
    }
}
