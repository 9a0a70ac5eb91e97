//! The policy contract (`wit/`, package `gantry:policy@0.1.0`) as plain Rust.
//!
//! Owns: the data a policy sees ([`types`]), what each stage returns ([`stages`]), the
//! stage traits a native or SDK plugin implements ([`traits`]), and the tentative
//! cluster model placement authors and the host validator share ([`cluster`]).
//! Does not own: wasm glue (in `gantry-sdk` for guests, `gantry-plugin-runtime` for the
//! host), the scheduling cycle (in `gantry-engine`), or anything with I/O.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cluster;
pub mod stages;
pub mod traits;
pub mod types;

pub use cluster::{BookError, ClusterModel};
pub use stages::*;
pub use traits::*;
pub use types::*;

/// The contract version this crate mirrors (the WIT package version).
pub const CONTRACT_VERSION: &str = "0.1.0";
