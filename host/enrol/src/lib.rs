//! `gantry-enrol`: putting Gantry on a site. The cluster's certificate authority and the
//! certificates it signs (`pki`), join tokens and the one module that keeps them in the
//! store (`join_token`), `gantry init` on the controller (`init`) and `gantry agent join` on
//! each node (`join`).
//!
//! Owns: those. Does not own what the controller does with a join (its `enrolment`, which
//! calls [`join_token::consume`] and [`pki::ClusterCa::issue`]), the HTTP routes (the
//! server's `api::cluster_join`), the agent's run (`gantry-agent`) or the wire types
//! (`gantry_api::cluster_join`).
//!
//! Dependency direction: `gantry-api`, `gantry-config`, `gantry-store`; never the controller,
//! the server or the agent (`scripts/crate-rules`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod init;
pub mod join;
pub mod join_token;
pub mod pki;

/// Random bytes from the OS.
pub(crate) fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}
