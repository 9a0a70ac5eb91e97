//! The controller–agent wire protocol, version [`PROTOCOL_VERSION`]: JSON over HTTP, every
//! request carrying `Authorization: Bearer <credential>`. In version 2 the credential is
//! the node's own (`cluster_token::node_credential`, given at `gantry agent join` or derived
//! from the cluster token) and the agent names its node in the [`NODE_HEADER`] header; in
//! version 1 it is the cluster token itself. A controller serves agents of versions
//! [`OLDEST_PROTOCOL`]..=[`PROTOCOL_VERSION`] (one release apart keep working, either way
//! round of an upgrade of the controller first); an agent refuses a controller that does not
//! speak its version, naming both (`ProtoError::controller_version`). Joining is
//! `cluster_join`.
//!
//! * Agent → controller: `POST /cluster/v1/heartbeat` ([`Heartbeat`] → [`HeartbeatReply`]).
//!   The first heartbeat registers the node; every one carries its inventory, GPU health,
//!   load, the tasks it runs and the ends it has not yet had acknowledged. The reply
//!   acknowledges ends (the agent forgets them only then) and names tasks to stop.
//! * Controller → agent: `POST /agent/v1/launch` ([`LaunchRequest`] → [`LaunchReply`]),
//!   `POST /agent/v1/signal` ([`SignalRequest`]), `GET /agent/v1/free-port`
//!   ([`FreePort`]), `POST /agent/v1/check` ([`CheckRequest`] → [`CheckReply`]: a service's
//!   health-check command, run on its node), `POST /agent/v1/port-owner`
//!   ([`PortOwnerRequest`] → [`PortOwnerReply`]: who listens on a service's port) and
//!   `GET /agent/v1/tasks/{job}/{task}/{run}/log?offset=N` (raw bytes).
//!
//! Idempotence: a task is named by its [`TaskKey`] (job, task index, run). A launch with a
//! key the agent already knows starts nothing and answers with that task's pid or end
//! (`replayed: true`), so a launch retried after a timeout never starts a task twice; an end
//! is reported until acknowledged and applied once by the controller, which ignores an end
//! whose key is not the task's current run.
//!
//! Owns: these types, the routes' paths and the version. Does not own either side's
//! behaviour (the daemon's `scheduler::remote`, `api::cluster`, `agent`) or the token check
//! (`cluster_token`), the controller's term (`cluster_term`) or the controller's client of
//! an agent (`agent_client`, behind the `client` feature).

use crate::node::NodeInfo;
use crate::task::{TaskExit, TaskUsage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version this build speaks (an agent sends it; a controller answers it).
pub const PROTOCOL_VERSION: u32 = 2;

/// The oldest agent protocol a controller of this build still serves: version 1 agents (the
/// previous release) keep working until they are upgraded.
pub const OLDEST_PROTOCOL: u32 = 1;

/// The header in which an agent of protocol 2 names its node: its credential is checked
/// against that name before a byte of the body is read.
pub const NODE_HEADER: &str = "gantry-node";

/// This build's version (`gantry --version`), sent in heartbeats and refusals.
pub const GANTRY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Controller route of heartbeats.
pub const HEARTBEAT_PATH: &str = "/cluster/v1/heartbeat";
/// Agent route of launches.
pub const LAUNCH_PATH: &str = "/agent/v1/launch";
/// Agent route of signals and stops.
pub const SIGNAL_PATH: &str = "/agent/v1/signal";
/// Agent route that names a TCP port free on its node (for a gang's `MASTER_PORT`).
pub const FREE_PORT_PATH: &str = "/agent/v1/free-port";
/// Agent route that runs a service's health-check command on its node.
pub const CHECK_PATH: &str = "/agent/v1/check";
/// Agent route that says who listens on a service's port on its node, a
/// [`PortOwnerRequest`] answered with [`PortOwnerReply`] (the controller's endpoint sends a
/// replica traffic only while its user alone listens there).
pub const PORT_OWNER_PATH: &str = "/agent/v1/port-owner";
/// Controller → agent: input for an interactive task (`gantry run`), an [`InputRequest`];
/// answered with [`InputReply`], or 409 when the task's input is not open.
pub const INPUT_PATH: &str = "/agent/v1/tasks/{job}/{task}/{run}/input";

/// Agent route that lists its node's image cache, answered with [`NodeImages`].
pub const IMAGES_PATH: &str = "/agent/v1/images";

/// One unpacked container image in a node's cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedImage {
    /// `sha256:...` of the manifest.
    pub digest: String,
    /// The references tasks named it by.
    pub references: Vec<String>,
    /// Its unpacked size.
    pub size_mib: u64,
    /// When a task last used it, ms since the epoch.
    pub last_used_ms: u64,
    /// A container runs from it now.
    pub in_use: bool,
}

