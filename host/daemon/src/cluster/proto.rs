//! The controller–agent wire protocol: its types, paths and version are defined in
//! `gantry-api` (`gantry_api::cluster`, re-exported here so daemon code says
//! `crate::cluster::proto`); this module adds the check both sides make of the cluster token.
//!
//! Owns: [`token_matches`]. Does not own the wire types (`gantry-api`) or either side's
//! behaviour (`scheduler::remote`, `api::cluster`, `agent`).

pub use gantry_api::cluster::*;

/// Whether the bearer token in `authorization` (the header's value) is `expected`, compared in
/// constant time whatever the lengths (both are hashed first, so neither a length nor a prefix
/// leaks through timing). An empty `expected` matches nothing.
pub fn token_matches(authorization: Option<&str>, expected: &str) -> bool {
    use sha2::{Digest, Sha256};
    let given = authorization
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or_default();
    let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
    let wanted: [u8; 32] = Sha256::digest(expected.as_bytes()).into();
    let diff = given
        .iter()
        .zip(wanted.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(diff) == 0 && !expected.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_exactly_and_never_when_none_is_configured() {
        assert!(token_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3creT"), "s3cret"));
        assert!(!token_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!token_matches(Some("s3cret"), "s3cret"));
        assert!(!token_matches(None, "s3cret"));
        assert!(!token_matches(Some("Bearer "), ""));
    }
}
