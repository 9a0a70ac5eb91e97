//! Job and node routes: submit, list (at most [`MAX_JOBS_PAGE`] jobs), get, cancel, events,
//! nodes (logs: `logs.rs`).
//!
//! Authorization: any caller may submit (as the token's user, into its accounts), list
//! and read jobs and nodes; cancel, logs, events and decisions need the job's owner or
//! an operator (`crate::auth::Caller`).

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use crate::auth::Caller;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use gantry_api::model::{JobRecord, JobSpec};
use gantry_api::views::WhatIfRequest;
use gantry_controller::jobs_api::{CancelError, SubmitError};
use gantry_controller::service_sets::SERVICE_LABEL;
use gantry_controller::{Admin, JobQuery, Jobs, Nodes};

/// The `{id}` of a job route: a 400 naming `id` for anything but an integer (a path that
/// is not UTF-8 included, which axum's `Path` would answer in plain text).
#[derive(Debug, Clone, Copy)]
pub(super) struct JobId(pub(super) u64);

impl<S: Send + Sync> FromRequestParts<S> for JobId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        path_id(parts, state, "job").await.map(JobId)
    }
}

/// The `{id}` of the path: a positive integer, else a 400 naming `id` and saying it is not
/// the id of a `what`.
pub(super) async fn path_id<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    what: &str,
) -> Result<u64, ApiError> {
    let bad = |raw: &str| {
        let raw: String = raw.chars().take(64).collect();
        ApiError::field(
            "invalid-id",
            "id",
            format!("`{raw}` is not a {what} id (a positive integer)"),
        )
    };
    match Path::<String>::from_request_parts(parts, state).await {
        Ok(Path(raw)) => raw.parse().map_err(|_| bad(&raw)),
        Err(e) => Err(bad(&e.body_text())),
    }
}

/// Job `id`, if `caller` may `what` it (its owner, an operator or an admin).
pub(super) fn owned_job(
    s: &Jobs,
    caller: &Caller,
    id: u64,
    what: &str,
) -> Result<JobRecord, ApiError> {
    let job = s
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("job {id} does not exist")))?;
    caller.require_owner(&job.spec.user, what)?;
    Ok(job)
}

pub(super) fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(v)| v)
        .map_err(|e| ApiError::field("invalid-query", "query", e.body_text()))
}

pub(super) async fn submit(
    State(s): State<Jobs>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let mut spec: JobSpec = parse_json(&body)?;
    caller.stamp(&mut spec.user, &mut spec.account)?;
    // Never taken from the request: a caller without an identity names its user only as a label.
    spec.anonymous = matches!(caller, Caller::Open(_));
    // Only a service's owner (`service_sets.rs`) marks a job as one of its replicas.
    if spec.labels.contains_key(SERVICE_LABEL) {
        return Err(ApiError::field(
            "invalid-field",
            format!("labels.{SERVICE_LABEL}"),
            "this label marks a service's replicas; it is set by POST /v1/services",
        ));
    }
    let submitter = caller.submitter();
    let record = blocking(move || s.submit(spec, submitter))
        .await?
        .map_err(submit_error)?;
    Ok((StatusCode::CREATED, Json(record)))
}

/// `POST /v1/jobs/forecast`: when a job of this spec would start (in place of the pending
/// job it `replaces`); nothing is submitted. The caller's identity stamps it as at submit.
pub(super) async fn forecast(
    State(s): State<Jobs>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let WhatIfRequest { mut spec, replaces } = parse_json(&body)?;
    caller.stamp(&mut spec.user, &mut spec.account)?;
    spec.anonymous = matches!(caller, Caller::Open(_));
    let forecast = blocking(move || s.what_if(spec, replaces))
        .await?
        .map_err(submit_error)?;
    Ok(Json(forecast))
}

/// The answer to a submit the scheduler refused (also a service's first replica's).
pub(super) fn submit_error(e: SubmitError) -> ApiError {
    match e {
        SubmitError::Field(f) => ApiError::field("invalid-field", f.field, f.message),
        SubmitError::Forbidden(f) => ApiError {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            message: f.message,
            field: Some(f.field),
        },
        SubmitError::TooLarge(f) => ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "too-large",
            message: f.message,
            field: Some(f.field),
        },
        SubmitError::TooMany(f) => ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "too-many-pending",
            message: f.message,
            field: Some(f.field),
        },
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
    }
}