/// A node's image cache (`GET /v1/images` for the controller's node, [`IMAGES_PATH`] for an
/// agent's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeImages {
    /// The node runs jobs in images (`[containers]` set up).
    pub enabled: bool,
    /// Where its cache lives.
    pub cache_dir: Option<String>,
    /// `[containers] cache_max_mib`.
    pub cache_max_mib: u64,
    /// Its images, most recently used first.
    pub images: Vec<CachedImage>,
}

/// Input for a task's stdin, then what follows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputRequest {
    /// The bytes, base64 (standard, padded).
    #[serde(default)]
    pub data: String,
    /// The terminal's new size (lines, columns), once all the data was taken.
    #[serde(default)]
    pub resize: Option<(u16, u16)>,
    /// The end of input, once all the data was taken.
    #[serde(default)]
    pub eof: bool,
}

/// Agent → controller: how many bytes of data the task's input took (the rest is for the
/// client to send again; the size and the end apply only when all was taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputReply {
    /// Data bytes taken.
    pub accepted: usize,
}

/// One run of one task: a requeued or restarted task gets a new `run` (its start time, ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskKey {
    /// Job id.
    pub job: u64,
    /// Task index (gang rank).
    pub task: u32,
    /// The run: when the controller started this run of the task, ms since the Unix epoch.
    pub run: u64,
}

impl std::fmt::Display for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.job, self.task, self.run)
    }
}

/// A task the agent runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningReport {
    /// Which.
    pub key: TaskKey,
    /// Its shim's pid (process group) on the agent's node.
    pub pid: u32,
}

/// A task that ended, reported until the controller acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndReport {
    /// Which.
    pub key: TaskKey,
    /// How it ended.
    pub exit: TaskExit,
    /// What it used.
    pub usage: TaskUsage,
}

/// The node's load when the heartbeat was sent.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeLoad {
    /// One-minute load average.
    pub load_1m: f64,
    /// Memory available, MiB.
    pub memory_available_mib: u64,
}

/// Agent → controller, every heartbeat interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The agent's protocol, [`OLDEST_PROTOCOL`]..=[`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// The agent's Gantry version (empty from agents of protocol 1).
    #[serde(default)]
    pub version: String,
    /// The node's inventory (its name is the node's name in the cluster).
    pub node: NodeInfo,
    /// Where the controller reaches the agent, e.g. `http://10.0.0.5:8421`.
    pub agent_url: String,
    /// The node's address for other nodes' tasks (`MASTER_ADDR` when rank 0 runs here).
    pub addr: String,
    /// GPUs unhealthy now, found since the agent started: index → reason.
    #[serde(default)]
    pub gpu_faults: BTreeMap<u32, String>,
    /// The last failed run of the node check per faulty GPU: index → how it ended (a GPU
    /// that leaves `gpu_faults` passed it and is back in service).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_checks: BTreeMap<u32, String>,
    /// The node's latest round of GPU use samples (`node.gpu_sample_every_s`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_usage: Option<crate::gpu_usage::GpuUsageReport>,
    /// Load now.
    #[serde(default)]
    pub load: NodeLoad,
    /// Tasks running now.
    pub running: Vec<RunningReport>,
    /// Ends not yet acknowledged.
    pub ended: Vec<EndReport>,
}

/// Controller → agent, the answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Ends recorded (the agent may forget them).
    pub acknowledged: Vec<TaskKey>,
    /// Running tasks the controller does not want (their job ended, was requeued while the
    /// node was down, or never knew them): stop them.
    pub stop: Vec<TaskKey>,
    /// How often to send heartbeats, ms.
    pub heartbeat_interval_ms: u64,
    /// The answering controller's term (`host/api/src/cluster_term.rs`; 0 alone on
    /// sled): an agent ignores a reply of a term below the highest it has seen.
    #[serde(default)]
    pub term: i64,
}

/// Controller → agent: start one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRequest {
    /// Must be [`PROTOCOL_VERSION`].
    pub protocol: u32,
    /// Which task and run.
    pub key: TaskKey,
    /// The command (ignored when `script` is set).
    pub argv: Vec<String>,
    /// The job's script, written by the agent to the task's directory and run.
    #[serde(default)]
    pub script: Option<String>,
    /// Variables on top of the agent's environment.
    pub env: Vec<(String, String)>,
    /// Working directory; the agent's task directory when `None`.
    #[serde(default)]
    pub workdir: Option<String>,
    /// GPU indices on the agent's node.
    pub gpus: Vec<u32>,
    /// CPU, milli-cores.
    pub cpu_milli: u32,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The job's user (the agent decides who the task runs as, like the local executor).
    pub user: String,
    /// The job was submitted without an identity: the agent runs it as its fallback user,
    /// never as `user`.
    #[serde(default)]
    pub anonymous: bool,
    /// What the task reads as its input (an interactive job's first task).
    #[serde(default)]
    pub input: crate::task::TaskInput,
    /// Files for stdout and stderr (`sbatch --output/--error`, patterns expanded), opened
    /// by the task as its user; its log when `None`.
    #[serde(default)]
    pub stdout_file: Option<String>,
    #[serde(default)]
    pub stderr_file: Option<String>,
    /// The image the task runs in (`JobSpec::image`); the node's root file system when none.
    #[serde(default)]
    pub image: Option<String>,
    /// Host paths mounted inside the image (checked by the controller).
    #[serde(default)]
    pub mounts: Vec<crate::model::ContainerMount>,
}

