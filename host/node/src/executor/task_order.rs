//! From what the controller decided about a job's tasks (a [`LaunchRequest`]) to the
//! [`TaskLaunch`] the executor starts: the run's files once ([`Executor::prepare_files`]:
//! the command, argv or its script written to the run's directory as its user, and the
//! working directory, its own or a scratch `work` owned by its user), then each task ([`TaskOrder::launch`]: in an image, the mounts
//! that carry the job's and the script's files). Written once, used by both places that start
//! tasks: the controller's runner for its own node (`gantry-controller`'s `runner_local.rs`,
//! one directory for the job's local tasks) and the node agent (`agent/launch.rs`, one per run),
//! so a task starts the same way wherever it runs.
//!
//! The files are made once per directory, not per task: a script rewritten for the second
//! task of a gang would vanish for a moment under the first, which may be opening it.
//!
//! Owns: that assembly and why it failed ([`PrepareError`]). Does not own who the task runs
//! as (`Executor::identity`, resolved by the caller once per job or run), where its
//! directory, log and exit record are (the caller's layout), nor starting it
//! (`Executor::launch`).

use super::Executor;
use super::identity::TaskIdentity;
use super::task_files;
use super::task_input::TaskInput;
use super::types::TaskLaunch;
use gantry_api::cluster::LaunchRequest;
use gantry_api::model::ContainerMount;
use std::io;
use std::path::{Path, PathBuf};

/// One task as the controller decided it, and where the caller keeps its files.
#[derive(Debug, Clone)]
pub struct TaskOrder<'a> {
    /// The job the task belongs to.
    pub job_id: u64,
    /// The task's index within its job (its gang rank).
    pub task_index: u32,
    /// The job's own working directory, if it named one.
    pub workdir: Option<&'a str>,
    /// The task's environment (the scheduler's variables and the job's `env`).
    pub env: Vec<(String, String)>,
    /// The directory its files were prepared in (the caller's).
    pub dir: &'a Path,
    /// Where stdout and stderr go.
    pub log_path: PathBuf,
    /// Where the shim records the exit.
    pub exit_path: PathBuf,
    /// The node's GPUs (indices) the task was given.
    pub gpus: Vec<u32>,
    /// CPU, milli-cores.
    pub cpu_milli: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The task's stdin.
    pub input: TaskInput,
    /// `--output` / `--error` files, relative to the working directory.
    pub stdout_file: Option<&'a str>,
    pub stderr_file: Option<&'a str>,
    /// The image the task runs in, if any.
    pub image: Option<&'a str>,
    /// The job's mounts (in an image only).
    pub mounts: &'a [ContainerMount],
}

/// Why a task's files could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The script could not be written (or its directory made).
    #[error("cannot write the job script: {0}")]
    Script(#[source] io::Error),
    /// The working directory could not be made ready.
    #[error("cannot prepare the working directory: {0}")]
    Workdir(#[source] io::Error),
}

/// A run's files, ready: the command to run and the working directory.
#[derive(Debug, Clone)]
pub struct TaskFiles {
    /// argv, or the script's path.
    pub argv: Vec<String>,
    /// The working directory on the host (the job's own, or the scratch `work`).
    pub workdir: PathBuf,
}

impl Executor {
    /// Writes the script of a job (`script`, else `argv` is the command) into `dir` and makes
    /// its working directory ready, as `identity` (the daemon's user when `None`).
    pub fn prepare_files(
        &self,
        dir: &Path,
        argv: &[String],
        script: Option<&str>,
        workdir: Option<&str>,
        identity: Option<&TaskIdentity>,
    ) -> Result<TaskFiles, PrepareError> {
        let argv =
            task_files::command(dir, argv, script, identity).map_err(PrepareError::Script)?;
        let workdir = self
            .workdir(workdir, dir, identity)
            .map_err(PrepareError::Workdir)?;
        Ok(TaskFiles { argv, workdir })
    }
}

impl<'a> TaskOrder<'a> {
    /// The order of `request` (what the controller sends an agent, and hands its own node's
    /// runner), with the caller's directory, log and exit record.
    pub fn of_request(
        request: &'a LaunchRequest,
        dir: &'a Path,
        log_path: PathBuf,
        exit_path: PathBuf,
    ) -> Self {
        Self {
            job_id: request.key.job,
            task_index: request.key.task,
            workdir: request.workdir.as_deref(),
            env: request.env.clone(),
            dir,
            log_path,
            exit_path,
            gpus: request.gpus.clone(),
            cpu_milli: request.cpu_milli,
            memory_mib: request.memory_mib,
            input: request.input,
            stdout_file: request.stdout_file.as_deref(),
            stderr_file: request.stderr_file.as_deref(),
            image: request.image.as_deref(),
            mounts: &request.mounts,
        }
    }

    /// The launch of this task with `files` (its run's), run as `identity`. Nothing is
    /// written or started.
    pub fn launch(self, files: &TaskFiles, identity: Option<TaskIdentity>) -> TaskLaunch {
        let mut argv = files.argv.clone();
        let mounts = match self.image {
            Some(_) => crate::container::task_mounts(self.mounts, &mut argv, self.dir),
            None => Vec::new(),
        };
        TaskLaunch {
            job_id: self.job_id,
            task_index: self.task_index,
            argv,
            env: self.env,
            // In an image: the job's own directory inside it, else the image's.
            workdir: match self.image {
                Some(_) => self.workdir.map(PathBuf::from),
                None => Some(files.workdir.clone()),
            },
            log_path: self.log_path,
            exit_path: self.exit_path,
            gpus: self.gpus,
            cpu_milli: self.cpu_milli,
            memory_mib: self.memory_mib,
            identity,
            input: self.input,
            stdout_file: self.stdout_file.map(PathBuf::from),
            stderr_file: self.stderr_file.map(PathBuf::from),
            image: self.image.map(str::to_string),
            mounts,
        }
    }
}
