//! Identity and roles: API tokens from the config (`[[auth.tokens]]`, stored as the
//! sha256 of the token, never the token), the lookup of a presented bearer token in
//! constant time, the role checks handlers ask for, and the start-up rule "no tokens
//! only on loopback".
//!
//! Owns: [`Role`], [`TokenEntry`], [`AuthConfig`], [`Tokens`], [`Caller`] and what a
//! caller may do. Does not own HTTP (the `api::auth` middleware maps [`Denied`] to
//! 401/403) or jobs: it only knows "whose job is this" as a user name given to it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;

/// The user every job of a caller without identity is charged to (limits, accounting,
/// fair-share, job lists), whatever name its request gives, unless `auth.anonymous_role`
/// trusts such callers as admins.
pub const ANONYMOUS_USER: &str = "anonymous";

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

/// Who is calling, as far as the handlers need to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Token name.
    pub name: String,
    /// User.
    pub user: String,
    /// Accounts (first is the default).
    pub accounts: Vec<String>,
    /// Role.
    pub role: Role,
    /// The caller's uid when the kernel named it (the Unix socket); `None` for a token.
    pub local_uid: Option<u32>,
}

/// The caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No tokens are configured and the request came over TCP: it has no identity, and the
    /// role `auth.anonymous_role` (default `user`). Its jobs run as
    /// `execution.fallback_user` (`JobSpec::anonymous`) and, below admin, belong to the one
    /// user [`ANONYMOUS_USER`].
    Open(Role),
    /// A valid token, or a local account on the Unix socket (`Identity::local_uid`).
    Token(Identity),
}

/// A refusal, for a 403.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The request field at fault, if any.
    pub field: Option<&'static str>,
    /// Why.
    pub message: String,
}

impl Caller {
    /// The caller's role and the user it acts as ([`ANONYMOUS_USER`] without identity).
    pub fn role_and_user(&self) -> (Role, &str) {
        match self {
            Caller::Token(id) => (id.role, id.user.as_str()),
            Caller::Open(role) => (*role, ANONYMOUS_USER),
        }
    }

