//! The checks every request passes before routing, against browsers used as a weapon:
//!
//! - **Host** (DNS rebinding): over TCP, `Host` (and an absolute request target's
//!   authority) must name this server (`host::HostRules`), else 421 naming `host`.
//! - **Origin** (cross-site requests): a browser's `Origin` must be this server's own
//!   origin or an `allowed_hosts` entry, else 403 naming `origin`.
//! - **Content-Type** (cross-site forms): a request carrying a body must say what it is:
//!   `application/json` (parameters such as `charset` allowed) on JSON routes; on upload
//!   routes any type (`application/wasm`, `application/octet-stream`...) but the three a
//!   page may send cross-site without a CORS preflight (`text/plain`,
//!   `multipart/form-data`, `application/x-www-form-urlencoded`), which are never
//!   accepted, nor is a body without a type (a `fetch` of raw bytes sends none); 415
//!   naming `content-type`.
//!   A request without a body (`Content-Length: 0` or neither it nor `Transfer-Encoding`)
//!   needs no type.
//!
//! Host and Origin are checked only on requests that came through the TCP accept loop
//! (they carry a [`ConnInfo`]); any other transport (a Unix socket, in-process tests) is
//! not reachable from a browser and passes.
//!
//! Owns: these decisions ([`check`]) and the agent routes' guard ([`cluster_guard`], with
//! the cluster protocol's error shape). Does not own the API's error shape (`api::guard`).

use super::ConnInfo;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What a route's request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// JSON.
    Json,
    /// Raw bytes (a component upload): any type but the browser-simple ones.
    Binary,
}

/// A refused request: status, machine-readable code, the header at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 415, 421 or 403.
    pub status: StatusCode,
    /// `unsupported-media-type`, `unknown-host` or `cross-origin`.
    pub code: &'static str,
    /// `content-type`, `host` or `origin`.
    pub field: &'static str,
    /// Why, and what to do.
    pub message: String,
}

/// The types a browser page may send cross-site without asking (no CORS preflight).
const BROWSER_SIMPLE: [&str; 3] = [
    "text/plain",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
];

/// Whether the request carries a body.
fn has_body(headers: &HeaderMap) -> bool {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        return true;
    }
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() != "0")
}

fn text(value: Option<&axum::http::HeaderValue>) -> Option<String> {
    value.map(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .chars()
            .take(100)
            .collect()
    })
}

/// Checks a request's headers (see the module's documentation); `kind` says what body a
/// path takes.
pub fn check(req: &Request, kind: impl Fn(&str) -> BodyKind) -> Result<(), Refusal> {
    let headers = req.headers();
    if let Some(info) = req.extensions().get::<ConnInfo>() {
        let host = text(headers.get(header::HOST));
        let named = host
            .iter()
            .cloned()
            .chain(req.uri().authority().map(ToString::to_string));
        for authority in named {
            if !info.rules.allows(&authority, info.local.ip()) {
                return Err(Refusal {
                    status: StatusCode::MISDIRECTED_REQUEST,
                    code: "unknown-host",
                    field: "host",
                    message: format!(
                        "this server does not answer to the name `{authority}`: reach it by its address (or localhost on loopback), or add the name to [http] allowed_hosts in its config (a defence against DNS rebinding)"
                    ),
                });
            }
        }
        if let Some(origin) = text(headers.get(header::ORIGIN))
            && !info.rules.allows_origin(&origin, host.as_deref())
        {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                code: "cross-origin",
                field: "origin",
                message: format!(
                    "requests from pages of `{origin}` are refused: only this server's own pages (or an origin in [http] allowed_hosts) may call it"
                ),
            });
        }
    }
    if req.method() == Method::GET || req.method() == Method::HEAD || !has_body(headers) {
        return Ok(());
    }
    let given = text(headers.get(header::CONTENT_TYPE));
    let media = given.as_deref().map(|t| {
        t.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    let kind = kind(req.uri().path());
    let accepted: &[&str] = match kind {
        BodyKind::Json => &["application/json"],
        BodyKind::Binary => &["application/wasm", "application/octet-stream"],
    };
    match media.as_deref() {
        Some(m) if accepted.contains(&m) => Ok(()),
        Some(m) if kind == BodyKind::Binary && !m.is_empty() && !BROWSER_SIMPLE.contains(&m) => {
            Ok(())
        }
        _ => {
            let got = match (&given, &media) {
                (None, _) => "no Content-Type".to_string(),
                (Some(_), Some(m)) if BROWSER_SIMPLE.contains(&m.as_str()) => {
                    format!("`{m}`, a type browsers send cross-site without asking")
                }
                (Some(t), _) => format!("`{t}`"),
            };
            Err(Refusal {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                code: "unsupported-media-type",
                field: "content-type",
                message: format!(
                    "this route takes a body of Content-Type {}; the request has {got}",
                    accepted
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            })
        }
    }
}

/// The agent routes' guard: [`check`] with JSON bodies, refusals as the cluster protocol's
/// `{"error", "field"}`.
pub async fn cluster_guard(req: Request, next: Next) -> Response {
    match check(&req, |_| BodyKind::Json) {
        Ok(()) => next.run(req).await,
        Err(r) => {
            tracing::debug!(field = r.field, "request refused: {}", r.message);
            let body = gantry_api::cluster::ProtoError {
                error: r.message,
                field: Some(r.field.to_string()),
                controller: None,
            };
            (r.status, axum::Json(body)).into_response()
        }
    }
}

#[cfg(test)]
mod tests;
