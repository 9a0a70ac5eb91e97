//! `POST /v1/jobs/{id}/hold`, `POST /v1/jobs/{id}/release` and `PATCH /v1/jobs/{id}`: what
//! SLURM users do with `scontrol hold`, `release` and `update` on a pending job; and
//! `POST /v1/jobs/{id}/requeue` (`scontrol requeue`) on a running one.
//!
//! Authorization: the job's owner or an operator, as for cancel; a hold an operator or
//! admin set is released only by an operator or admin (403 naming `held_by`). An update is
//! judged as a submit by the same caller (its tier rights, `Caller::submitter`). Owns the
//! HTTP side only; the rules are `gantry_controller::job_control`.

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use super::jobs::{JobId, owned_job};
use crate::auth::Caller;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use gantry_api::model::HoldRole;
use gantry_api::model::job_options::Dependency;
use gantry_config::auth::Role;
use gantry_controller::{ControlError, JobUpdate, Jobs};
use serde::Deserialize;

/// The body of `PATCH /v1/jobs/{id}`: what to change of a pending job; a field left out
/// stays as it is.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = JobUpdate)]
pub(super) struct JobUpdateBody {
    /// The new time limit in seconds (0: none), checked as at submit.
    #[serde(default)]
    time_limit_s: Option<u64>,
    /// The new dependencies, replacing the old ones (`[]`: none); each names a job
    /// submitted before this one.
    #[serde(default)]
    dependencies: Option<Vec<Dependency>>,
}

fn refused(e: ControlError) -> ApiError {
    match e {
        ControlError::NotFound(_) => ApiError::not_found(e.to_string()),
        ControlError::NotPending { .. } => {
            ApiError::new(StatusCode::CONFLICT, "not-pending", e.to_string())
        }
        ControlError::NotRunning { .. } => {
            ApiError::new(StatusCode::CONFLICT, "not-running", e.to_string())
        }
        ControlError::NotHeld(_) => ApiError::new(StatusCode::CONFLICT, "not-held", e.to_string()),
        ControlError::Field(f) => ApiError::field("invalid-field", f.field, f.message),
        ControlError::HeldByOperator { .. } => ApiError {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            message: e.to_string(),
            field: Some("held_by".into()),
        },
        ControlError::Refused { field, error } => {
            let mut answer = super::jobs::submit_error(error);
            answer.field.get_or_insert(field);
            answer
        }
        ControlError::Store(e) => ApiError::internal(e),
    }
}

/// The role a hold or release by `caller` carries.
fn hold_role(caller: &Caller) -> HoldRole {
    match caller.role_and_user().0 {
        Role::User => HoldRole::User,
        Role::Operator => HoldRole::Operator,
        Role::Admin => HoldRole::Admin,
    }
}

pub(super) async fn hold(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "holding a job")?;
    let by = caller.role_and_user().1.to_string();
    let role = hold_role(&caller);
    blocking(move || s.hold(id, Some(&by), role))
        .await?
        .map(Json)
        .map_err(refused)
}

pub(super) async fn release(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "releasing a job")?;
    let role = hold_role(&caller);
    blocking(move || s.hold(id, None, role))
        .await?
        .map(Json)
        .map_err(refused)
}

pub(super) async fn requeue(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "requeueing a job")?;
    blocking(move || s.requeue(id))
        .await?
        .map(Json)
        .map_err(refused)
}

pub(super) async fn update(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "updating a job")?;
    let body: JobUpdateBody = parse_json(&body)?;
    let update = JobUpdate {
        time_limit_s: body.time_limit_s,
        dependencies: body.dependencies,
    };
    let submitter = caller.submitter();
    blocking(move || s.update(id, update, submitter))
        .await?
        .map(Json)
        .map_err(refused)
}
