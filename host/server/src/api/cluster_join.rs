//! The join routes, outside the user-token check (a joining node has no credential yet):
//! `GET /cluster/v1/join/ca` answers the cluster CA's certificate (public; the node checks it
//! by its hash) and `POST /cluster/v1/join` spends a join token
//! (`gantry_api::cluster_join`). A body is read up to [`MAX_JOIN`] bytes.
//!
//! Answers: 200; 400 naming the field; 403 naming `token` (unknown, revoked, expired or
//! spent: the message says which); 409 naming `node` (a name taken) or `protocol`; 404 when
//! no CA is configured; 409 naming `token` when the controller cannot take joins (no CA key
//! or cluster token).
//!
//! Owns: the routes' checks and status mapping. Does not own what a join checks and gives
//! (the controller's `enrolment`).

use super::ApiState;
use super::body::read_limited;
use super::cluster::refuse;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gantry_api::cluster_join::{JOIN_CA_PATH, JOIN_PATH, JoinRequest};
use gantry_controller::Nodes;
use gantry_controller::enrolment::{JoinError, JoinStep};

/// Largest join body, bytes.
const MAX_JOIN: usize = 64 << 10;

pub(super) fn routes() -> Router<ApiState> {
    Router::new()
        .route(JOIN_CA_PATH, get(ca))
        .route(JOIN_PATH, post(join))
}

async fn ca(State(s): State<Nodes>) -> Response {
    match tokio::task::spawn_blocking(move || s.join(None)).await {
        Ok(Ok(JoinStep::Ca(Some(pem)))) => {
            ([(header::CONTENT_TYPE, "application/x-pem-file")], pem).into_response()
        }
        Ok(_) => refuse(
            StatusCode::NOT_FOUND,
            "this controller has no cluster CA ([cluster] ca_cert; run gantry init)".into(),
            None,
        ),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}

async fn join(State(s): State<Nodes>, headers: HeaderMap, body: Body) -> Response {
    let body = match read_limited(&headers, body, MAX_JOIN, "a join").await {
        Ok(b) => b,
        Err(e) => return refuse(e.status, e.message, e.field.as_deref()),
    };
    let request: JoinRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("not a join request: {e}"),
                Some("body"),
            );
        }
    };
    let node = request.node.clone();
    match tokio::task::spawn_blocking(move || s.join(Some(request))).await {
        Ok(Ok(JoinStep::Joined(reply))) => axum::Json(*reply).into_response(),
        Ok(Ok(JoinStep::Ca(_))) => {
            refuse(StatusCode::INTERNAL_SERVER_ERROR, "no join".into(), None)
        }
        Ok(Err(e)) => {
            let (status, field) = match &e {
                JoinError::Token(_) => (StatusCode::FORBIDDEN, Some("token")),
                JoinError::NameTaken(_) => (StatusCode::CONFLICT, Some("node")),
                JoinError::Invalid { field, .. } => (StatusCode::BAD_REQUEST, Some(*field)),
                JoinError::Protocol(_) => (StatusCode::CONFLICT, Some("protocol")),
                JoinError::NotSetUp(_) => (StatusCode::CONFLICT, Some("token")),
                JoinError::Pki(_) | JoinError::Store(_) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, None)
                }
            };
            tracing::warn!(%node, "join refused: {e}");
            refuse(status, e.to_string(), field)
        }
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}
