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
mod admin;
mod attach;
mod auth;
mod body;
mod cluster;
mod cluster_join;
mod error;
pub(crate) mod guard;
mod images;
mod job_control;
mod job_input;
mod jobs;
mod join_tokens;
mod live;
mod locate;
mod logs;
mod nodes;
mod openapi;
mod policy;
mod redact;
mod route;
mod routes;
mod services;
mod state;
mod streams;
mod ui;

pub use body::{MAX_JSON_BODY, parse_json};
pub use error::ApiError;
pub use state::ApiState;

use crate::auth::Tokens;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use gantry_controller::Controller;

/// All routes (`routes.rs`), behind the token check (`tokens` empty: no authentication),
/// then the dashboard's files and the agents' heartbeats.
pub fn router(controller: Controller, tokens: Tokens) -> Router {
    let admin = controller.admin();
    let http = &admin.config().http;
    let streams = streams::StreamSlots::new(
        http.max_streams_per_caller,
        gantry_http::limits::CallerPrefixes::of(http),
    );
    let mut api = Router::new();
    for route in routes::all() {
        // Methods of one path merge into one route.
        api = api.route(route.path, route.router);
    }
    api.fallback(|| async {
        ApiError::not_found("no such route; the API is under /v1 (see README)")
    })
    .layer(DefaultBodyLimit::max(MAX_JSON_BODY))
    .layer(axum::middleware::from_fn_with_state(
        tokens,
        auth::authenticate,
    ))
    // The dashboard's files, outside the token check (they hold no data).
    .merge(ui::routes())
    // Agents' heartbeats, with a node's credential instead (`cluster.rs`), and joins, with a
    // join token (`cluster_join.rs`).
    .merge(cluster::routes())
    .merge(cluster_join::routes())
    // Host, Origin and Content-Type checks before anything else (`guard.rs`).
    .layer(axum::middleware::from_fn(guard::guard))
    .layer(axum::Extension(streams))
    .with_state(ApiState::new(controller))
}

/// Runs blocking scheduler work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)
}
