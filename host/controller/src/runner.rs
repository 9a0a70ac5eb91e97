//! The one seam between the controller and a node that runs tasks: a [`Runner`] per node,
//! handed out by the node table (`members.rs`). The controller's own node has the local
//! runner (`runner_local.rs`: the executor, through the very code the agent uses), an
//! agent's node the agent runner (`runner_agent.rs`: the agent's HTTP routes). Everything
//! that acts on a task where it runs (launch, signal, input, finding it after a restart, its
//! image pull's progress, the ports rank 0 listens on) goes through it, so no code of the controller asks whether a
//! node is local.
//!
//! Owns: the trait, what a launch answer is, and which runner a node has. Does not own what
//! an answer means for the job (`launch.rs`), the node table (`members.rs`) nor the wire
//! protocol (`gantry_api::cluster`).

use super::{Scheduler, lock};
use gantry_api::agent_client::AgentClient;
use gantry_api::cluster::{LaunchReply, LaunchRequest, TaskKey};
use gantry_api::model::JobRecord;
use gantry_api::model::job_options::SignalScope;
use gantry_api::task::TaskExit;
use gantry_node::container::pull_progress::PullProgress;
use std::sync::Arc;
use std::time::Duration;

/// The answer to one launch request.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The run that was asked for.
    pub(crate) key: TaskKey,
    /// Its pid (and, replayed by an agent, maybe its end), or the whole message of why it
    /// did not start; `None`: not tried (an earlier task of the batch failed, or the run is
    /// no longer wanted).
    pub(crate) result: Option<Result<LaunchReply, String>>,
    /// The answer came from a process that runs on its own (an agent): record it durably
    /// before acting on it.
    pub(crate) durable_first: bool,
}

/// What a runner calls once per launch request it was given, tried or not, now or later,
/// from any thread; `false`: the run is no longer wanted, start no more of this batch.
pub(crate) type OnAnswer = Arc<dyn Fn(Answered) -> bool + Send + Sync>;

/// What a node says of a run after the controller restarted.
#[derive(Debug)]
pub(crate) enum Recovered {
    /// Running as this pid, and watched again.
    Running(u32),
    /// Ended while the controller was down.
    Ended(TaskExit),
    /// Never started: its launch was not durable before the restart.
    NotLaunched,
    /// Its agent's heartbeats will say.
    Reported,
    /// Its node is no longer in the table (not a runner's answer).
    Gone,
}

/// Why input was not delivered to a task.
#[derive(Debug)]
pub(crate) enum InputRefused {
    /// The task's input is not open (starting, or ended).
    NotOpen,
    /// Delivering failed.
    Failed(String),
}

/// One node's way of running tasks.
pub(crate) trait Runner: Send + Sync + std::fmt::Debug {
    /// Picks the ports rank 0 of `job` listens on when this node must pick them (an agent
    /// knows which ports are free on its machine); whether it did. The controller's pick
    /// stays otherwise.
    fn choose_ports(&self, _job: &mut JobRecord) -> bool {
        false
    }

    /// Starts `requests`, tasks of one job on this node in rank order, and calls `answer`
    /// once for each request (a runner may stop at the first that fails: the rest are
    /// answered as not tried).
    fn launch(&self, requests: Vec<LaunchRequest>, answer: OnAnswer);

    /// Sends `signal` to the run `key` (`pid`, when known); with `grace`, SIGKILL follows if
    /// it is still alive then. `Ok(false)`: nothing to signal yet.
    fn signal(
        &self,
        key: TaskKey,
        pid: Option<u32>,
        signal: i32,
        grace: Option<Duration>,
        scope: SignalScope,
    ) -> std::io::Result<bool>;

    /// Delivers input (bytes, a terminal size, the end) to the run `key`; the bytes taken.
    fn input(
        &self,
        key: TaskKey,
        data: &[u8],
        resize: Option<(u16, u16)>,
        eof: bool,
    ) -> Result<usize, InputRefused>;

    /// After a controller restart: finds the run `key` (`pid`, when it was stored; started
    /// at `since_ms`) and watches it again if it runs.
    fn recover(&self, key: TaskKey, pid: Option<u32>, since_ms: u64) -> Recovered;

    /// The progress of the run's image pull, when the controller can see it here.
    fn pull_progress(&self, key: TaskKey) -> Option<PullProgress>;

    /// The agent serving this node's logs and checks over HTTP (`None`: the controller's
    /// own files and ports).
    fn agent(&self) -> Option<&AgentClient>;
}

impl Scheduler {
    /// The runner of node `node` (`None`: no such node, or it was forgotten).
    pub(crate) fn runner_of(&self, node: &str) -> Option<Arc<dyn Runner>> {
        lock(&self.inner.members)
            .by_name(node)
            .map(|(_, m)| m.runner.clone())
    }

    /// The key of the current run of task `i`.
    pub(crate) fn task_key(job: &JobRecord, i: usize) -> TaskKey {
        TaskKey {
            job: job.id,
            task: i as u32,
            run: job.tasks.get(i).and_then(|t| t.started_ms).unwrap_or(0),
        }
    }
}
