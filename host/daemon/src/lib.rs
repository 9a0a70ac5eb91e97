//! The `gantry` daemon and CLI as a library: configuration, inventory, the sled
//! store, local execution, the scheduler loop and the HTTP API. `main.rs` only parses
//! the command line and dispatches here.
//!
//! Dependency direction: this crate uses `gantry-engine` (decisions)
//! and `gantry-plugin-runtime` (wasm); neither knows about this crate.
#![deny(missing_docs)]

pub mod accounting_cli;
pub mod agent;
pub mod api;
pub mod auth;
pub mod auth_cli;
pub mod auth_submit;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod config_execution;
pub mod config_limits;
pub mod conformance;
pub mod executor;
pub mod http_server;
pub mod instrumented;
pub mod inventory;
pub mod local_socket;
pub mod metrics;
pub mod model;
/// Job options (arrays, dependencies, services, signals) live with the job model.
pub use model::job_options;
pub mod policy;
pub mod private_files;
pub mod run_cli;
pub mod sbatch;
pub mod scheduler;
pub mod serve;
pub mod simulate;
pub mod store;
pub mod submit_cli;
pub mod telemetry;
pub mod tls;
