//! Join tokens: what `gantry init` and `gantry token join` make and a node spends in
//! `gantry agent join`. A token is `gjt_<id>.<secret>` (8 and 32 hex digits, from the OS's
//! random source); the store keeps its id, the SHA-256 of its secret, when it expires, how
//! many nodes it may still join and which did. It buys nothing but a join (the join route
//! takes no other credential and no other route takes it), for a bounded time (at most a
//! week) and a bounded number of nodes; a spent, expired or revoked token is refused by name.
//!
//! Owns: the format and every write of join tokens to the store (meta key
//! [`JOIN_TOKENS_META`]): [`create`], [`consume`], [`revoke`]. Does not own who may call them
//! (the daemon's routes and roles) or what a join gives (the controller's `enrolment`).

use gantry_api::cluster_join::JoinTokenView;
use gantry_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Mutex;

/// The store's meta key of the token list.
pub const JOIN_TOKENS_META: &str = "join_tokens";
/// The prefix of join tokens.
pub const PREFIX: &str = "gjt_";
/// Longest validity, seconds (a week).
pub const MAX_TTL_S: u64 = 7 * 24 * 3600;
/// Most nodes one token may join.
pub const MAX_USES: u32 = 1000;
/// How long a dead token stays listed, ms.
const KEEP_DEAD_MS: u64 = 7 * 24 * 3600 * 1000;

/// One read-modify-write of the list at a time in this process (the leader's).
static WRITER: Mutex<()> = Mutex::new(());

/// A join token in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinTokenRecord {
    /// The public id (8 hex digits).
    pub id: String,
    /// Hex SHA-256 of the secret.
    pub secret_sha256: String,
    /// Made, ms since the epoch.
    pub created_ms: u64,
    /// Expires, ms since the epoch.
    pub expires_ms: u64,
    /// Nodes it may join in all.
    pub max_uses: u32,
    /// Nodes that joined with it.
    pub used_by: Vec<String>,
    /// Who made it.
    pub created_by: String,
    /// Revoked by an administrator.
    pub revoked: bool,
}

impl JoinTokenRecord {
    /// How `gantry token list` shows it at `now_ms`.
    pub fn view(&self, now_ms: u64) -> JoinTokenView {
        let used = u32::try_from(self.used_by.len()).unwrap_or(u32::MAX);
        let state = if self.revoked {
            "revoked"
        } else if used >= self.max_uses {
            "used"
        } else if now_ms >= self.expires_ms {
            "expired"
        } else {
            "valid"
        };
        JoinTokenView {
            id: format!("{PREFIX}{}", self.id),
            state: state.into(),
            created_ms: self.created_ms,
            expires_ms: self.expires_ms,
            uses_left: self.max_uses.saturating_sub(used),
            used_by: self.used_by.clone(),
            created_by: self.created_by.clone(),
        }
    }
}

/// Why a join token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefusal {
    /// Not `gjt_<8 hex>.<32 hex>`.
    #[error("not a join token (gjt_<id>.<secret>, as `gantry init` or `gantry token join` print)")]
    Malformed,
    /// No such token, or a wrong secret.
    #[error("unknown join token gjt_{0} (or a wrong secret)")]
    Unknown(String),
    /// Revoked.
    #[error("join token gjt_{0} was revoked")]
    Revoked(String),
    /// Past its time.
    #[error("join token gjt_{id} expired {ago_s} s ago: make another with `gantry token join`")]
    Expired {
        /// Which.
        id: String,
        /// How long ago.
        ago_s: u64,
    },
    /// Every use spent.
    #[error(
        "join token gjt_{id} was already used (by {}): make another with `gantry token join`",
        used_by.join(", ")
    )]
    UsedUp {
        /// Which.
        id: String,
        /// The nodes that used it.
        used_by: Vec<String>,
    },
    /// Bad limits asked for.
    #[error("{0}")]
    BadRequest(String),
}

/// A token could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MakeError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No random bytes.
    #[error("cannot read random bytes from /dev/urandom: {0}")]
    Random(std::io::Error),
}

fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// `gjt_<id>.<secret>` split into its parts, checked.
pub fn parse(token: &str) -> Result<(String, String), JoinRefusal> {
    let rest = token
        .trim()
        .strip_prefix(PREFIX)
        .ok_or(JoinRefusal::Malformed)?;
    let (id, secret) = rest.split_once('.').ok_or(JoinRefusal::Malformed)?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(id, 8) || !hex(secret, 32) {
        return Err(JoinRefusal::Malformed);
    }
    Ok((id.to_ascii_lowercase(), secret.to_ascii_lowercase()))
}

