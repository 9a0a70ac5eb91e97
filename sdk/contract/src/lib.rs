//! The policy contract (`wit/`, package `gantry:policy@0.1.0`) as plain Rust.
//!
//! Owns: the data a policy sees ([`types`]), what each stage returns ([`stages`]), the
//! stage traits (the one definition of each stage's signature: plugins implement them,
//! and so does the host with its typed fault; [`traits`]), the tentative cluster model
//! placement authors and the host validator share ([`cluster`]), and the mapping to the
//! types generated from `wit/`, as a macro both sides expand ([`wit_convert`]).
//! Does not own: wasm glue and bindings (in `gantry-sdk` for guests,
//! `gantry-plugin-runtime` for the host), the scheduling cycle (in `gantry-engine`), or
//! anything with I/O.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cluster;
pub mod stages;
pub mod traits;
pub mod types;
pub mod wit_convert;

pub use cluster::{BookError, ClusterModel, NODES_LABEL};
pub use stages::*;
pub use traits::*;
pub use types::*;

/// The contract version this crate mirrors: the WIT package version of `wit/<version>/`
/// (tied together by `tests/contract_version.rs`).
pub const CONTRACT_VERSION: &str = "0.1.0";

/// Whether a plugin built for contract `version` can run on this one: while the major version
/// is 0, major and minor must match and a patch must be given (`0.1.7` runs on `0.1.0`).
pub fn is_compatible(version: &str) -> bool {
    let mut ours = CONTRACT_VERSION.split('.');
    let mut theirs = version.split('.');
    ours.next() == theirs.next() && ours.next() == theirs.next() && theirs.next().is_some()
}

/// The versions [`is_compatible`] accepts, as messages name them (`0.1.x`).
pub fn compatible_versions() -> String {
    let major_minor: Vec<&str> = CONTRACT_VERSION.split('.').take(2).collect();
    format!("{}.x", major_minor.join("."))
}
