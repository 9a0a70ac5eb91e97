//! Join tokens, for administrators: `POST /v1/join-tokens` (`{"ttl_s", "uses"}`: a new token,
//! shown once, with the `gantry agent join` command), `GET /v1/join-tokens` (every token,
//! never a secret) and `DELETE /v1/join-tokens/{name}` (revoke by id). `gantry token join`,
//! `gantry token list` and `gantry token revoke` call them.
//!
//! Authorization: admin only, checked before the body. Answers: 201 / 200; 400 naming `ttl_s`
//! or `uses`; 404 naming `name`; 409 `not-set-up` when the controller has no CA (`gantry init`).
//!
//! Owns: these routes' parsing and status mapping. Does not own the tokens (the controller's
//! `enrolment`, `gantry_enrol::join_token`).

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use super::nodes::NodeName;
use crate::auth::Caller;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use gantry_api::cluster_join::JoinTokenRequest;
use gantry_config::auth::Role;
use gantry_controller::Admin;
use gantry_controller::enrolment::{JoinError, JoinTokenAction, JoinTokenAnswer};

pub(super) fn join_error(e: JoinError) -> ApiError {
    match e {
        JoinError::Token(refusal) => {
            let message = refusal.to_string();
            let field = if message.starts_with("uses") {
                "uses"
            } else {
                "ttl_s"
            };
            ApiError::field("invalid-field", field, message)
        }
        JoinError::NotSetUp(_) => ApiError::new(StatusCode::CONFLICT, "not-set-up", e.to_string()),
        other => ApiError::internal(other),
    }
}

fn who(caller: &Caller) -> String {
    match caller {
        Caller::Token(id) => id.user.clone(),
        Caller::Open(_) => "unauthenticated".into(),
    }
}

async fn act(s: Admin, action: JoinTokenAction) -> Result<JoinTokenAnswer, ApiError> {
    blocking(move || s.join_tokens(action))
        .await?
        .map_err(join_error)
}

/// `POST /v1/join-tokens`.
pub(super) async fn create(
    State(s): State<Admin>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "making a join token")?;
    let req: JoinTokenRequest = if body.is_empty() {
        parse_json(b"{}")?
    } else {
        parse_json(&body)?
    };
    let action = JoinTokenAction::Create {
        ttl_s: req.ttl_s,
        uses: req.uses,
        by: who(&caller),
    };
    match act(s, action).await? {
        JoinTokenAnswer::Created(made) => Ok((StatusCode::CREATED, Json(made))),
        _ => Err(ApiError::internal(
            "a join token action answered out of turn",
        )),
    }
}

/// `GET /v1/join-tokens`.
pub(super) async fn list(
    State(s): State<Admin>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "listing join tokens")?;
    match act(s, JoinTokenAction::List).await? {
        JoinTokenAnswer::Listed(all) => Ok(Json(all)),
        _ => Err(ApiError::internal(
            "a join token action answered out of turn",
        )),
    }
}

/// `DELETE /v1/join-tokens/{name}`.
pub(super) async fn revoke(
    State(s): State<Admin>,
    caller: Caller,
    NodeName(id): NodeName,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "revoking a join token")?;
    let asked = id.clone();
    match act(s, JoinTokenAction::Revoke(id)).await? {
        JoinTokenAnswer::Revoked(true) => Ok(Json(serde_json::json!({"revoked": asked}))),
        JoinTokenAnswer::Revoked(false) => {
            let mut err = ApiError::not_found(format!("no join token {asked}"));
            err.field = Some("name".into());
            Err(err)
        }
        _ => Err(ApiError::internal(
            "a join token action answered out of turn",
        )),
    }
}
