//! The `gantry` daemon as a library: the scheduler loop, the HTTP API and the controller's
//! side of the cluster protocol. The `gantry` binary (`host/gantry/src/main.rs`) only parses
//! the command line and dispatches here, to `gantry-agent` for `gantry agent`, to
//! `gantry-cli` for the client commands and to `gantry-sim` for `gantry simulate`.
//!
//! Dependency direction: this crate uses `gantry-api` (the job model and wire types),
//! `gantry-node` (the node's kernel and devices: executor, inventory), `gantry-engine`
//! (decisions), `gantry-plugin-runtime` (wasm), `gantry-store` (durable state), `gantry-http`
//! (the server's transport) and `gantry-telemetry` (logs and traces); none of
//! them knows about this crate, and nothing is re-exported under another crate's name.
//! This crate has no `unsafe` code: its system calls go through `gantry-node` (the wasm
//! runtime's own are in `gantry-plugin-runtime`). See `ARCHITECTURE.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod auth_submit;
pub mod cluster;
pub mod job_trace_sink;
pub mod leadership;
pub mod metrics;
pub mod scheduler;
pub mod serve;
pub mod service_autoscaler;
pub mod service_endpoint;
