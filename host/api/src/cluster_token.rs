//! The check both sides of the cluster protocol make of the cluster token: the agent of every
//! controller call, the controller of every heartbeat.
//!
//! Owns: [`token_matches`]. Does not own where the token comes from (`[cluster] token`,
//! `GANTRY_CLUSTER_TOKEN`) nor what a refusal answers (the daemon's `api::cluster`, `agent`).

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
