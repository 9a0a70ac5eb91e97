//! Starting one task run for the controller, at most once per [`TaskKey`]: the request is
//! checked (protocol, command, GPUs), then, under the table's lock, a known key answers with
//! its pid or end (`replayed`), and a new one gets its directory, its script, its working
//! directory and one executor launch, assembled by `gantry_node::executor::task_order` as the
//! controller's local runner (`runner_local.rs`) does for its own node's tasks.
//!
//! A task that runs as the job's user (agent as root, `execution.run_as_user`) and has no
//! `workdir` of its own works in `<run dir>/work`, owned by that user; the run directory
//! itself stays the agent's (it writes the log, exit record and script there).
//!
//! Owns: the launch of one run. Does not own the table (`tasks`) or processes (`executor`).

use super::tasks::{Entry, TaskError, TaskTable, lock};
use gantry_api::cluster::{EndReport, LaunchReply, LaunchRequest, PROTOCOL_VERSION, TaskKey};
use gantry_node::executor::task_order::{PrepareError, TaskOrder};
use gantry_node::executor::{TaskExit, TaskIdentity, TaskUsage};
use std::path::Path;

/// File in a run's directory holding its shim's pid.
const PID_FILE: &str = "pid";

impl TaskTable {
    /// Starts the run `request.key`, or answers with the one already started under that key.
    /// Blocking (files, process start): call it off the async threads, within the runtime.
    pub(crate) fn launch(&self, request: &LaunchRequest) -> Result<LaunchReply, TaskError> {
        let key = request.key;
        if request.protocol != PROTOCOL_VERSION {
            return Err(TaskError::Protocol {
                given: request.protocol,
            });
        }
        if request.argv.is_empty() && request.script.is_none() {
            return Err(TaskError::NoCommand(key));
        }
        // A MIG slice (index 1000 and up) is on the node when its parent GPU is.
        let on_node = |g: &&u32| self.node_gpus.contains(&gantry_api::mig::physical(**g));
        if let Some(&index) = request.gpus.iter().find(|g| !on_node(g)) {
            return Err(TaskError::NoSuchGpu {
                key,
                index,
                have: self.node_gpus.iter().copied().collect(),
            });
        }
        let mut entries = lock(&self.entries);
        if let Some(entry) = entries.get(&key) {
            return Ok(replay(key, entry));
        }
        let dir = self.dir(key);
        if dir.exists() {
            // Acknowledged earlier (every other run directory is in the table).
            return Ok(self.replay_from_disk(key, &dir));
        }
        let identity = self
            .executor
            .identity(&request.user, request.anonymous)
            .map_err(|source| TaskError::Identity {
                key,
                user: request.user.clone(),
                source,
            })?;
        std::fs::create_dir_all(&dir).map_err(|source| TaskError::Prepare {
            key,
            what: format!("cannot create {}", dir.display()),
            source,
        })?;
        match self.start(request, &dir, identity) {
            Ok(pid) => {
                if let Err(e) = std::fs::write(dir.join(PID_FILE), pid.to_string()) {
                    tracing::warn!(%key, error = %e, "cannot record the task's pid");
                }
                entries.insert(key, Entry::running(pid));
                tracing::info!(%key, pid, "task started");
                Ok(LaunchReply {
                    pid,
                    replayed: false,
                    ended: None,
                })
            }
            Err(e) => {
                // No trace of a run that never started: a retry starts it afresh.
                if let Err(e) = self.executor.release_workdir(&dir) {
                    tracing::warn!(%key, error = %e, "cannot unmount the scratch directory of a failed launch");
                }
                if let Err(rm) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(%key, error = %rm, "cannot remove the directory of a failed launch");
                }
                Err(e)
            }
        }
    }

    fn start(
        &self,
        request: &LaunchRequest,
        dir: &Path,
        identity: Option<TaskIdentity>,
    ) -> Result<u32, TaskError> {
        let key = request.key;
        let files = self
            .executor
            .prepare_files(
                dir,
                &request.argv,
                request.script.as_deref(),
                request.workdir.as_deref(),
                identity.as_ref(),
            )
            .map_err(|e| {
                let what = match &e {
                    PrepareError::Script(_) => "cannot write the job script",
                    PrepareError::Workdir(_) => "cannot prepare the working directory",
                };
                let source = match e {
                    PrepareError::Script(source) | PrepareError::Workdir(source) => source,
                };
                TaskError::Prepare {
                    key,
                    what: what.to_string(),
                    source,
                }
            })?;
        let order = TaskOrder::of_request(
            request,
            dir,
            TaskTable::log_path(dir),
            TaskTable::exit_path(dir),
        );
        let launch = order.launch(&files, identity);
        self.executor
            .launch(&launch)
            .map(|t| t.pid)
            .map_err(|source| TaskError::Launch { key, source })
    }

    /// The answer for a run acknowledged earlier: its recorded end, else `Lost`.
    fn replay_from_disk(&self, key: TaskKey, dir: &Path) -> LaunchReply {
        let pid = Self::recorded_pid(dir).unwrap_or(0);
        let (exit, usage) = self
            .executor
            .recorded_exit(&TaskTable::exit_path(dir))
            .unwrap_or((TaskExit::Lost, TaskUsage::default()));
        LaunchReply {
            pid,
            replayed: true,
            ended: Some(EndReport { key, exit, usage }),
        }
    }

    /// The pid recorded for a run, if any (for runs found ended after a restart).
    pub(crate) fn recorded_pid(dir: &Path) -> Option<u32> {
        std::fs::read_to_string(dir.join(PID_FILE))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }
}

fn replay(key: TaskKey, entry: &Entry) -> LaunchReply {
    LaunchReply {
        pid: entry.pid,
        replayed: true,
        ended: entry
            .end
            .map(|(exit, usage)| EndReport { key, exit, usage }),
    }
}
