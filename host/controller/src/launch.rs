//! Launching a started job's tasks, on whichever node each runs: one [`LaunchRequest`] per
//! task (who it runs as, its command, environment, GPUs, CPU, memory, input, image), handed
//! to its node's runner (`runner.rs`) in rank order, node by node; and applying the runners'
//! answers: the pid of each task, or the launch-failed path, which stops the tasks already
//! started and requeues the job (or fails it) with the reason. All or nothing for a gang.
//!
//! Launching runs off the job table's lock, on a copy of the job taken when its start was
//! committed: looking up the user, writing files, making cgroups, spawning shims and the
//! agents' calls never hold up a submit or a job query. Each answer is then recorded in one
//! short step under the lock ([`Scheduler::launch_answered`]), which first checks that the
//! run launched is still the job's current one (a job cancelled meanwhile has its new tasks
//! stopped; one no longer running has them killed).
//!
//! A task that runs as the job's user (daemon as root, `execution.run_as_user`) and has no
//! `workdir` of its own works in `<job dir>/work`, a tmpfs owned by that user; the job
//! directory itself stays the daemon's, because the daemon writes the logs, exit records and
//! script there as root and must not follow links a task could plant.
//!
//! Owns: the requests and what their answers mean for the job. Does not own the task's
//! environment (`task_env`), how a node starts it (`runner_local.rs`, `runner_agent.rs`)
//! nor processes (`gantry_node::executor`).

use super::job_edit::{Annotation, JobEdit};
use super::runner::{Answered, Runner};
use super::transition::Transition;
use super::transition::host_reason;
use super::{Scheduler, lock};
use gantry_api::cluster::{LaunchRequest, PROTOCOL_VERSION};
use gantry_api::model::{JobRecord, JobState, StopCause};
use gantry_api::task::TaskInput;
use gantry_contract::ReasonCode;
use std::sync::Arc;
use std::time::Duration;

