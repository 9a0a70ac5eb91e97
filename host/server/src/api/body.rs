//! Request bodies: size limits enforced while reading, and JSON parsing whose errors name
//! the field at fault.
//!
//! A declared `Content-Length` over the limit is refused (413, `"field": "body"`) before a
//! byte of the body is read; a chunked body is read frame by frame and cut off at the
//! limit, so a hostile client can make the daemon hold at most the limit, never the
//! whole upload; a body that stalls for the connection's idle timeout is a 408. Limits:
//! [`MAX_JSON_BODY`] for every JSON route, `plugins.max_upload_mib` (default 64 MiB) for
//! `POST /v1/plugins`. Nesting depth is bounded by serde_json's recursion limit (128
//! levels; deeper is a 400 naming `body`).
//!
//! Owns: reading and parsing. Does not own field ranges (`JobSpec::validate`) or the
//! pipeline's checks (`gantry_policy`).

use super::error::ApiError;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;
use std::pin::Pin;

/// Largest JSON request body (1 MiB).
pub const MAX_JSON_BODY: usize = 1 << 20;

/// Most bytes reserved up front for a body whose length is declared.
const RESERVE: usize = 1 << 20;

/// The 413 for a body over `limit`.
pub fn too_large(limit: usize, what: &str) -> ApiError {
    ApiError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        code: "too-large",
        message: format!(
            "{what} is limited to {limit} bytes ({} MiB)",
            limit as f64 / f64::from(1 << 20)
        ),
        field: Some("body".into()),
    }
}

/// Reads `body` whole, refusing it once it is (or says it will be) over `limit` bytes.
pub async fn read_limited(
    headers: &HeaderMap,
    mut body: Body,
    limit: usize,
    what: &str,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit, what));
    }
    let reserve = declared.map_or(0, |n| usize::try_from(n).unwrap_or(limit));
    let mut buf: Vec<u8> = Vec::with_capacity(reserve.min(RESERVE).min(limit));
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(unreadable)?;
        if let Ok(data) = frame.into_data() {
            if buf.len().saturating_add(data.len()) > limit {
                return Err(too_large(limit, what));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}

/// The error for a body that could not be read: 408 when it stalled (no byte for the
/// connection's idle timeout, `gantry_http`), else 400; both name `body`.
fn unreadable(e: axum::Error) -> ApiError {
    let inner = e.into_inner();
    if let Some(stalled) = inner.downcast_ref::<gantry_http::BodyStalled>() {
        return ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            code: "body-timeout",
            message: stalled.to_string(),
            field: Some("body".into()),
        };
    }
    ApiError::field(
        "invalid-body",
        "body",
        format!("the request body could not be read: {inner}"),
    )
}

/// A JSON route's raw body, at most [`MAX_JSON_BODY`] bytes (parse it with [`parse_json`]
/// once the caller is authorized).
#[derive(Debug)]
pub struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        read_limited(&parts.headers, body, MAX_JSON_BODY, "a JSON request body")
            .await
            .map(JsonBody)
    }
}

/// Parses a JSON body, naming the field at fault (`tasks[0].gpus`, `kind`, `body` for
/// syntax errors and nesting too deep).
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::field(
            "invalid-json",
            "body",
            "the request body is empty; send a JSON object",
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        let msg = e.to_string();
        let named = msg
            .split('`')
            .nth(1)
            .filter(|_| msg.starts_with("unknown field") || msg.starts_with("missing field"))
            .map(str::to_string);
        let field = if e.is_data() {
            let core = if e.line() > 0 {
                msg.rfind(" at line ").map_or(msg.as_str(), |i| &msg[..i])
            } else {
                msg.as_str()
            };
            super::locate::locate::<T>(body, core, named.as_deref())
        } else {
            None
        };
        ApiError::field(
            "invalid-json",
            field.or(named).unwrap_or_else(|| "body".into()),
            msg,
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::parse_json;
    use gantry_api::model::JobSpec;
    use gantry_policy::PipelineSpec;

    fn field_of<T: serde::de::DeserializeOwned + std::fmt::Debug>(body: &str) -> String {
        parse_json::<T>(body.as_bytes())
            .unwrap_err()
            .field
            .unwrap_or_default()
    }

    #[test]
    fn errors_name_the_field() {
        let job = |s: &str| field_of::<JobSpec>(s);
        assert_eq!(job(r#"{"argv":["x"],"kind":"nightly"}"#), "kind");
        assert_eq!(job(r#"{"argv":["x"],"tier":99999999999}"#), "tier");
        assert_eq!(job(r#"{"argv":["x"],"time_limit_s":-1}"#), "time_limit_s");
        assert_eq!(
            job(r#"{"argv":["x"],"tasks":[{"count":1},{"gpus":-1}]}"#),
            "tasks[1].gpus"
        );
        assert_eq!(
            job(r#"{"argv":["x"],"tasks":[{"colour":1}]}"#),
            "tasks[0].colour"
        );
        assert_eq!(job(r#"{"argv":[1]}"#), "argv[0]");
        assert_eq!(job(r#"{"argv":["x"],"env":{"A":3}}"#), "env.A");
        assert_eq!(job(r#"{"argv":["x"],"colour":"blue"}"#), "colour");
        assert_eq!(job(r#"{"argv":["x"],"name":"#), "body");
        assert_eq!(
            job(&format!("{}{}", "[".repeat(10_000), "]".repeat(10_000))),
            "body"
        );
        let pipe = |s: &str| field_of::<PipelineSpec>(s);
        assert_eq!(pipe(r#"{"priority":[{"plugin":"fifo"}]}"#), "placement");
        assert_eq!(
            pipe(r#"{"priority":[{}],"placement":{"plugin":"x"}}"#),
            "priority[0].plugin"
        );
    }
}