    /// Allows callers with at least `role`; `what` names the action for the message.
    pub fn require(&self, role: Role, what: &str) -> Result<(), Denied> {
        match self {
            Caller::Token(id) if id.role < role => Err(Denied {
                field: None,
                message: format!(
                    "{what} needs role {}; token {} has role {}",
                    role.name(),
                    id.name,
                    id.role.name()
                ),
            }),
            Caller::Open(own) if *own < role => Err(Denied {
                field: None,
                message: format!(
                    "{what} needs role {}; a caller without identity (TCP without a token) has role {} (auth.anonymous_role): use the Unix socket or a token",
                    role.name(),
                    own.name()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Allows the owner of a job (`owner` is its user) and operators and admins.
    pub fn require_owner(&self, owner: &str, what: &str) -> Result<(), Denied> {
        match self {
            Caller::Token(id) if id.role < Role::Operator && id.user != owner => Err(Denied {
                field: None,
                message: format!(
                    "{what}: the job belongs to user {owner}, not {}; only its owner or an operator may",
                    id.user
                ),
            }),
            Caller::Open(role) if *role < Role::Operator && owner != ANONYMOUS_USER => {
                Err(Denied {
                    field: None,
                    message: format!(
                        "{what}: the job belongs to user {owner}; a caller without identity (TCP without a token) may act only on anonymous jobs: use the Unix socket or a token"
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// Sets a submitted job's user and account from the token: a different `user` or an
    /// account outside the token's is refused; an empty account is the token's first. Root
    /// on the Unix socket may submit for any user and account (as SLURM's root may).
    pub fn stamp(&self, user: &mut String, account: &mut String) -> Result<(), Denied> {
        let id = match self {
            Caller::Token(id) => id,
            // Whatever name it gives, one user for limits, accounting and fair-share.
            Caller::Open(role) if *role < Role::Admin => {
                *user = ANONYMOUS_USER.to_owned();
                *account = ANONYMOUS_USER.to_owned();
                return Ok(());
            }
            Caller::Open(_) => return Ok(()),
        };
        if id.local_uid == Some(0) && !user.is_empty() {
            if account.is_empty() {
                account.clone_from(user);
            }
            return Ok(());
        }
        if !user.is_empty() && *user != id.user {
            return Err(Denied {
                field: Some("user"),
                message: format!("token {} acts as user {}, not {user}", id.name, id.user),
            });
        }
        if account.is_empty() {
            // `Tokens::new` refuses entries without accounts; `user` is a safe fallback.
            account.clone_from(id.accounts.first().unwrap_or(&id.user));
        } else if !id.accounts.contains(account) {
            return Err(Denied {
                field: Some("account"),
                message: format!(
                    "user {} may not charge account {account} (allowed: {})",
                    id.user,
                    id.accounts.join(", ")
                ),
            });
        }
        user.clone_from(&id.user);
        Ok(())
    }
}

/// The configured tokens, ready for lookup, and the roles of local accounts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    entries: Arc<Vec<([u8; 32], Identity)>>,
    local_roles: Arc<std::collections::BTreeMap<String, Role>>,
    anonymous_role: Role,
}

/// The sha256 of a token, as it is written in the config (lowercase hex).
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Tokens {
    /// Checks and indexes the entries of `[auth]`.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthError> {
        let mut entries: Vec<([u8; 32], Identity)> = Vec::new();
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
            if entries
                .iter()
                .any(|(h, id)| *h == hash || id.name == e.name)
            {
                return Err(bad("another token has the same name or sha256"));
            }
            let identity = Identity {
                name: e.name.clone(),
                user: e.user.clone(),
                accounts: e.accounts.clone(),
                role: e.role,
                local_uid: None,
            };
            entries.push((hash, identity));
        }
        Ok(Self {
            entries: Arc::new(entries),
            local_roles: Arc::new(config.local_roles.clone()),
            anonymous_role: config.anonymous_role,
        })
    }

    /// The caller of a TCP request on a daemon without tokens.
    pub fn anonymous(&self) -> Caller {
        Caller::Open(self.anonymous_role)
    }

    /// The identity of the local account `uid` calling over the Unix socket (`None` when it
    /// has no account name): root and the daemon's own account are admins, others have their
    /// `auth.local_roles` entry or are users; their one account is their name.
    pub fn local(&self, uid: u32) -> Option<Identity> {
        let user = crate::local_socket::account_name(uid)?;
        let role = if uid == 0 || uid == crate::local_socket::own_uid() {
            Role::Admin
        } else {
            self.local_roles.get(&user).copied().unwrap_or(Role::User)
        };
        Some(Identity {
            name: format!("unix:{user}"),
            user: user.clone(),
            accounts: vec![user],
            role,
            local_uid: Some(uid),
        })
    }

    /// Whether any token is configured (then every request needs one).
    pub fn enabled(&self) -> bool {
        !self.entries.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The identity of `token`, comparing its hash with every entry in constant time.
    pub fn lookup(&self, token: &str) -> Option<Identity> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (hash, identity) in self.entries.iter() {
            let diff = hash
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if std::hint::black_box(diff) == 0 {
                found = Some(identity);
            }
        }
        found.cloned()
    }
}

/// How the daemon authenticates, decided once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Tokens are required (their count).
    Tokens(usize),
    /// No tokens, on loopback.
    OpenLoopback,
    /// No tokens on a public address, explicitly allowed.
    OpenAllowed,
}

/// Decides the mode for a daemon bound to `addr`, refusing an unauthenticated
/// non-loopback address unless `allow_unauthenticated` is set.
pub fn startup_mode(
    tokens: &Tokens,
    config: &AuthConfig,
    addr: SocketAddr,
) -> Result<Mode, AuthError> {
    match (tokens.len(), addr.ip().is_loopback()) {
        (0, true) => Ok(Mode::OpenLoopback),
        (0, false) if config.allow_unauthenticated => Ok(Mode::OpenAllowed),
        (0, false) => Err(AuthError::Unauthenticated(addr)),
        (n, _) => Ok(Mode::Tokens(n)),
    }
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

#[cfg(test)]
pub(crate) mod tests;
