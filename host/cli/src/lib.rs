//! `gantry-cli`: the client commands of the `gantry` binary: the HTTP client (`cli::Client`,
//! over the Unix socket or TCP) and its tables, `gantry submit` with `#SBATCH` directives
//! (`submit_cli`, `sbatch`), `gantry run` (`run_cli`), `gantry accounting`
//! (`accounting_cli`), token sources and `gantry token create` (`auth_cli`), and job text
//! shown on a terminal (`terminal_text`).
//!
//! Owns the command-line side of the API. Requests and answers go through the typed client
//! and wire types of `gantry-api`; the configuration, the token file model (`gantry token
//! create`), `--ca-cert` and pipeline files are `gantry-config`'s. It does not depend on the
//! daemon library (`scripts/crate-rules` checks it), and the daemon does not know this
//! crate. See `ARCHITECTURE.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod accounting_cli;
pub mod auth_cli;
pub mod begin_time;
pub mod cancel_cli;
pub mod cli;
pub mod control_cli;
pub mod export;
pub mod history_cli;
pub mod images_view;
pub mod join_token_cli;
pub mod policy_view;
pub mod run_cli;
pub mod run_input;
pub mod run_spec;
pub mod sbatch;
pub mod service_cli;
pub mod service_print;
pub mod show_job;
pub mod sinfo_view;
pub mod slurm;
pub mod squeue_view;
pub mod start_view;
pub mod state_names;
pub mod store_cli;
pub mod submit_cli;
pub mod terminal_text;
pub mod what_if_cli;

#[cfg(test)]
mod api_paths_guard;
