//! How far a submitter is trusted with a job's priority: a `tier` above its queue's
//! `limits.max_user_tier` is only a privileged submitter's. The server decides which a caller
//! is (`auth_submit.rs`, from its token's role); the controller only reads the answer.
//!
//! Owns: [`Submitter`]. Does not own who is privileged (the server's `auth_submit`) nor
//! the limits (`submit_limits.rs`).

/// How far a submitter is trusted with a job's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitter {
    /// Bound by its queue's `limits.max_user_tier`.
    User,
    /// An operator or admin: any tier.
    Privileged,
}