/// Most jobs one `GET /v1/jobs` returns; a larger `limit` is clamped to it (the answer's
/// `X-Page-Limit` header says the limit applied).
pub(super) const MAX_JOBS_PAGE: usize = 10_000;

/// The `limit` applied to a job list: the default (1000) when none is asked, at most
/// [`MAX_JOBS_PAGE`].
fn page_limit(asked: Option<usize>) -> usize {
    asked.unwrap_or(1000).min(MAX_JOBS_PAGE)
}

/// The query of `GET /v1/jobs`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    state: Option<gantry_api::model::JobState>,
    user: Option<String>,
    account: Option<String>,
    queue: Option<String>,
    /// Submitted at or after: ms since the Unix epoch or RFC 3339.
    since: Option<String>,
    /// Submitted before.
    until: Option<String>,
    /// The `X-Next-After` of the previous page: only older jobs.
    after: Option<u64>,
    limit: Option<usize>,
}

impl ListQuery {
    /// The table's query and the page's size.
    fn filter(self) -> Result<(JobQuery, usize), ApiError> {
        let time = |name: &str, v: Option<String>| {
            v.as_deref()
                .map(super::accounting::parse_time_ms)
                .transpose()
                .map_err(|m| ApiError::field("invalid-query", name, m))
        };
        let query = JobQuery {
            state: self.state,
            user: self.user,
            account: self.account,
            queue: self.queue,
            since_ms: time("since", self.since)?,
            until_ms: time("until", self.until)?,
            after: self.after,
        };
        Ok((query, page_limit(self.limit)))
    }
}

/// A page of jobs, newest first, from memory and history. `X-Next-After`, when present, is
/// the `after` that reads the next page.
pub(super) async fn list(
    State(s): State<Jobs>,
    caller: Caller,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let (q, limit) = query(q)?.filter()?;
    let page = blocking(move || s.list(&q, limit))
        .await?
        .map_err(ApiError::internal)?;
    let mut jobs = page.jobs;
    super::redact::redact_all(&caller, &mut jobs);
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("x-page-limit", limit.into());
    if let Some(next) = page.next_after {
        headers.insert("x-next-after", next.into());
    }
    Ok((headers, Json(jobs)))
}

pub(super) async fn get_one(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    let mut job = s
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("job {id} does not exist")))?;
    super::redact::redact(&caller, &mut job);
    Ok(Json(job))
}

pub(super) async fn cancel(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    // Read (and ignore) a body, so a client that sends one keeps a usable connection.
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "cancelling a job")?;
    let by = caller.role_and_user().1.to_string();
    s.cancel(id, &by).map(Json).map_err(|e| match e {
        CancelError::NotFound(_) => ApiError::not_found(e.to_string()),
        CancelError::Ended(..) => {
            ApiError::new(StatusCode::CONFLICT, "already-ended", e.to_string())
        }
        CancelError::Store(e) => ApiError::internal(e),
    })
}

pub(super) async fn events(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's events")?;
    blocking(move || s.events(id))
        .await?
        .map(Json)
        .map_err(ApiError::internal)
}

pub(super) async fn nodes(State(s): State<Nodes>) -> impl IntoResponse {
    Json(s.list())
}

pub(super) async fn decisions(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's decisions")?;
    Ok(Json(s.decisions(id)))
}

pub(super) async fn metrics(State(s): State<Admin>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            gantry_controller::metrics::CONTENT_TYPE,
        )],
        s.metrics_text(),
    )
}

#[cfg(test)]
mod page_tests {
    use super::*;

    #[test]
    fn job_pages_are_clamped() {
        assert_eq!(page_limit(None), 1000);
        assert_eq!(page_limit(Some(5)), 5);
        assert_eq!(page_limit(Some(100_000_000)), MAX_JOBS_PAGE);
    }
}
