//! The controller's routes for agents, outside the user-token check: `POST
//! /cluster/v1/heartbeat`, and joining (`cluster_join.rs`). A heartbeat takes only a node's
//! credential for the node its [`NODE_HEADER`] names (protocol 2), or the cluster token
//! itself from an agent of protocol 1 (no header); 401 otherwise, and always when no
//! `[cluster] token` is configured. Protocols [`OLDEST_PROTOCOL`]..=[`PROTOCOL_VERSION`] are
//! served; another is a 409 naming this controller's version and protocols.
//!
//! The credential is checked before a byte of the body is read: a caller without it is
//! answered 401 at once, whatever it declares or sends; a heartbeat for another node than the
//! credential's is a 403. An agent's body is then read up to
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
use gantry_api::cluster::{
    HEARTBEAT_PATH, Heartbeat, NODE_HEADER, OLDEST_PROTOCOL, PROTOCOL_VERSION, PeerVersion,
    ProtoError,
};
use gantry_api::cluster_token::token_matches;
use gantry_controller::{HeartbeatError, Nodes};

/// Largest heartbeat body (an agent with many tasks and ends), bytes.
const MAX_HEARTBEAT: usize = 8 << 20;

/// The agents' routes.
pub(super) fn routes() -> Router<ApiState> {
    Router::new().route(HEARTBEAT_PATH, post(heartbeat))
}

pub(super) fn refuse(status: StatusCode, error: String, field: Option<&str>) -> Response {
    let body = ProtoError {
        error,
        field: field.map(str::to_string),
        // A refused protocol names this controller's version and protocols.
        controller: (status == StatusCode::CONFLICT && field == Some("protocol"))
            .then(PeerVersion::this_build),
    };
    (status, Json(body)).into_response()
}

async fn heartbeat(State(s): State<Nodes>, headers: HeaderMap, body: Body) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let named = headers
        .get(NODE_HEADER)
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let credential = s.agent_credential(named.as_deref());
    if !token_matches(given, &credential) {
        let why = if credential.is_empty() {
            "this controller has no cluster token ([cluster] token), so no agent may join"
        } else if named.is_some() {
            "missing or wrong credential (token) for the node named in the gantry-node header"
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
    let served = u64::from(OLDEST_PROTOCOL)..=u64::from(PROTOCOL_VERSION);
    if !protocol.is_some_and(|p| served.contains(&p)) {
        let message = format!(
            "protocol version {} is not spoken here; this controller, {}, speaks {OLDEST_PROTOCOL} to {PROTOCOL_VERSION}",
            protocol.map_or_else(|| "(none)".to_string(), |p| p.to_string()),
            PeerVersion::this_build()
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
    if let Some(name) = named.filter(|n| *n != hb.node.name) {
        let message = format!(
            "this credential is node {name}'s; the heartbeat is for node {}",
            hb.node.name
        );
        return refuse(StatusCode::FORBIDDEN, message, Some("node.name"));
    }
    match tokio::task::spawn_blocking(move || s.heartbeat(hb, credential)).await {
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
