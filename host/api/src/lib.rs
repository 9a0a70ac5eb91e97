//! Gantry's wire types: what crosses the daemon's HTTP API and the controller–agent
//! protocol, as plain serde data shared by the daemon (`gantry`), the node crate, the CLI and
//! the tests:
//!
//! - `model`: the job as submitted (`JobSpec`, with its validation) and as kept and shown
//!   (`JobRecord`), arrays, dependencies, signals and services (`model::job_options`);
//! - `task`: how a task ended and what it used (`TaskExit`, `TaskUsage`);
//! - `node`: a node's inventory (`NodeInfo`, `GpuInfo`);
//! - `cluster`: the controller–agent protocol (heartbeats, launches, signals, checks);
//! - `gpu_usage`: GPU use as sampled on a node and as a task's run used it;
//! - `hostlist`: SLURM's `node[01-04]` notation;
//! - `views`, `accounting`, `error`: what the API answers besides jobs (the submit answer,
//!   nodes, plugins, attach frames, accounting reports, the error body);
//! - `client` (feature `client`): the typed HTTP client of the API, over TCP, TLS or the
//!   daemon's Unix socket, used by the CLI;
//! - feature `openapi`: `utoipa::ToSchema` on the types the API shows, from which the daemon
//!   generates the schemas of its OpenAPI document (`host/server/src/api/openapi/schemas.rs`).
//!
//! The serde form of every type is the stored and wire form: records in the daemon's store
//! and API answers depend on it, so a change must stay readable from old data (a serde
//! default). Knows nothing of HTTP servers, storage, the scheduler or the kernel. See
//! `ARCHITECTURE.md` ("Crates").

#![forbid(unsafe_code)]

pub mod accounting;
#[cfg(feature = "client")]
pub mod agent_client;
#[cfg(feature = "client")]
pub mod client;
pub mod cluster;
pub mod cluster_join;
pub mod cluster_term;
pub mod cluster_token;
pub mod error;
pub mod gpu_usage;
pub mod hostlist;
pub mod mig;
pub mod model;
pub mod node;
pub mod plain_link;
pub mod task;
pub mod views;
