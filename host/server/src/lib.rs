//! `gantry-server`: the daemon's server. `gantry serve` (`serve.rs`) opens the controller
//! (`gantry-controller`), runs its loop and serves the HTTP API over the controller's facade,
//! with leadership among several controllers, the service endpoints and autoscaler, and the
//! controller's side of the cluster protocol's routes. The `gantry` binary
//! (`host/gantry/src/main.rs`) only parses the command line and dispatches here, to
//! `gantry-agent` for `gantry agent`, to `gantry-cli` for the client commands and to
//! `gantry-sim` for `gantry simulate`.
//!
//! Dependency direction: this crate uses `gantry-controller` (state and scheduling, through its
//! facade), `gantry-api` (wire types), `gantry-node` (the executor's types), `gantry-store`
//! (leadership's election), `gantry-config`, `gantry-policy`, `gantry-http` (the transport) and
//! `gantry-telemetry`; none of them knows about this crate, and nothing is re-exported under
//! another crate's name. This crate has no `unsafe` code. See `ARCHITECTURE.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod auth_submit;
pub mod job_trace_sink;
pub mod leadership;
pub mod serve;
pub mod service_autoscaler;
pub mod service_endpoint;
