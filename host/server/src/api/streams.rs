//! Caps on open streams per caller: `GET /v1/stream` and `GET /v1/jobs/{id}/attach` each
//! hold a task and a connection for as long as the client stays, so one caller may have at
//! most `[http] max_streams_per_caller` of them open at once; one more is refused with 429
//! and a JSON error (`too-many-streams`) until one of its streams ends.
//!
//! The caller is its token's name when it has one, else its IP address (a daemon without
//! tokens; `local` when the request came over another transport). [`caller_key`] is the one
//! place that decides.
//!
//! Owns: the counts and the 429. Does not own authentication (`auth`) or the streams
//! themselves (`live`, `attach`).

use super::error::ApiError;
use crate::auth::Caller;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use gantry_http::ConnInfo;
use gantry_http::limits::{CallerPrefixes, caller_address};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// The open streams of every caller (a router extension).
#[derive(Debug, Clone)]
pub(super) struct StreamSlots {
    max: usize,
    prefixes: CallerPrefixes,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open stream, counted until dropped (move it into the task that feeds the stream).
#[derive(Debug)]
pub(super) struct StreamSlot {
    slots: StreamSlots,
    key: String,
}

/// Who is counted for a request: the token's name, else the peer's address.
pub(super) fn caller_key(
    caller: &Caller,
    peer: Option<IpAddr>,
    prefixes: CallerPrefixes,
) -> String {
    match caller {
        Caller::Token(id) => format!("token {}", id.name),
        _ => peer.map_or_else(
            || "local".to_string(),
            |ip| format!("address {}", caller_address(ip, prefixes)),
        ),
    }
}

impl StreamSlots {
    /// At most `max` open streams per caller (addresses grouped by `prefixes`).
    pub(super) fn new(max: usize, prefixes: CallerPrefixes) -> Self {
        Self {
            max,
            prefixes,
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn open(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for `key`, or 429 when it has `max` open.
    pub(super) fn acquire(&self, key: String) -> Result<StreamSlot, ApiError> {
        let mut open = self.open();
        let n = open.entry(key.clone()).or_insert(0);
        if *n >= self.max {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-streams",
                format!(
                    "{key} has {} streams open (/v1/stream and attach), the limit per caller ([http] max_streams_per_caller); close one first",
                    *n
                ),
            ));
        }
        *n += 1;
        drop(open);
        Ok(StreamSlot {
            slots: self.clone(),
            key,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open();
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// What a stream handler needs to take a slot once it has checked the request.
#[derive(Debug)]
pub(super) struct StreamGate {
    slots: StreamSlots,
    key: String,
}

impl StreamGate {
    /// Takes a slot (429 when the caller has its limit open).
    pub(super) fn open(self) -> Result<StreamSlot, ApiError> {
        self.slots.acquire(self.key)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for StreamGate {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let peer = parts.extensions.get::<ConnInfo>().map(|c| c.peer.ip());
        let slots = parts
            .extensions
            .get::<StreamSlots>()
            .cloned()
            .ok_or_else(|| ApiError::internal("the stream limits are not installed"))?;
        let key = caller_key(&caller, peer, slots.prefixes);
        Ok(Self { slots, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;
    use gantry_config::auth::Role;

    #[test]
    fn each_caller_has_its_own_cap_and_slots_come_back() {
        let prefixes = CallerPrefixes { v4: 32, v6: 64 };
        let slots = StreamSlots::new(2, prefixes);
        let alice = Caller::Token(Identity {
            name: "alice-laptop".into(),
            user: "alice".into(),
            accounts: vec![],
            role: Role::User,
            local_uid: None,
        });
        let key = caller_key(&alice, "10.0.0.1".parse().ok(), prefixes);
        assert_eq!(key, "token alice-laptop");
        let a = slots.acquire(key.clone()).expect("first");
        let _b = slots.acquire(key.clone()).expect("second");
        let e = slots.acquire(key.clone()).expect_err("third");
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        let open = caller_key(
            &Caller::Open(Role::User),
            "::ffff:10.0.0.9".parse().ok(),
            prefixes,
        );
        assert_eq!(open, "address 10.0.0.9");
        assert!(slots.acquire(open).is_ok(), "another caller");
        drop(a);
        assert!(slots.acquire(key).is_ok(), "a slot came back");
        assert_eq!(
            caller_key(&Caller::Open(Role::User), None, prefixes),
            "local"
        );
        let loopback = caller_key(
            &Caller::Open(Role::User),
            "127.0.0.41".parse().ok(),
            prefixes,
        );
        assert_eq!(
            loopback, "address 127.0.0.1",
            "the loopback range is one caller"
        );
    }
}
