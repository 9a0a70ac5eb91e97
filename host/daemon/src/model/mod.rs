//! The job model (`JobSpec`, `JobRecord`, validation): defined in `gantry-api`
//! (`gantry_api::model`, shared with the CLI and the tests) and re-exported here so daemon
//! code says `crate::model` and `crate::job_options`.
//!
//! Owns nothing of its own; see `host/api/src/model/mod.rs`.

pub use gantry_api::model::*;
