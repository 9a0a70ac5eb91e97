//! Node routes: `POST /v1/nodes/{name}/drain` with `{"reason": "..."}`,
//! `POST /v1/nodes/{name}/resume` and `DELETE /v1/nodes/{name}` (forget a node that is down;
//! 409 naming `name` otherwise) (the list, `GET /v1/nodes`, is in `jobs.rs`).
//!
//! Authorization: all need the `operator` role (admins too). The role is checked
//! before the body: a user learns nothing about the node or the body's checks.
//! Answers: 200 with the node view; 400 naming `reason` (missing, empty, over 256
//! bytes, control characters) or `name`; 404 naming the unknown node.

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use crate::auth::Caller;
use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use gantry_config::auth::Role;
use gantry_controller::Nodes;
use gantry_controller::nodes::NodeOpError;
use serde::Deserialize;

/// The `{name}` of a node route (a 400 naming `name` when it cannot be read, instead
/// of axum's plain-text rejection).
#[derive(Debug, Clone)]
pub(super) struct NodeName(pub(super) String);

impl<S: Send + Sync> FromRequestParts<S> for NodeName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(name)| NodeName(name))
            .map_err(|e| ApiError::field("invalid-name", "name", e.body_text()))
    }
}

/// The body of a drain.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DrainRequest {
    /// Why (shown in `GET /v1/nodes` and in the reasons of jobs that wait; at most
    /// `MAX_REASON` bytes, `host/controller/src/nodes.rs`).
    #[schema(min_length = 1, max_length = 256)]
    reason: String,
}

/// Who a caller is, for the drain record.
fn who(caller: &Caller) -> String {
    match caller {
        Caller::Token(id) => id.user.clone(),
        Caller::Open(_) => "unauthenticated".into(),
    }
}

fn op_error(e: NodeOpError) -> ApiError {
    match e {
        NodeOpError::NotFound { .. } => {
            let mut err = ApiError::not_found(e.to_string());
            err.field = Some("name".into());
            err
        }
        NodeOpError::Reason(m) => ApiError::field("invalid-field", "reason", m),
        NodeOpError::Busy(m) => {
            let mut err = ApiError::new(StatusCode::CONFLICT, "conflict", m);
            err.field = Some("name".into());
            err
        }
        NodeOpError::Store(s) => ApiError::internal(s),
    }
}

pub(super) async fn drain(
    State(s): State<Nodes>,
    caller: Caller,
    NodeName(name): NodeName,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Operator, "draining a node")?;
    let req: DrainRequest = parse_json(&body)?;
    let by = who(&caller);
    let view = blocking(move || s.drain(&name, &req.reason, &by))
        .await?
        .map_err(op_error)?;
    Ok(Json(view))
}

/// `DELETE /v1/nodes/{name}`: forgets a node that is down (operator).
pub(super) async fn forget(
    State(s): State<Nodes>,
    caller: Caller,
    NodeName(name): NodeName,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Operator, "removing a node")?;
    let by = who(&caller);
    let asked = name.clone();
    blocking(move || s.forget(&name, &by))
        .await?
        .map_err(op_error)?;
    Ok(Json(serde_json::json!({"removed": asked})))
}

pub(super) async fn resume(
    State(s): State<Nodes>,
    caller: Caller,
    NodeName(name): NodeName,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Operator, "resuming a node")?;
    let by = who(&caller);
    let view = blocking(move || s.resume(&name, &by))
        .await?
        .map_err(op_error)?;
    Ok(Json(view))
}
