//! The controller's route for agents, `POST /cluster/v1/heartbeat`, outside the user-token
//! check: it takes only the cluster token (`[cluster] token`; 401 otherwise, and always when
//! none is configured) and only protocol version [`PROTOCOL_VERSION`] (409 otherwise).
//!
//! The token is checked before a byte of the body is read: a caller without it is answered
//! 401 at once, whatever it declares or sends. An agent's body is then read up to
//! [`MAX_HEARTBEAT`] (a larger declared length is a 413 before reading; a chunked one is cut
//! off there).
//!
//! Owns: the route's checks and status mapping. Does not own what a heartbeat does
//! (`scheduler::remote`) or the wire types (`gantry_api::cluster`).

use super::ApiState;
use super::body::read_limited;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use gantry_api::cluster::{HEARTBEAT_PATH, Heartbeat, PROTOCOL_VERSION, ProtoError};
use gantry_api::cluster_token::token_matches;
use gantry_controller::{HeartbeatError, Nodes};

/// Largest heartbeat body (an agent with many tasks and ends), bytes.
const MAX_HEARTBEAT: usize = 8 << 20;

/// The agents' routes.
pub(super) fn routes() -> Router<ApiState> {
    Router::new().route(HEARTBEAT_PATH, post(heartbeat))
}

fn refuse(status: StatusCode, error: String, field: Option<&str>) -> Response {
    let body = ProtoError {
        error,
        field: field.map(str::to_string),
    };
    (status, Json(body)).into_response()
}

async fn heartbeat(State(s): State<Nodes>, headers: HeaderMap, body: Body) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if !token_matches(given, s.cluster_token()) {
        let why = if s.cluster_token().is_empty() {
            "this controller has no cluster token ([cluster] token), so no agent may join"
        } else {
            "missing or wrong cluster token"
        };
        tracing::warn!("agent heartbeat refused: {why}");
        return refuse(StatusCode::UNAUTHORIZED, why.into(), Some("authorization"));
    }
    let body = match read_limited(&headers, body, MAX_HEARTBEAT, "a heartbeat").await {
        Ok(b) => b,
        Err(e) => return refuse(e.status, e.message, e.field.as_deref()),
    };
    let protocol = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("protocol").and_then(serde_json::Value::as_u64));
    if protocol != Some(u64::from(PROTOCOL_VERSION)) {
        let message = format!(
            "protocol version {} is not spoken here; this controller speaks {PROTOCOL_VERSION}",
            protocol.map_or_else(|| "(none)".to_string(), |p| p.to_string())
        );
        return refuse(StatusCode::CONFLICT, message, Some("protocol"));
    }
    let hb: Heartbeat = match serde_json::from_slice(&body) {
        Ok(hb) => hb,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("not a heartbeat: {e}"),
                Some("body"),
            );
        }
    };
    match tokio::task::spawn_blocking(move || s.heartbeat(hb)).await {
        Ok(Ok(reply)) => Json(reply).into_response(),
        Ok(Err(e @ (HeartbeatError::NameTaken(_) | HeartbeatError::NameInUse { .. }))) => {
            refuse(StatusCode::CONFLICT, e.to_string(), Some("node.name"))
        }
        Ok(Err(e @ HeartbeatError::BadName)) => {
            refuse(StatusCode::BAD_REQUEST, e.to_string(), Some("node.name"))
        }
        Ok(Err(e)) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}
