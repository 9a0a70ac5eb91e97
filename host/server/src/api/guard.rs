//! The API's first layer: the checks of `gantry_http::checks` (Host against DNS
//! rebinding, Origin against cross-site pages, Content-Type against cross-site forms), with
//! refusals in the API's error shape (`{"error": {"code", "message", "field"}}`): 421
//! naming `host`, 403 naming `origin`, 415 naming `content-type`.
//!
//! It runs before authentication and covers every route: the API, the dashboard's files
//! and the agents' heartbeat route, and a standby controller's routes before it forwards
//! anything to the leader (`leadership::lead`). `POST /v1/plugins` takes raw bytes of any type but the
//! browser-simple ones (`application/wasm`, `application/octet-stream`...); every other
//! body is JSON.
//!
//! Owns: which paths take which body and the API-shaped refusal. Does not own the rules
//! (`gantry_http::checks`, `gantry_http::host`).

use super::error::ApiError;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gantry_http::checks::{BodyKind, check};

/// What a path's request body is.
fn body_kind(path: &str) -> BodyKind {
    if path == "/v1/plugins" {
        BodyKind::Binary
    } else {
        BodyKind::Json
    }
}

/// `router` behind [`guard`] (a standby controller's routes, `leadership::lead`).
pub(crate) fn guarded(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(guard))
}

/// Refuses a request that fails the checks; passes the others on.
pub(crate) async fn guard(req: Request, next: Next) -> Response {
    match check(&req, body_kind) {
        Ok(()) => next.run(req).await,
        Err(r) => {
            tracing::debug!(field = r.field, path = %req.uri().path(), "request refused: {}", r.message);
            ApiError {
                status: r.status,
                code: r.code,
                message: r.message,
                field: Some(r.field.to_string()),
            }
            .into_response()
        }
    }
}
