//! Plugin and policy routes: upload, list, show, set (hot swap), rollback, history,
//! faults.
//!
//! Authorization: reading (plugins, policy, history, faults, shadow diff) is open to
//! every caller; every change (upload, set, rollback, shadow set/clear) and replay
//! needs the `admin` role.

use super::blocking;
use super::body::{JsonBody, parse_json, read_limited};
use super::error::ApiError;
use crate::auth::Caller;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use gantry_config::auth::Role;
use gantry_controller::policy_error::PolicyOpError;
use gantry_controller::{Admin, Policy};
use gantry_policy::PipelineSpec;

fn op_error(e: PolicyOpError) -> ApiError {
    match e {
        PolicyOpError::Invalid(p) => {
            ApiError::unprocessable("invalid-pipeline", Some(p.field), p.message)
        }
        PolicyOpError::DryRun(_) => ApiError::unprocessable("dry-run-failed", None, e.to_string()),
        PolicyOpError::NoPrevious => {
            ApiError::new(StatusCode::CONFLICT, "no-previous-version", e.to_string())
        }
        PolicyOpError::Load(l) => {
            ApiError::unprocessable("invalid-plugin", Some("body".into()), l.to_string())
        }
        PolicyOpError::Store(s) => ApiError::internal(s),
    }
}

pub(super) async fn upload(
    State(s): State<Policy>,
    State(admin): State<Admin>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "uploading a plugin")?;
    let limit = max_upload_bytes(&admin);
    let bytes = read_limited(&headers, body, limit, "a plugin upload").await?;
    if bytes.is_empty() {
        return Err(ApiError::field(
            "invalid-plugin",
            "body",
            "empty upload; send the component's bytes",
        ));
    }
    let info = blocking(move || s.upload_plugin(&bytes))
        .await?
        .map_err(op_error)?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// `plugins.max_upload_mib` in bytes.
pub(super) fn max_upload_bytes(admin: &Admin) -> usize {
    let mib = admin.config().plugins.max_upload_mib;
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

pub(super) async fn list_plugins(State(s): State<Policy>) -> impl IntoResponse {
    Json(s.plugins())
}

pub(super) async fn show(State(s): State<Policy>) -> impl IntoResponse {
    Json(s.view())
}

pub(super) async fn set(
    State(s): State<Policy>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "changing the pipeline")?;
    let spec: PipelineSpec = parse_json(&body)?;
    let by = super::live::caller_user(&caller);
    blocking(move || s.set(spec, &by))
        .await?
        .map(Json)
        .map_err(op_error)
}

pub(super) async fn rollback(
    State(s): State<Policy>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "rolling back the pipeline")?;
    let by = super::live::caller_user(&caller);
    blocking(move || s.rollback(&by))
        .await?
        .map(Json)
        .map_err(op_error)
}

pub(super) async fn history(State(s): State<Policy>) -> impl IntoResponse {
    Json(s.history())
}

pub(super) async fn faults(State(s): State<Policy>) -> impl IntoResponse {
    Json(s.faults())
}

pub(super) async fn set_shadow(
    State(s): State<Policy>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "setting a shadow pipeline")?;
    let spec: PipelineSpec = parse_json(&body)?;
    blocking(move || s.set_shadow(spec))
        .await?
        .map(Json)
        .map_err(op_error)
}

pub(super) async fn shadow(State(s): State<Policy>) -> Result<impl IntoResponse, ApiError> {
    s.shadow().map(Json).ok_or_else(|| {
        ApiError::not_found("no shadow pipeline is set; PUT /v1/policy/shadow to start one")
    })
}

pub(super) async fn clear_shadow(
    State(s): State<Policy>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "clearing the shadow pipeline")?;
    s.clear_shadow()
        .map(Json)
        .ok_or_else(|| ApiError::not_found("no shadow pipeline is set"))
}

/// `POST /v1/replay` body.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplayRequest {
    /// The pipeline to replay the recorded cycles through.
    pipeline: PipelineSpec,
    /// How far back, seconds (default 3600).
    #[serde(default = "default_since")]
    since_s: u64,
}

fn default_since() -> u64 {
    3600
}

pub(super) async fn replay(
    State(s): State<Policy>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "a what-if replay")?;
    let req: ReplayRequest = parse_json(&body)?;
    blocking(move || s.replay(&req.pipeline, req.since_s))
        .await?
        .map(Json)
        .map_err(op_error)
}
