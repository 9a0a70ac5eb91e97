//! The token file model of `[auth]`: API tokens (`[[auth.tokens]]`, stored as the sha256
//! of the token, never the token), the roles, the local accounts' roles, the checks of the
//! entries, and the making of a new token and its TOML snippet (`gantry token create`).
//!
//! Owns: [`Role`], [`TokenEntry`], [`AuthConfig`], [`AuthError`], [`check_tokens`],
//! [`token_sha256`], [`generate_token`], [`snippet`]. Does not own the lookup of a presented
//! token or what a caller may do (the daemon's `auth`: `Tokens`, `Caller`), or HTTP.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::net::SocketAddr;

/// What a token may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Submit; see jobs, nodes and the queue; see logs of and cancel own jobs.
    #[default]
    User,
    /// Also: cancel any job and see any job's logs, events and decisions.
    Operator,
    /// Also: upload plugins, change or roll back the pipeline, shadow, replay.
    Admin,
}

impl Role {
    /// The name used in config and messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Parses `user`, `operator` or `admin`.
    pub fn parse(text: &str) -> Option<Self> {
        [Role::User, Role::Operator, Role::Admin]
            .into_iter()
            .find(|r| r.name() == text)
    }
}

/// One `[[auth.tokens]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    /// A label for logs (unique).
    pub name: String,
    /// Hex sha256 of the token.
    pub sha256: String,
    /// The user the token acts as.
    pub user: String,
    /// Accounts it may charge; the first is the default.
    pub accounts: Vec<String>,
    /// Its role.
    pub role: Role,
}

/// The `[auth]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Serve without tokens on a non-loopback address (loudly warned; off by default).
    pub allow_unauthenticated: bool,
    /// The tokens; none means no authentication over TCP (loopback only, unless allowed
    /// above), where a request then has no identity (its jobs run as the fallback user).
    pub tokens: Vec<TokenEntry>,
    /// Roles of local accounts calling over the Unix socket, by account name (e.g.
    /// `{ alice = "operator" }`); root and the daemon's own account are admins, every other
    /// account a user.
    pub local_roles: std::collections::BTreeMap<String, Role>,
    /// The role of a caller without identity (TCP without tokens; default `user`): as a
    /// user it submits as the one user `anonymous` and sees only anonymous jobs whole.
    /// `admin` trusts every local process as root on the socket (a single-user machine
    /// only: it may drain nodes, change the policy and name any user), and is announced.
    pub anonymous_role: Role,
}

/// Why a config's `[auth]` is unusable, or why the daemon refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A token entry is malformed.
    #[error("auth.tokens[{index}] ({name}): {message}")]
    Entry {
        /// Position in the list.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// No tokens and a non-loopback address.
    #[error(
        "refusing to listen on {0} without authentication: add [[auth.tokens]] (see `gantry token create`), listen on 127.0.0.1, or set auth.allow_unauthenticated = true"
    )]
    Unauthenticated(SocketAddr),
}

/// The sha256 of a token, as it is written in the config (lowercase hex).
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Checks the entries of `[auth]` and returns each token's sha256, in their order: every
/// `sha256` is 64 hex digits, names and users are not empty, every entry lists a non-empty
/// account, and no two entries share a name or a hash.
pub fn check_tokens(config: &AuthConfig) -> Result<Vec<[u8; 32]>, AuthError> {
    let mut hashes: Vec<[u8; 32]> = Vec::new();
    for (index, e) in config.tokens.iter().enumerate() {
        let bad = |message: &str| AuthError::Entry {
            index,
            name: e.name.clone(),
            message: message.into(),
        };
        let mut hash = [0u8; 32];
        hex::decode_to_slice(e.sha256.trim(), &mut hash)
            .map_err(|_| bad("sha256 must be 64 hex digits (the token's sha256)"))?;
        if e.name.is_empty() || e.user.is_empty() {
            return Err(bad("name and user must not be empty"));
        }
        if e.accounts.is_empty() || e.accounts.iter().any(String::is_empty) {
            return Err(bad("accounts must list at least one non-empty account"));
        }
        let seen = hashes
            .iter()
            .zip(&config.tokens)
            .any(|(h, other)| *h == hash || other.name == e.name);
        if seen {
            return Err(bad("another token has the same name or sha256"));
        }
        hashes.push(hash);
    }
    Ok(hashes)
}

/// A new random token: `gantry_` and 64 hex digits from the OS's random source.
pub fn generate_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(format!("gantry_{}", hex::encode(bytes)))
}

/// The `[[auth.tokens]]` TOML for an entry.
pub fn snippet(entry: &TokenEntry) -> Result<String, toml::ser::Error> {
    #[derive(Serialize)]
    struct File<'a> {
        auth: Section<'a>,
    }
    #[derive(Serialize)]
    struct Section<'a> {
        tokens: [&'a TokenEntry; 1],
    }
    toml::to_string(&File {
        auth: Section { tokens: [entry] },
    })
}
