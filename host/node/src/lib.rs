//! Everything of Gantry that touches a node's kernel and devices, used by both the controller
//! (`gantry serve`, for its own node) and the node agent (`gantry agent`):
//!
//! - `executor`: starting a task through the task shim as its user, in its cgroups, behind
//!   its GPU device fence; signals, stops, exit records, adoption after a restart;
//! - `inventory`: the node's GPUs, CPU and memory (NVML or configuration), NVLink groups and
//!   GPU health;
//! - `config_execution`: the `[execution]` settings the executor acts on;
//! - `container`: jobs in OCI images (`[containers]`, the image cache, the runtime's bundle);
//! - (the umask and directory modes of what the daemon keeps on disk: `gantry-private-files`);
//! - `process_hygiene`: a new session and no inherited descriptors for what Gantry starts;
//! - `port_owner`: which users listen on a TCP port (for service health checks);
//! - `health_probe`: one health check of a service on this node (a plain HTTP GET of its
//!   port, or its check command run as its tasks run), for the controller and the agent;
//! - `trusted_dir`: whether a directory may hold what the daemon writes as root;
//! - `user_open`: opening a path a user named with that user's rights, for root;
//! - `cgroup_join`: joining a task's cgroup between fork and exec;
//! - `sys`: safe wrappers of the few other system calls Gantry makes.
//!
//! This is the only daemon-side crate with `unsafe` code; each block says why it is sound.
//! It knows nothing of jobs, the store, HTTP serving or the scheduler: the daemon (`gantry`) uses it,
//! never the other way round. See `ARCHITECTURE.md`.

pub mod cgroup_join;
pub mod config_execution;
pub mod container;
pub mod executor;
pub mod health_probe;
pub mod inventory;
pub mod port_owner;
pub mod process_hygiene;
pub mod sys;
pub mod terminal;
pub mod trusted_dir;
pub mod user_open;
