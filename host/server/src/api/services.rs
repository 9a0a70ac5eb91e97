//! `/v1/services`: replicated services (`gantry service`). Create (a job spec of kind
//! `service` whose `service.replicas` says how many copies), list, show one with its
//! replicas, scale, stop.
//!
//! Authorization: any caller may create one (as the token's user, its replicas submitted as
//! that caller's jobs would be) and list them (another user's template redacted as a job
//! of theirs would be: `redact.rs`); only its owner, an operator or an admin may
//! scale, update, roll back or stop it.
//!
//! Owns: these routes. Does not own the services (`gantry_controller`'s `service_sets.rs`).

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use super::jobs::submit_error;
use super::redact::redact_service;
use crate::auth::Caller;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use gantry_api::model::{JobSpec, RollbackRequest, ScaleRequest, ServiceRecord, UpdateRequest};
use gantry_controller::Services;
use gantry_controller::service_sets::ServiceError;

/// A service id from the path.
pub(super) struct ServiceId(u64);

impl<S: Send + Sync> FromRequestParts<S> for ServiceId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        super::jobs::path_id(parts, state, "service")
            .await
            .map(ServiceId)
    }
}

fn service_error(e: ServiceError) -> ApiError {
    match e {
        ServiceError::Submit(e) => submit_error(e),
        ServiceError::NotFound(id) => ApiError::not_found(format!("service {id} does not exist")),
        ServiceError::Stopped(id) => ApiError {
            status: StatusCode::CONFLICT,
            code: "stopped",
            message: format!("service {id} is stopped"),
            field: None,
        },
        ServiceError::Autoscaled(id) => ApiError {
            status: StatusCode::CONFLICT,
            code: "autoscaled",
            message: format!(
                "service {id} is scaled by its autoscaler: change autoscale.min_replicas/max_replicas with an update, or remove it (no_autoscale)"
            ),
            field: Some("replicas".into()),
        },
        ServiceError::NoRevision(message) => ApiError::field("invalid-field", "revision", message),
        ServiceError::Store(e) => ApiError::internal(e),
    }
}

/// Service `id`, if `caller` may `what` it.
fn owned_service(
    s: &Services,
    caller: &Caller,
    id: u64,
    what: &str,
) -> Result<ServiceRecord, ApiError> {
    let service = s
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("service {id} does not exist")))?;
    caller.require_owner(&service.template.user, what)?;
    Ok(service)
}

pub(super) async fn create(
    State(s): State<Services>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let mut spec: JobSpec = parse_json(&body)?;
    caller.stamp(&mut spec.user, &mut spec.account)?;
    spec.anonymous = matches!(caller, Caller::Open(_));
    // The owner sets its own label on the replicas.
    spec.labels
        .remove(gantry_controller::service_sets::SERVICE_LABEL);
    let submitter = caller.submitter();
    let me = s.clone();
    let created = blocking(move || me.create(spec, submitter))
        .await?
        .map_err(service_error)?;
    crate::service_endpoint::open(&s, created.id);
    let created = s.get(created.id).unwrap_or(created);
    let view = blocking(move || s.view(created)).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

pub(super) async fn list(
    State(s): State<Services>,
    caller: Caller,
) -> Result<impl IntoResponse, ApiError> {
    let mut views = blocking(move || {
        s.list()
            .into_iter()
            .map(|svc| s.view(svc))
            .collect::<Vec<_>>()
    })
    .await?;
    for view in &mut views {
        redact_service(&caller, view);
    }
    Ok(Json(views))
}

pub(super) async fn get_one(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
) -> Result<impl IntoResponse, ApiError> {
    let service = s
        .get(id)
        .ok_or_else(|| ApiError::not_found(format!("service {id} does not exist")))?;
    let mut view = blocking(move || s.view(service)).await?;
    redact_service(&caller, &mut view);
    Ok(Json(view))
}

pub(super) async fn scale(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let request: ScaleRequest = parse_json(&body)?;
    if request.replicas > gantry_api::model::service_rollout::MAX_REPLICAS {
        return Err(ApiError::field(
            "invalid-field",
            "replicas",
            format!(
                "more than {} replicas",
                gantry_api::model::service_rollout::MAX_REPLICAS
            ),
        ));
    }
    owned_service(&s, &caller, id, "scaling a service")?;
    let me = s.clone();
    let scaled = blocking(move || me.scale(id, request.replicas))
        .await?
        .map_err(service_error)?;
    Ok(Json(blocking(move || s.view(scaled)).await?))
}

pub(super) async fn stop(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
) -> Result<impl IntoResponse, ApiError> {
    owned_service(&s, &caller, id, "stopping a service")?;
    let me = s.clone();
    let stopped = blocking(move || me.stop(id))
        .await?
        .map_err(service_error)?;
    Ok(Json(blocking(move || s.view(stopped)).await?))
}

pub(super) async fn update(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let request: UpdateRequest = parse_json(&body)?;
    if let Some(r) = &request.rollout {
        r.validate("rollout")
            .map_err(|e| ApiError::field("invalid-field", e.field, e.message))?;
    }
    if let Some(a) = &request.autoscale {
        a.validate("autoscale")
            .map_err(|e| ApiError::field("invalid-field", e.field, e.message))?;
    }
    if request.env.keys().any(|k| k.starts_with("GANTRY_")) {
        return Err(ApiError::field(
            "invalid-field",
            "env",
            "GANTRY_* variables are set by Gantry",
        ));
    }
    owned_service(&s, &caller, id, "updating a service")?;
    let me = s.clone();
    let updated = blocking(move || me.update(id, request))
        .await?
        .map_err(service_error)?;
    let mut view = blocking(move || s.view(updated)).await?;
    redact_service(&caller, &mut view);
    Ok(Json(view))
}

pub(super) async fn rollback(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let request: RollbackRequest = if body.is_empty() {
        RollbackRequest::default()
    } else {
        parse_json(&body)?
    };
    owned_service(&s, &caller, id, "rolling back a service")?;
    let me = s.clone();
    let back = blocking(move || me.rollback(id, request.revision))
        .await?
        .map_err(service_error)?;
    let mut view = blocking(move || s.view(back)).await?;
    redact_service(&caller, &mut view);
    Ok(Json(view))
}

pub(super) async fn events(
    State(s): State<Services>,
    caller: Caller,
    ServiceId(id): ServiceId,
) -> Result<impl IntoResponse, ApiError> {
    owned_service(&s, &caller, id, "reading a service's events")?;
    blocking(move || s.events(id))
        .await?
        .map(Json)
        .map_err(ApiError::internal)
}
