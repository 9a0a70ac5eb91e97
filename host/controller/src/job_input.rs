//! Input for a running interactive job (`gantry run`, like `srun --pty`): what its client
//! types reaches the job's first task, on the controller's node through the task's input FIFO
//! (`executor::task_input`), on an agent through the agent's input route.
//!
//! Owns: finding where the input goes and why it cannot. Does not own HTTP (`api::job_input`)
//! or the relay (`gantry-node`'s executor).

use super::Scheduler;
use base64::Engine;
use gantry_api::agent_client::AgentCallError;
use gantry_api::cluster;
use gantry_api::model::JobState;
use gantry_node::executor::{InputError, TaskInput, task_input};

/// One piece of input: bytes for stdin, then a new terminal size and the end of input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputRequest {
    /// Bytes for the task's stdin.
    pub data: Vec<u8>,
    /// The terminal's new size (lines, columns).
    pub resize: Option<(u16, u16)>,
    /// The end of input.
    pub eof: bool,
}

/// Why input was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum InputSendError {
    /// No such job.
    #[error("job {0} does not exist")]
    NotFound(u64),
    /// The job is not running.
    #[error("job {0} is {1}, not running")]
    NotRunning(u64, &'static str),
    /// The job was not submitted to read input.
    #[error("job {0} reads no input (submit an interactive job with `stdin` or `tty`)")]
    NoInput(u64),
    /// The task is starting (its input opens in a moment) or has ended.
    #[error("the input of job {0} is not open: its first task is starting or has ended")]
    NotOpen(u64),
    /// Writing failed.
    #[error("cannot deliver input to job {0}: {1}")]
    Failed(u64, String),
}

impl Scheduler {
    /// Delivers `request` to the first task of job `id`; returns the data bytes taken (the
    /// rest is the client's to send again).
    pub(crate) fn send_input(
        &self,
        id: u64,
        request: &InputRequest,
    ) -> Result<usize, InputSendError> {
        let job = self.job(id).ok_or(InputSendError::NotFound(id))?;
        if job.state != JobState::Running {
            return Err(InputSendError::NotRunning(id, job.state.as_str()));
        }
        if job.spec.task_input() == TaskInput::None {
            return Err(InputSendError::NoInput(id));
        }
        if job.tasks.first().is_none_or(|t| t.exit.is_some()) {
            return Err(InputSendError::NotOpen(id));
        }
        if let Some((agent, key)) = self.remote_task(&job, 0) {
            let wire = cluster::InputRequest {
                data: base64::engine::general_purpose::STANDARD.encode(&request.data),
                resize: request.resize,
                eof: request.eof,
            };
            return agent.input(key, &wire).map_err(|e| match e {
                AgentCallError::Refused { status: 409, .. } => InputSendError::NotOpen(id),
                e => InputSendError::Failed(id, e.to_string()),
            });
        }
        let fifo = task_input::fifo_path(&self.exit_path(id, 0));
        task_input::deliver(&fifo, &request.data, request.resize, request.eof).map_err(
            |e| match e {
                InputError::NotOpen => InputSendError::NotOpen(id),
                e => InputSendError::Failed(id, e.to_string()),
            },
        )
    }
}
