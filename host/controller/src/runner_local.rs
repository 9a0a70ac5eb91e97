//! The runner of the controller's own node: its tasks start through the local executor, by
//! the very code the agent uses (`gantry_node::executor::task_order`: the run's files once,
//! then one [`TaskOrder`] per request), in the job's directory (`job_paths.rs`). A launch
//! runs on the caller's thread and answers each task at once; it stops at the first task
//! that cannot start, or when the answer says the run is no longer wanted.
//!
//! Owns: that path and signals, input, recovery after a restart and pull progress of local
//! tasks. Does not own what
//! the answers mean (`launch.rs`) nor the processes (`gantry_node::executor`).

use super::job_paths::JobPaths;
use super::runner::{Answered, InputRefused, OnAnswer, Recovered, Runner};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::{LaunchReply, LaunchRequest, TaskKey};
use gantry_api::model::job_options::SignalScope;
use gantry_node::container::pull_progress::{self, PullProgress};
use gantry_node::executor::task_order::TaskOrder;
use gantry_node::executor::{Executor, InputError, task_input};
use std::time::Duration;

/// The controller's own node.
#[derive(Debug, Clone)]
pub(crate) struct LocalRunner {
    executor: Executor,
    paths: JobPaths,
}

impl LocalRunner {
    pub(crate) fn new(executor: Executor, paths: JobPaths) -> Self {
        Self { executor, paths }
    }

    /// Answers `requests`: the first with `error` (if any), the rest as not tried.
    fn answer_rest(answer: &OnAnswer, requests: &[LaunchRequest], error: Option<String>) {
        let mut error = error;
        for request in requests {
            answer(Answered {
                key: request.key,
                result: error.take().map(Err),
                durable_first: false,
            });
        }
    }
}

impl Runner for LocalRunner {
    fn launch(&self, requests: Vec<LaunchRequest>, answer: OnAnswer) {
        let Some(first) = requests.first() else {
            return;
        };
        let executor = &self.executor;
        let identity = match executor.identity(&first.user, first.anonymous) {
            Ok(identity) => identity,
            Err(e) => return Self::answer_rest(&answer, &requests, Some(e.to_string())),
        };
        // One directory for the job's local tasks: their files are made once.
        let dir = self.paths.job_dir(first.key.job);
        let files = match executor.prepare_files(
            &dir,
            &first.argv,
            first.script.as_deref(),
            first.workdir.as_deref(),
            identity.as_ref(),
        ) {
            Ok(files) => files,
            Err(e) => return Self::answer_rest(&answer, &requests, Some(e.to_string())),
        };
        for (i, request) in requests.iter().enumerate() {
            let (job, task) = (request.key.job, request.key.task as usize);
            let order = TaskOrder::of_request(
                request,
                &dir,
                self.paths.log_path(job, task),
                self.paths.exit_path(job, task),
            );
            let launched = executor.launch(&order.launch(&files, identity.clone()));
            let (result, go_on) = match launched {
                Ok(t) => (
                    Ok(LaunchReply {
                        pid: t.pid,
                        replayed: false,
                        ended: None,
                    }),
                    true,
                ),
                Err(e) => (Err(format!("task {task} failed to launch: {e}")), false),
            };
            let wanted = answer(Answered {
                key: request.key,
                result: Some(result),
                durable_first: false,
            });
            if !(go_on && wanted) {
                return Self::answer_rest(&answer, &requests[i + 1..], None);
            }
        }
    }

    fn signal(
        &self,
        _key: TaskKey,
        pid: Option<u32>,
        signal: i32,
        grace: Option<Duration>,
        scope: SignalScope,
    ) -> std::io::Result<bool> {
        let Some(pid) = pid else {
            return Ok(false);
        };
        match grace {
            Some(grace) if signal == libc::SIGKILL && grace.is_zero() => {
                self.executor.kill_now(pid)
            }
            Some(grace) => self.executor.terminate_with(pid, signal, grace),
            None => self.executor.signal_scoped(pid, signal, scope)?,
        }
        Ok(true)
    }

    fn input(
        &self,
        key: TaskKey,
        data: &[u8],
        resize: Option<(u16, u16)>,
        eof: bool,
    ) -> Result<usize, InputRefused> {
        let exit = self.paths.exit_path(key.job, key.task as usize);
        task_input::deliver(&task_input::fifo_path(&exit), data, resize, eof).map_err(|e| match e {
            InputError::NotOpen => InputRefused::NotOpen,
            e => InputRefused::Failed(e.to_string()),
        })
    }

    fn recover(&self, key: TaskKey, pid: Option<u32>, since_ms: u64) -> Recovered {
        let exit_path = self.paths.exit_path(key.job, key.task as usize);
        let pid = match pid {
            Some(pid) => pid,
            // Its pid was not durable: its shim, found by the exit file on its command line,
            // or an exit record written since the run started.
            None => match self.executor.find_running(&exit_path) {
                Some(pid) => pid,
                None => {
                    return match self.executor.exit_since(&exit_path, since_ms) {
                        Some(exit) => Recovered::Ended(exit),
                        None => Recovered::NotLaunched,
                    };
                }
            },
        };
        self.executor.adopt(key.job, key.task, pid, exit_path);
        Recovered::Running(pid)
    }

    fn pull_progress(&self, key: TaskKey) -> Option<PullProgress> {
        pull_progress::read(&self.paths.pull_path(key.job, key.task as usize))
    }

    fn agent(&self) -> Option<&AgentClient> {
        None
    }
}