impl Scheduler {
    /// Launches the tasks of `job`, a copy of a job whose start was just committed. Call
    /// without the job table's lock.
    pub(crate) fn launch(&self, mut job: JobRecord) {
        // Each node's tasks in rank order, the nodes in the order of their first task.
        let mut nodes: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, t) in job.tasks.iter().enumerate() {
            match nodes.iter_mut().find(|(node, _)| *node == t.node) {
                Some((_, tasks)) => tasks.push(i),
                None => nodes.push((&t.node, vec![i])),
            }
        }
        let runners: Vec<_> = nodes
            .into_iter()
            .map(|(node, tasks)| (node.to_string(), self.runner_of(node), tasks))
            .collect();
        if let Some((_, Some(rank0), _)) = runners.first()
            && rank0.choose_ports(&mut job)
            && !self.record_ports(&job)
        {
            return;
        }
        for (node, runner, tasks) in runners {
            let requests: Vec<LaunchRequest> = tasks
                .iter()
                .map(|&i| self.launch_request(&job, i))
                .collect();
            let Some(runner) = runner else {
                let key = requests[0].key;
                let message = format!("task {} failed to launch: no node {node}", key.task);
                self.launch_answered(Answered {
                    key,
                    result: Some(Err(message)),
                    durable_first: false,
                });
                return;
            };
            self.send_launches(runner.as_ref(), requests);
            if !self.launch_goes_on(&job) {
                return;
            }
        }
    }

    /// Sends task `i` of `job` (a copy) to its node again: the node does not know the run
    /// (an agent restarted before the launch reached it). The launch is idempotent.
    pub(crate) fn launch_again(&self, job: &JobRecord, i: usize) {
        if let Some(runner) = self.runner_of(&job.tasks[i].node) {
            self.send_launches(runner.as_ref(), vec![self.launch_request(job, i)]);
        }
    }

    /// Hands `requests` to `runner`, counting them in flight until each is answered.
    fn send_launches(&self, runner: &dyn Runner, requests: Vec<LaunchRequest>) {
        {
            let mut in_flight = lock(&self.inner.remote_runs);
            for request in &requests {
                in_flight.launch_sent(request.key);
            }
        }
        let me = self.clone();
        runner.launch(
            requests,
            Arc::new(move |answered: Answered| {
                lock(&me.inner.remote_runs).launch_answered(&answered.key);
                me.launch_answered(answered)
            }),
        );
    }

    /// The request that starts task `i` of `job` (a copy of the started job).
    fn launch_request(&self, job: &JobRecord, i: usize) -> LaunchRequest {
        let t = &job.tasks[i];
        let (stdout_file, stderr_file) = super::output_files::of_task(job, i);
        LaunchRequest {
            protocol: PROTOCOL_VERSION,
            key: Self::task_key(job, i),
            argv: job.spec.argv.clone(),
            script: job.spec.script.clone(),
            env: self.task_env(job, i),
            workdir: job.spec.workdir.clone(),
            // The device fence follows what the task sees (`share_node_gpus`: the node's set).
            gpus: super::task_env::visible_gpu_indices(job, i),
            cpu_milli: t.cpu_milli,
            memory_mib: t.memory_mib,
            user: job.spec.user.clone(),
            anonymous: job.spec.anonymous,
            input: if i == 0 {
                job.spec.task_input()
            } else {
                TaskInput::None
            },
            stdout_file,
            stderr_file,
            image: job.spec.image.clone(),
            mounts: job.spec.mounts.clone(),
        }
    }

    /// Whether the run of `copy` is still `job`'s current one: running, and each task of it
    /// in the same run and not ended.
    fn same_run(job: &JobRecord, copy: &JobRecord) -> bool {
        job.state == JobState::Running
            && job.tasks.len() == copy.tasks.len()
            && (0..job.tasks.len()).all(|i| Self::task_key(job, i) == Self::task_key(copy, i))
    }

    /// Whether the rest of `copy`'s tasks may be launched: its run is current and its launch
    /// has not failed (a stop asked meanwhile reaches each task once it is launched).
    fn launch_goes_on(&self, copy: &JobRecord) -> bool {
        let st = lock(&self.inner.state);
        st.jobs
            .get(copy.id)
            .is_some_and(|j| Self::same_run(j, copy) && j.stopping != Some(StopCause::LaunchFailed))
    }

    /// Records the ports rank 0's node chose; whether the run is still current.
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

    /// Applies a launch answer: records the pid, or fails the gang's launch; whether the
    /// run is still wanted.
    fn launch_answered(&self, answered: Answered) -> bool {
        let Answered {
            key,
            result,
            durable_first,
        } = answered;
        let Some(result) = result else {
            return false;
        };
        let mut st = lock(&self.inner.state);
        let Some(mut job) = st.jobs.edit(key.job) else {
            return false;
        };
        let task = key.task as usize;
        let current = job.state == JobState::Running
            && Self::task_key(&job, task) == key
            && job.tasks[task].exit.is_none();
        let node = job.tasks.get(task).map(|t| t.node.clone());
        if !current {
            // Requeued, ended or stopped meanwhile: a task that did start is not wanted.
            drop(job);
            drop(st);
            if let (Ok(reply), Some(node)) = (&result, node) {
                tracing::info!(task = %key, pid = reply.pid, "launched after its run ended; killing it");
                let kill = Some(Duration::ZERO);
                if let Err(e) = self.signal_task(&node, key, Some(reply.pid), libc::SIGKILL, kill) {
                    tracing::warn!(task = %key, error = %e, "cannot kill a task launched too late");
                }
            }
            return false;
        }
        match result {
            Ok(reply) => {
                job.apply_or_log(Transition::TaskLaunched {
                    task,
                    pid: reply.pid,
                });
                if reply.replayed {
                    tracing::info!(task = %key, pid = reply.pid, "the node already had this launch");
                }
                let stopping = job.stopping.is_some();
                // Written before the lock goes (the edit's drop): no older snapshot of this
                // job, written by another thread after it, can replace this one in the store.
                drop(job);
                drop(st);
                if durable_first {
                    self.flush();
                }
                if let (true, Some(node)) = (stopping, &node) {
                    // A stop was asked while the launch was under way: send it now.
                    let grace = Duration::from_secs(self.inner.config.kill_grace_s);
                    let stop = Some(grace);
                    if let Err(e) =
                        self.signal_task(node, key, Some(reply.pid), libc::SIGTERM, stop)
                    {
                        tracing::warn!(task = %key, error = %e, "cannot stop a task");
                    }
                }
                if let (Some(ended), Some(node)) = (reply.ended, &node) {
                    self.remote_task_ended(node, ended);
                }
                true
            }
            Err(message) => {
                self.launch_failed(&mut job, message);
                drop(job);
                drop(st);
                if durable_first {
                    self.flush();
                }
                self.wake();
                false
            }
        }
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
