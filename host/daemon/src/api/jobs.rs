//! Job and node routes: submit, list, get, cancel, logs, events, nodes.
//!
//! Authorization: any caller may submit (as the token's user, into its accounts), list
//! and read jobs and nodes; cancel, logs, events and decisions need the job's owner or
//! an operator (`crate::auth::Caller`).

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use crate::auth::Caller;
use crate::model::{JobRecord, JobSpec};
use crate::scheduler::jobs_api::{CancelError, SubmitError};
use crate::scheduler::{JobFilter, Scheduler};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use serde::Deserialize;

/// The `{id}` of a job route: a 400 naming `id` for anything but an integer (a path that
/// is not UTF-8 included, which axum's `Path` would answer in plain text).
#[derive(Debug, Clone, Copy)]
pub(super) struct JobId(pub(super) u64);

impl<S: Send + Sync> FromRequestParts<S> for JobId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let bad = |raw: &str| {
            let raw: String = raw.chars().take(64).collect();
            ApiError::field(
                "invalid-id",
                "id",
                format!("`{raw}` is not a job id (a positive integer)"),
            )
        };
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(raw)) => raw.parse().map(JobId).map_err(|_| bad(&raw)),
            Err(e) => Err(bad(&e.body_text())),
        }
    }
}

/// Job `id`, if `caller` may `what` it (its owner, an operator or an admin).
pub(super) fn owned_job(
    s: &Scheduler,
    caller: &Caller,
    id: u64,
    what: &str,
) -> Result<JobRecord, ApiError> {
    let job = s
        .job(id)
        .ok_or_else(|| ApiError::not_found(format!("job {id} does not exist")))?;
    caller.require_owner(&job.spec.user, what)?;
    Ok(job)
}

pub(super) fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::field("invalid-query", "query", e.body_text()))
}

pub(super) async fn submit(
    State(s): State<Scheduler>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let mut spec: JobSpec = parse_json(&body)?;
    caller.stamp(&mut spec.user, &mut spec.account)?;
    let record = blocking(move || s.submit(spec))
        .await?
        .map_err(|e| match e {
            SubmitError::Field(f) => ApiError::field("invalid-field", f.field, f.message),
            SubmitError::Unsatisfiable(m) => ApiError::unprocessable(
                "unsatisfiable",
                Some("tasks".into()),
                format!("no node in this cluster could ever hold this job: {m}"),
            ),
            SubmitError::Rejected { plugin, message } => ApiError::unprocessable(
                "rejected-by-policy",
                None,
                format!("rejected by admission plugin {plugin}: {message}"),
            ),
            SubmitError::Store(e) => ApiError::internal(e),
        })?;
    Ok((StatusCode::CREATED, Json(record)))
}

pub(super) async fn list(
    State(s): State<Scheduler>,
    q: Result<Query<JobFilter>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let f = query(q)?;
    Ok(Json(s.jobs(&f)))
}

pub(super) async fn get_one(
    State(s): State<Scheduler>,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    s.job(id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("job {id} does not exist")))
}

pub(super) async fn cancel(
    State(s): State<Scheduler>,
    caller: Caller,
    JobId(id): JobId,
    // Read (and ignore) a body, so a client that sends one keeps a usable connection.
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "cancelling a job")?;
    s.cancel(id).map(Json).map_err(|e| match e {
        CancelError::NotFound(_) => ApiError::not_found(e.to_string()),
        CancelError::Ended(..) => {
            ApiError::new(StatusCode::CONFLICT, "already-ended", e.to_string())
        }
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    #[serde(default)]
    task: usize,
}

pub(super) async fn logs(
    State(s): State<Scheduler>,
    caller: Caller,
    JobId(id): JobId,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's logs")?;
    let task = query(q)?.task;
    let text = blocking(move || s.logs(id, task)).await?;
    text.map(|t| {
        (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            )],
            t,
        )
    })
    .ok_or_else(|| ApiError::not_found(format!("job {id} does not exist")))
}

pub(super) async fn events(
    State(s): State<Scheduler>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's events")?;
    blocking(move || s.events(id))
        .await?
        .map(Json)
        .map_err(ApiError::internal)
}

pub(super) async fn nodes(State(s): State<Scheduler>) -> impl IntoResponse {
    Json(s.nodes())
}

pub(super) async fn decisions(
    State(s): State<Scheduler>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's decisions")?;
    Ok(Json(s.decisions(id)))
}

pub(super) async fn metrics(State(s): State<Scheduler>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics_text(),
    )
}
