//! Identity at request time: the lookup of a presented bearer token in constant time
//! against the configured tokens, the role checks handlers ask for, and the start-up rule
//! "no tokens only on loopback".
//!
//! Owns: [`Tokens`], [`Identity`], [`Caller`] and what a caller may do, [`Mode`]. Does not
//! own the token file model (`gantry_config::auth`: roles, entries, their checks, new
//! tokens), HTTP (the `api::auth` middleware maps [`Denied`] to 401/403) or jobs: it only
//! knows "whose job is this" as a user name given to it.

use gantry_config::auth::{AuthConfig, AuthError, Role};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::Arc;

/// The user every job of a caller without identity is charged to (limits, accounting,
/// fair-share, job lists), whatever name its request gives, unless `auth.anonymous_role`
/// trusts such callers as admins.
pub const ANONYMOUS_USER: &str = "anonymous";

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

impl Tokens {
    /// Checks and indexes the entries of `[auth]`.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthError> {
        let hashes = gantry_config::auth::check_tokens(config)?;
        let entries: Vec<([u8; 32], Identity)> = hashes
            .into_iter()
            .zip(&config.tokens)
            .map(|(hash, e)| {
                let identity = Identity {
                    name: e.name.clone(),
                    user: e.user.clone(),
                    accounts: e.accounts.clone(),
                    role: e.role,
                    local_uid: None,
                };
                (hash, identity)
            })
            .collect();
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
        let user = gantry_http::local_socket::account_name(uid)?;
        let role = if uid == 0 || uid == gantry_http::local_socket::own_uid() {
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

#[cfg(test)]
pub(crate) mod tests;
