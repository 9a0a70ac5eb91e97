//! etcd's users for the client of `super` (issue 43, finding 13): logging in
//! (`/v3/auth/authenticate`) before the first call and again when etcd says the token is no
//! longer valid, recognising such answers, and [`accepts_anonymous`], whether the members
//! answer a client with no credentials at all.
//!
//! Owns: the login and its token, that question. Does not own the calls themselves
//! (`super::Etcd::call`) or what the daemon decides from the answer
//! (`leadership::etcd_trust`).

use super::{Etcd, EtcdConfig, Failure, b64};
use crate::StoreError;
use serde_json::json;

/// Whether the members answer a read of `config.prefix` from a client with no credentials
/// (no user, no client certificate): `Ok(true)` when they do, `Ok(false)` when they refuse
/// it (etcd's auth, or TLS that wants a client certificate), and an error when no member
/// answered at all (nothing can be said yet).
pub fn accepts_anonymous(config: &EtcdConfig) -> Result<bool, StoreError> {
    let client = Etcd::new(&config.anonymous())?;
    let key = config.prefix.as_bytes();
    // No end above the prefix: every key from it (etcd's `\0`).
    let end = crate::state::prefix_end(key).unwrap_or_else(|| vec![0]);
    let read = json!({"key": b64(key), "range_end": b64(&end), "limit": "1", "keys_only": true});
    match client.call_once("/v3/kv/range", &read, None) {
        Ok(_) => Ok(true),
        Err(Failure::Refused(_) | Failure::Unauthenticated(_)) => Ok(false),
        // Members that want a client certificate end the TLS handshake of a client without
        // one, which looks like a member that is down: if the configured client gets an
        // answer, the members are up and refused the anonymous one.
        Err(Failure::Unreachable(message)) => {
            match Etcd::new(config)?.call("/v3/kv/range", &read) {
                Ok(_) => Ok(false),
                Err(_) => Err(client.error(message)),
            }
        }
    }
}

/// Why [`Etcd::login`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// etcd answered and refused the user or its password.
    #[error("{0}")]
    Refused(StoreError),
    /// No member answered.
    #[error("{0}")]
    Unreachable(StoreError),
}

impl Etcd {
    /// The token of the current login, logging in when there is none.
    pub(super) fn token(&self) -> Result<String, StoreError> {
        if let Some(token) = self.token.lock().ok().and_then(|t| t.clone()) {
            return Ok(token);
        }
        let Some((user, password)) = &self.login else {
            return Err(self.error("no etcd user is configured".into()));
        };
        let answer = self
            .call_once(
                "/v3/auth/authenticate",
                &json!({"name": user, "password": password.0}),
                None,
            )
            .map_err(|f| match f {
                Failure::Refused(m) | Failure::Unauthenticated(m) => self.error(format!(
                    "etcd refused to authenticate user {user:?} (store.username and its password): {m}"
                )),
                Failure::Unreachable(m) => self.error(m),
            })?;
        let token = answer["token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                self.error(format!(
                    "etcd did not authenticate user {user:?}: its answer has no token (is auth enabled?)"
                ))
            })?
            .to_owned();
        if let Ok(mut t) = self.token.lock() {
            *t = Some(token.clone());
        }
        Ok(token)
    }

    /// Logs in now when a user is configured (`Ok(false)` when none is): an error says
    /// whether etcd answered and refused the user ([`LoginError::Refused`]) or could not
    /// be reached.
    pub fn login(&self) -> Result<bool, LoginError> {
        if self.login.is_none() {
            return Ok(false);
        }
        if let Ok(mut t) = self.token.lock() {
            *t = None;
        }
        let probe = json!({"key": b64(b"/"), "limit": "1", "keys_only": true});
        let token = self.token().map_err(|e| {
            if e.to_string().contains("refused to authenticate")
                || e.to_string().contains("did not authenticate")
            {
                LoginError::Refused(e)
            } else {
                LoginError::Unreachable(e)
            }
        })?;
        match self.call_once("/v3/kv/range", &probe, Some(&token)) {
            Ok(_) | Err(Failure::Refused(_)) => Ok(true),
            Err(f @ Failure::Unauthenticated(_)) => Err(LoginError::Refused(self.failed(f))),
            Err(f @ Failure::Unreachable(_)) => Err(LoginError::Unreachable(self.failed(f))),
        }
    }

    /// Drops `token` (etcd no longer takes it), unless another call already replaced it.
    pub(super) fn forget_token(&self, token: &str) {
        if let Ok(mut t) = self.token.lock()
            && t.as_deref() == Some(token)
        {
            *t = None;
        }
    }
}

/// Whether an error answer says the request's token is missing, invalid or expired (etcd
/// sends these as gRPC codes Unauthenticated and InvalidArgument).
pub(super) fn is_auth_error(text: &str) -> bool {
    [
        "invalid auth token",
        "user name is empty",
        "auth token is expired",
    ]
    .iter()
    .any(|m| text.contains(m))
}