/// Agent → controller: the launched (or already known) task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchReply {
    /// The shim's pid.
    pub pid: u32,
    /// The key was already known: nothing new was started.
    pub replayed: bool,
    /// Its end, when a replayed task has already ended.
    #[serde(default)]
    pub ended: Option<EndReport>,
}

/// Controller → agent: signal a task, and with `grace_ms` SIGKILL it after that grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRequest {
    /// Which.
    pub key: TaskKey,
    /// The signal number.
    pub signal: i32,
    /// With a value: a stop (SIGKILL after this many ms if still alive).
    #[serde(default)]
    pub grace_ms: Option<u64>,
    /// Which of the task's processes it reaches (a stop: always all).
    #[serde(default)]
    pub scope: crate::model::job_options::SignalScope,
}

/// Controller → agent: run a health-check command of a service whose rank 0 is `key`, in
/// the job's `workdir` or else that run's directory, with `env` on top of the agent's
/// environment; killed (its whole process group) after `timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    /// The service's rank-0 task run.
    pub key: TaskKey,
    /// The command.
    pub command: Vec<String>,
    /// Variables (the job's, `PORT`...).
    pub env: Vec<(String, String)>,
    /// The job's user; the command runs as the job's tasks do, in the task's cgroup.
    pub user: String,
    /// The job was submitted without an identity: it runs as the fallback user.
    #[serde(default)]
    pub anonymous: bool,
    /// The job's own working directory, if it has one.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Deadline, ms.
    pub timeout_ms: u64,
    /// An HTTP check instead of a command: `GET` this path on `port` on the agent's node
    /// (only if a socket of the job's user listens there).
    #[serde(default)]
    pub http_path: Option<String>,
    /// The service's port, for an HTTP check.
    #[serde(default)]
    pub port: Option<u16>,
}

/// Agent → controller: the check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReply {
    /// The command exited 0 in time.
    pub healthy: bool,
    /// Why not.
    #[serde(default)]
    pub message: Option<String>,
}

/// Controller → agent: who listens on `port`, and is it the uid a task of `user` runs as
/// on the agent's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortOwnerRequest {
    /// The replica's port.
    pub port: u16,
    /// The job's user.
    pub user: String,
    /// The job was submitted without an identity (it runs as the fallback user).
    #[serde(default)]
    pub anonymous: bool,
}

/// Agent → controller: the uids listening on the port, and the uid the job's tasks run as
/// there (`None`: it may not run there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortOwnerReply {
    /// uids of the sockets listening on the port (any address), each once.
    pub holders: Vec<u32>,
    /// The uid the job's tasks run as on the node.
    #[serde(default)]
    pub uid: Option<u32>,
}

/// Agent → controller: a port free on the agent's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreePort {
    /// The port.
    pub port: u16,
}

/// The JSON body of every refusal on either side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtoError {
    /// What is wrong.
    pub error: String,
    /// The field concerned, when one is.
    #[serde(default)]
    pub field: Option<String>,
    /// On a refused protocol: the controller's Gantry version and the protocol versions it
    /// serves, so that the agent can name both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<PeerVersion>,
}

/// A side's Gantry version and the protocol versions it speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerVersion {
    /// `gantry --version`'s number.
    pub version: String,
    /// Oldest protocol served.
    pub oldest_protocol: u32,
    /// Newest protocol served.
    pub protocol: u32,
}

impl PeerVersion {
    /// This build.
    pub fn this_build() -> Self {
        Self {
            version: GANTRY_VERSION.to_string(),
            oldest_protocol: OLDEST_PROTOCOL,
            protocol: PROTOCOL_VERSION,
        }
    }
}

impl std::fmt::Display for PeerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.oldest_protocol == self.protocol {
            write!(f, "gantry {} (protocol {})", self.version, self.protocol)
        } else {
            write!(
                f,
                "gantry {} (protocols {}-{})",
                self.version, self.oldest_protocol, self.protocol
            )
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_heartbeat_round_trips_and_old_fields_default() {
        let key = TaskKey {
            job: 7,
            task: 1,
            run: 1234,
        };
        let json = serde_json::json!({
            "protocol": 1,
            "node": {"name": "a", "cpu_milli": 1000, "memory_mib": 10, "gpus": [],
                     "labels": {}, "gpu_source": "config"},
            "agent_url": "http://127.0.0.1:1",
            "addr": "127.0.0.1",
            "running": [{"key": key, "pid": 42}],
            "ended": []
        });
        let hb: Heartbeat = serde_json::from_value(json).unwrap();
        assert_eq!(hb.running[0].key, key);
        assert!(hb.gpu_faults.is_empty());
        assert_eq!(key.to_string(), "7.1.1234");
    }
}
