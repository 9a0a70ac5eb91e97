//! The check both sides of the cluster protocol make of the cluster token: the agent of every
//! controller call, the controller of every heartbeat.
//!
//! A node's own credential is derived from the cluster token and its name
//! ([`node_credential`], HMAC-SHA-256): the controller recomputes it for the name an agent
//! gives, so an agent that holds only its credential (a joined one) can speak for its node
//! and no other, and the controller need not store one per node.
//!
//! Owns: [`token_matches`], [`node_credential`]. Does not own where the token comes from (`[cluster] token`,
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

/// The prefix of node credentials.
pub const NODE_CREDENTIAL_PREFIX: &str = "gnc_";

/// Node `node`'s credential under the cluster token `cluster_token`: `gnc_` and the hex
/// HMAC-SHA-256 (RFC 2104) of the node's name keyed with the token. Empty when the token is.
pub fn node_credential(cluster_token: &str, node: &str) -> String {
    if cluster_token.is_empty() {
        return String::new();
    }
    let mac = hmac_sha256(cluster_token.as_bytes(), node.as_bytes());
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("{NODE_CREDENTIAL_PREFIX}{hex}")
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_and_credentials_differ_by_node_and_token() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // RFC 4231, test case 6: a key longer than the block.
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        let a = node_credential("a-cluster-token-of-32-bytes....", "gpu-1");
        assert!(a.starts_with(NODE_CREDENTIAL_PREFIX) && a.len() == 4 + 64);
        assert_ne!(
            a,
            node_credential("a-cluster-token-of-32-bytes....", "gpu-2")
        );
        assert_ne!(
            a,
            node_credential("another-cluster-token-32-bytes.", "gpu-1")
        );
        assert_eq!(node_credential("", "gpu-1"), "");
    }

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
