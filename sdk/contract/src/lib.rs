//! The policy contract (`wit/`, packages `gantry:policy@0.1.0`, `@0.2.0` and `@0.3.0`) as plain Rust.
//!
//! Owns: the data a policy sees ([`types`]), what each stage returns ([`stages`]), the
//! stage traits (the one definition of each stage's signature: plugins implement them,
//! and so does the host with its typed fault; [`traits`]), the tentative cluster model
//! placement authors and the host validator share ([`cluster`]), 0.2's incremental lists
//! ([`delta`]), and the mapping to the
//! types generated from `wit/`, as a macro both sides expand ([`wit_convert`]).
//! Does not own: wasm glue and bindings (in `gantry-sdk` for guests,
//! `gantry-plugin-runtime` for the host), the scheduling cycle (in `gantry-engine`), or
//! anything with I/O.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cluster;
pub mod delta;
pub mod gpu_usage;
pub mod stages;
pub mod traits;
pub mod types;
pub mod wit_convert;

pub use cluster::{BookError, ClusterModel, NODES_LABEL};
pub use gpu_usage::{BusyMarks, GpuUsageLabels};
pub use stages::*;
pub use traits::*;
pub use types::*;

/// The newest contract version: the WIT package version of `wit/<version>/` (tied
/// together by `tests/contract_version.rs`).
pub const CONTRACT_VERSION: &str = "0.3.0";

/// Every version the host serves, oldest first: 0.1 and 0.2 plugins keep loading beside 0.3.
pub const SERVED_VERSIONS: &[&str] = &["0.1.0", "0.2.0", "0.3.0"];

/// The served version a plugin built for contract `version` runs as: while the major
/// version is 0, major and minor must match one served version and a patch must be given
/// (`0.1.7` runs as `0.1.0`).
pub fn served_as(version: &str) -> Option<&'static str> {
    let mut theirs = version.split('.');
    let (major, minor, patch) = (theirs.next(), theirs.next(), theirs.next());
    patch?;
    SERVED_VERSIONS.iter().copied().find(|v| {
        let mut ours = v.split('.');
        ours.next() == major && ours.next() == minor
    })
}

/// Whether a plugin built for contract `version` can run on this host ([`served_as`]).
pub fn is_compatible(version: &str) -> bool {
    served_as(version).is_some()
}

/// The versions [`is_compatible`] accepts, as messages name them (`0.1.x, 0.2.x, 0.3.x`).
pub fn compatible_versions() -> String {
    SERVED_VERSIONS
        .iter()
        .map(|v| {
            let major_minor: Vec<&str> = v.split('.').take(2).collect();
            format!("{}.x", major_minor.join("."))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
