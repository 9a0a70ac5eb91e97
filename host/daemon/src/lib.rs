//! The `gantry` daemon as a library: configuration, the scheduler loop, the HTTP API, the node agent and the cluster protocol. The `gantry` binary
//! (`host/gantry/src/main.rs`) only parses the command line and dispatches here, to
//! `gantry-cli` for the client commands and to `gantry-sim` for `gantry simulate`.
//!
//! Dependency direction: this crate uses `gantry-node` (the node's kernel and devices:
//! executor, inventory; re-exported here under their old paths), `gantry-engine`
//! (decisions), `gantry-plugin-runtime` (wasm) and `gantry-store` (durable state,
//! re-exported here as `store`); none of them knows about this crate.
//! This crate has no `unsafe` code: its system calls go through `gantry-node` (the wasm
//! runtime's own are in `gantry-plugin-runtime`). See `ARCHITECTURE.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub use gantry_node::{
    config_execution, executor, inventory, private_files, process_hygiene, trusted_dir,
};
pub use gantry_store as store;
pub mod agent;
pub mod api;
pub mod auth;
pub mod auth_submit;
pub mod cluster;
pub mod config;
pub mod config_history;
pub mod config_limits;
pub mod config_retention;
pub mod config_services;
pub mod config_store;
pub mod conformance;
pub mod http_server;
pub mod instrumented;
pub mod leadership;
pub mod local_socket;
pub mod metrics;
pub mod model;
/// Job options (arrays, dependencies, services, signals) live with the job model.
pub use model::job_options;
pub mod pipeline_file;
pub mod policy;
pub mod scheduler;
pub mod serve;
pub mod service_autoscaler;
pub mod service_endpoint;
pub mod telemetry;
pub mod tls;
