//! Input for a running interactive job (`gantry run`, like `srun --pty`): what its client
//! types reaches the job's first task through its node's runner (`runner.rs`): the task's input
//! FIFO on the controller's node, the agent's input route on an agent's.
//!
//! Owns: finding where the input goes and why it cannot. Does not own HTTP (`api::job_input`)
//! or the relay (`gantry-node`'s executor).

use super::Scheduler;
use super::runner::InputRefused;
use gantry_api::model::JobState;
use gantry_node::executor::TaskInput;

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
        let runner = (job.tasks.first())
            .and_then(|t| self.runner_of(&t.node))
            .ok_or_else(|| InputSendError::Failed(id, "its node is gone".into()))?;
        let key = Self::task_key(&job, 0);
        runner
            .input(key, &request.data, request.resize, request.eof)
            .map_err(|e| match e {
                InputRefused::NotOpen => InputSendError::NotOpen(id),
                InputRefused::Failed(message) => InputSendError::Failed(id, message),
            })
    }
}