/// Every token the store holds.
pub fn list(store: &Store) -> Result<Vec<JoinTokenRecord>, StoreError> {
    Ok(store
        .meta::<Vec<JoinTokenRecord>>(JOIN_TOKENS_META)?
        .unwrap_or_default())
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    WRITER.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new token valid for `ttl_s` seconds and `uses` nodes, made by `by`: the token (to show
/// once) and its record. Dead tokens older than a week are dropped from the list.
pub fn create(
    store: &Store,
    ttl_s: u64,
    uses: u32,
    by: &str,
    now_ms: u64,
) -> Result<Result<(String, JoinTokenRecord), JoinRefusal>, MakeError> {
    if !(60..=MAX_TTL_S).contains(&ttl_s) {
        return Ok(Err(JoinRefusal::BadRequest(format!(
            "ttl_s must be 60 to {MAX_TTL_S} (a week)"
        ))));
    }
    if !(1..=MAX_USES).contains(&uses) {
        return Ok(Err(JoinRefusal::BadRequest(format!(
            "uses must be 1 to {MAX_USES}"
        ))));
    }
    let random = crate::random_bytes::<20>().map_err(MakeError::Random)?;
    let id = hex::encode(&random[..4]);
    let secret = hex::encode(&random[4..]);
    let record = JoinTokenRecord {
        id: id.clone(),
        secret_sha256: sha256_hex(&secret),
        created_ms: now_ms,
        expires_ms: now_ms + ttl_s * 1000,
        max_uses: uses,
        used_by: Vec::new(),
        created_by: by.to_string(),
        revoked: false,
    };
    let _writer = lock();
    let mut all = list(store)?;
    all.retain(|t| t.expires_ms.saturating_add(KEEP_DEAD_MS) > now_ms);
    all.push(record.clone());
    store.set_meta(JOIN_TOKENS_META, &all)?;
    store.flush()?;
    Ok(Ok((format!("{PREFIX}{id}.{secret}"), record)))
}

/// Spends one use of `token` for node `node` at `now_ms`, durably, or says why not.
pub fn consume(
    store: &Store,
    token: &str,
    node: &str,
    now_ms: u64,
) -> Result<Result<JoinTokenRecord, JoinRefusal>, StoreError> {
    let (id, secret) = match parse(token) {
        Ok(parts) => parts,
        Err(e) => return Ok(Err(e)),
    };
    let _writer = lock();
    let mut all = list(store)?;
    let wanted = sha256_hex(&secret);
    let Some(record) = all.iter_mut().find(|t| t.id == id) else {
        return Ok(Err(JoinRefusal::Unknown(id)));
    };
    let same = record
        .secret_sha256
        .bytes()
        .zip(wanted.bytes())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0;
    if !same {
        return Ok(Err(JoinRefusal::Unknown(id)));
    }
    if record.revoked {
        return Ok(Err(JoinRefusal::Revoked(id)));
    }
    if record.used_by.len() >= record.max_uses as usize {
        return Ok(Err(JoinRefusal::UsedUp {
            id,
            used_by: record.used_by.clone(),
        }));
    }
    if now_ms >= record.expires_ms {
        let ago_s = (now_ms - record.expires_ms) / 1000;
        return Ok(Err(JoinRefusal::Expired { id, ago_s }));
    }
    record.used_by.push(node.to_string());
    let spent = record.clone();
    store.set_meta(JOIN_TOKENS_META, &all)?;
    store.flush()?;
    Ok(Ok(spent))
}

/// Revokes the token whose id is `id` (`gjt_<id>`, `gjt_<id>.` or the whole token):
/// whether there was one.
pub fn revoke(store: &Store, id: &str) -> Result<bool, StoreError> {
    let id = id.trim().trim_start_matches(PREFIX);
    let id = id
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let _writer = lock();
    let mut all = list(store)?;
    let Some(record) = all.iter_mut().find(|t| t.id == id) else {
        return Ok(false);
    };
    record.revoked = true;
    store.set_meta(JOIN_TOKENS_META, &all)?;
    store.flush()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_joins_its_count_of_nodes_until_it_expires_or_is_revoked() {
        let store = Store::temporary().unwrap();
        let now = 1_000_000;
        let (token, record) = create(&store, 3600, 2, "root", now).unwrap().unwrap();
        assert!(
            token.starts_with("gjt_") && token.len() == 4 + 8 + 1 + 32,
            "{token}"
        );
        assert_eq!(record.view(now).state, "valid");
        assert_eq!(
            consume(&store, &token, "a", now + 1)
                .unwrap()
                .unwrap()
                .used_by,
            ["a"]
        );
        // A wrong secret under the right id is unknown, and spends nothing.
        let wrong = format!("{}{}", &token[..13], "0".repeat(32));
        assert_eq!(
            consume(&store, &wrong, "x", now).unwrap(),
            Err(JoinRefusal::Unknown(record.id.clone()))
        );
        consume(&store, &token, "b", now + 2).unwrap().unwrap();
        let used = consume(&store, &token, "c", now + 3).unwrap().unwrap_err();
        assert!(
            used.to_string().contains("already used (by a, b)"),
            "{used}"
        );
        assert_eq!(list(&store).unwrap()[0].view(now).state, "used");

        let (late, _) = create(&store, 60, 1, "root", now).unwrap().unwrap();
        let expired = consume(&store, &late, "d", now + 61_000)
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(expired, JoinRefusal::Expired { ago_s: 1, .. }),
            "{expired}"
        );

        let (gone, rec) = create(&store, 600, 5, "root", now).unwrap().unwrap();
        assert!(revoke(&store, &format!("gjt_{}", rec.id)).unwrap());
        assert_eq!(
            consume(&store, &gone, "e", now).unwrap(),
            Err(JoinRefusal::Revoked(rec.id))
        );
        assert!(!revoke(&store, "gjt_ffffffff").unwrap());
        assert_eq!(
            consume(&store, "gjt_x.y", "f", now).unwrap(),
            Err(JoinRefusal::Malformed)
        );
        assert!(create(&store, 10, 1, "root", now).unwrap().is_err());
        assert!(create(&store, 600, 0, "root", now).unwrap().is_err());
    }
}
