//! The verdict on a replica's port: who listens where its traffic would go (only the
//! replica's user, nobody yet, or other uids). `port_guard` reaches it from this node's
//! sockets and `remote_port` from an agent's answer; both use this type.
//!
//! Owns: `PortHolder`. Does not own finding the sockets or using the verdict.

/// Who listens where a replica's traffic would go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PortHolder {
    /// Only the replica's user.
    Replica,
    /// Nobody yet (the replica has not bound it).
    Nobody,
    /// Someone else (with or without the replica's user): these uids.
    Others(Vec<u32>),
}
