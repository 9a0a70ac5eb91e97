//! Authentication on the HTTP side: a middleware that turns the `Authorization:
//! Bearer <token>` header, or the kernel's word on a Unix-socket connection
//! (`gantry_http::local_socket::PeerCred`), into a [`Caller`] (401 when tokens are configured and
//! a TCP request has none or an unknown one), the extractor handlers take it with, and the
//! 403 mapping of a [`Denied`].
//!
//! Open without a token: `GET /v1/health` (liveness probes) and `GET /metrics`
//! (Prometheus scrapers usually carry no token; it exposes counters and gauges, no
//! job names, users or logs). Everything else, unknown paths included, needs a token
//! once any is configured.
//!
//! Owns: header parsing and the 401/403 bodies. Does not own who may do what
//! (`crate::auth`) or job ownership (handlers pass the job's user).

use super::error::ApiError;
use crate::auth::{Caller, Denied, Tokens};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gantry_http::local_socket::PeerCred;

/// Paths anyone may call, token or not.
pub const OPEN_PATHS: [&str; 2] = ["/v1/health", "/metrics"];

impl From<Denied> for ApiError {
    fn from(d: Denied) -> Self {
        ApiError {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            message: d.message,
            field: d.field.map(str::to_string),
        }
    }
}

fn unauthorized(message: &str) -> Response {
    let mut resp = ApiError {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthenticated",
        message: message.into(),
        field: Some("authorization".into()),
    }
    .into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"gantry\""),
    );
    resp
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(parts: &Request) -> Result<Option<&str>, &'static str> {
    let Some(value) = parts.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| "the Authorization header is not ASCII")?;
    let (scheme, token) = text
        .split_once(' ')
        .ok_or("the Authorization header must be `Bearer <token>`")?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err("the Authorization header must be `Bearer <token>`");
    }
    Ok(Some(token.trim()))
}

/// Resolves the caller of every request and stores it in the request's extensions. Over
/// the Unix socket the kernel names the caller (a bearer token, if sent, is checked instead);
/// over TCP a token does, or nobody (`Caller::Open`, with `auth.anonymous_role`) when none is
/// configured.
pub(super) async fn authenticate(
    State(tokens): State<Tokens>,
    mut req: Request,
    next: Next,
) -> Response {
    let local = req
        .extensions()
        .get::<axum::extract::ConnectInfo<PeerCred>>()
        .map(|info| info.0);
    let caller = if let Some(peer) = local
        && !matches!(bearer(&req), Ok(Some(_)))
    {
        match peer.uid.and_then(|uid| tokens.local(uid)) {
            Some(id) => Caller::Token(id),
            None => {
                return unauthorized(
                    "the kernel did not name an account for this Unix-socket connection",
                );
            }
        }
    } else if !tokens.enabled() {
        tokens.anonymous()
    } else if OPEN_PATHS.contains(&req.uri().path()) {
        // No caller at all: a handler here that asked for one would fail loudly.
        return next.run(req).await;
    } else {
        match bearer(&req) {
            Err(message) => return unauthorized(message),
            Ok(None) => {
                return unauthorized(
                    "this daemon requires an API token: send `Authorization: Bearer <token>` (the CLI reads GANTRY_TOKEN or ~/.config/gantry/token)",
                );
            }
            Ok(Some(token)) => match tokens.lookup(token) {
                Some(id) => {
                    tracing::debug!(token = %id.name, user = %id.user, "authenticated");
                    Caller::Token(id)
                }
                None => return unauthorized("the API token is not valid"),
            },
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("the authentication layer did not run"))
    }
}
