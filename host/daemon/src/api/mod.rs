//! The HTTP API (axum, JSON, under `/v1`). Thin: it parses and bounds requests, calls
//! the scheduler, and maps results and errors to status codes.
//!
//! Owns: routes, request limits (`body.rs`: 1 MiB JSON bodies, `plugins.max_upload_mib`
//! uploads, 413 naming `body`), status mapping, the OpenAPI document (`openapi.rs`,
//! `GET /v1/openapi.json`, behind the token check like every route but health and
//! metrics). Does not own any state.
//! Every request passes the `guard` first (Host against DNS rebinding, Origin, and a
//! Content-Type that browsers cannot send cross-site; `guard.rs`), then the `auth`
//! middleware (see `auth.rs` for which paths stay open and for the roles each handler
//! asks for), except the web dashboard's static files under `/ui` (`ui.rs`), which hold
//! no data. Streams are capped per caller (`streams.rs`), logs are read by range
//! (`logs.rs`).
//!
//! Not yet here: token management over HTTP; tokens live in the config file
//! (`gantry token create`).

mod accounting;
mod attach;
mod auth;
mod body;
mod cluster;
mod error;
mod guard;
mod jobs;
mod live;
mod locate;
mod logs;
mod nodes;
mod openapi;
mod openapi_schemas;
mod policy;
mod redact;
mod streams;
mod ui;

pub use body::{MAX_JSON_BODY, parse_json};
pub use error::ApiError;

use crate::auth::Tokens;
use crate::scheduler::Scheduler;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::{Json, Router};

/// All routes, behind the token check (`tokens` empty: no authentication). Every route
/// here must be in `openapi::OPERATIONS` (a unit test reads this source to check).
pub fn router(scheduler: Scheduler, tokens: Tokens) -> Router {
    let isolation = scheduler.isolation();
    let streams = streams::StreamSlots::new(scheduler.config().http.max_streams_per_caller);
    Router::new()
        .route(
            "/v1/health",
            get(move || async move {
                Json(serde_json::json!({"status": "ok", "isolation": isolation}))
            }),
        )
        .route("/v1/jobs", post(jobs::submit).get(jobs::list))
        .route("/v1/jobs/{id}", get(jobs::get_one).delete(jobs::cancel))
        .route("/v1/jobs/{id}/cancel", post(jobs::cancel))
        .route("/v1/jobs/{id}/logs", get(logs::logs))
        .route("/v1/jobs/{id}/attach", get(attach::attach))
        .route("/v1/jobs/{id}/signal", post(attach::signal))
        .route("/v1/jobs/{id}/events", get(jobs::events))
        .route("/v1/jobs/{id}/decisions", get(jobs::decisions))
        .route("/v1/jobs/{id}/trace", get(live::trace))
        .route("/v1/whoami", get(live::whoami))
        .route("/v1/stream", get(live::stream))
        .route("/v1/fairshare", get(live::fairshare))
        .route("/metrics", get(jobs::metrics))
        .route("/v1/nodes", get(jobs::nodes))
        .route("/v1/nodes/{name}", delete(nodes::forget))
        .route("/v1/nodes/{name}/drain", post(nodes::drain))
        .route("/v1/nodes/{name}/resume", post(nodes::resume))
        .route("/v1/accounting", get(accounting::list))
        .route("/v1/faults", get(policy::faults))
        .route(
            "/v1/plugins",
            post(policy::upload)
                .get(policy::list_plugins)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/v1/policy", get(policy::show).put(policy::set))
        .route("/v1/policy/rollback", post(policy::rollback))
        .route("/v1/policy/history", get(policy::history))
        .route(
            "/v1/policy/shadow",
            get(policy::shadow)
                .put(policy::set_shadow)
                .delete(policy::clear_shadow),
        )
        .route("/v1/policy/shadow/diff", get(policy::shadow))
        .route("/v1/replay", post(policy::replay))
        .route("/v1/openapi.json", get(openapi::serve))
        .fallback(|| async {
            ApiError::not_found("no such route; the API is under /v1 (see README)")
        })
        .layer(DefaultBodyLimit::max(MAX_JSON_BODY))
        .layer(axum::middleware::from_fn_with_state(
            tokens,
            auth::authenticate,
        ))
        // The dashboard's files, outside the token check (they hold no data).
        .merge(ui::routes())
        // Agents' heartbeats, with the cluster token instead (`cluster.rs`).
        .merge(cluster::routes())
        // Host, Origin and Content-Type checks before anything else (`guard.rs`).
        .layer(axum::middleware::from_fn(guard::guard))
        .layer(axum::Extension(streams))
        .with_state(scheduler)
}

/// Runs blocking scheduler work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)
}
