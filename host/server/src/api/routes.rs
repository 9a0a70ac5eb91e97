//! Every route under the token check, each method of each path once, with its handler. The
//! router (`mod.rs`) is built from this list, and a unit test (`openapi/tests.rs`) checks
//! that `openapi::OPERATIONS` documents exactly these, so a route is added here and in the
//! OpenAPI table, nowhere else in the daemon.
//!
//! Owns the list. The handlers live with their area (`jobs.rs`, `policy.rs`, ...); the
//! layers every route shares (body limit, authentication, guard) are `mod.rs`'s.

use super::ApiState;
use super::{
    accounting, admin, attach, images, job_control, job_input, jobs, live, logs, nodes, openapi,
    policy, services,
};
use axum::Json;
use axum::extract::{DefaultBodyLimit, State};
use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use gantry_controller::Admin;

/// One method of one path and its handler.
pub(super) struct Route {
    /// `get`, `post`, `put` or `delete`, as the OpenAPI document spells it (read by the
    /// test that compares the routes with the document).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) method: &'static str,
    /// The path, with `{param}` segments.
    pub(super) path: &'static str,
    /// The handler.
    pub(super) router: MethodRouter<ApiState>,
}

impl Route {
    /// The same route with no body limit (uploads check their own, `policy::upload`).
    fn without_body_limit(self) -> Self {
        Self {
            router: self.router.layer(DefaultBodyLimit::disable()),
            ..self
        }
    }
}

fn at<H, T>(method: &'static str, filter: MethodFilter, path: &'static str, h: H) -> Route
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    Route {
        method,
        path,
        router: on(filter, h),
    }
}

fn get<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H) -> Route {
    at("get", MethodFilter::GET, path, h)
}

fn post<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H) -> Route {
    at("post", MethodFilter::POST, path, h)
}

fn put<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H) -> Route {
    at("put", MethodFilter::PUT, path, h)
}

fn delete<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H) -> Route {
    at("delete", MethodFilter::DELETE, path, h)
}

fn patch<H: Handler<T, ApiState>, T: 'static>(path: &'static str, h: H) -> Route {
    at("patch", MethodFilter::PATCH, path, h)
}

/// `GET /v1/health`: liveness, the node's isolation and where state and history live.
async fn health(State(s): State<Admin>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "status": "ok",
        "isolation": s.isolation(),
        "store": {"state": s.state_backend(), "history": s.history_backend()},
        "leadership": crate::leadership::status(),
    }))
}

/// Every route under the token check.
pub(super) fn all() -> Vec<Route> {
    vec![
        get("/v1/health", health),
        post("/v1/jobs", jobs::submit),
        get("/v1/jobs", jobs::list),
        get("/v1/jobs/{id}", jobs::get_one),
        delete("/v1/jobs/{id}", jobs::cancel),
        post("/v1/jobs/{id}/cancel", jobs::cancel),
        patch("/v1/jobs/{id}", job_control::update),
        post("/v1/jobs/{id}/hold", job_control::hold),
        post("/v1/jobs/{id}/release", job_control::release),
        get("/v1/jobs/{id}/logs", logs::logs),
        get("/v1/jobs/{id}/attach", attach::attach),
        post("/v1/jobs/{id}/signal", attach::signal),
        post("/v1/jobs/{id}/input", job_input::input),
        get("/v1/jobs/{id}/events", jobs::events),
        get("/v1/jobs/{id}/decisions", jobs::decisions),
        get("/v1/jobs/{id}/trace", live::trace),
        get("/v1/whoami", live::whoami),
        get("/v1/stream", live::stream),
        get("/v1/fairshare", live::fairshare),
        get("/metrics", jobs::metrics),
        get("/v1/nodes", jobs::nodes),
        get("/v1/images", images::list),
        post("/v1/services", services::create),
        get("/v1/services", services::list),
        get("/v1/services/{id}", services::get_one),
        get("/v1/services/{id}/events", services::events),
        post("/v1/services/{id}/scale", services::scale),
        post("/v1/services/{id}/update", services::update),
        post("/v1/services/{id}/rollback", services::rollback),
        delete("/v1/services/{id}", services::stop),
        delete("/v1/nodes/{name}", nodes::forget),
        post("/v1/nodes/{name}/drain", nodes::drain),
        post("/v1/nodes/{name}/resume", nodes::resume),
        get("/v1/accounting", accounting::list),
        get("/v1/faults", policy::faults),
        post("/v1/plugins", policy::upload).without_body_limit(),
        get("/v1/plugins", policy::list_plugins).without_body_limit(),
        get("/v1/policy", policy::show),
        put("/v1/policy", policy::set),
        post("/v1/policy/rollback", policy::rollback),
        get("/v1/policy/history", policy::history),
        get("/v1/policy/shadow", policy::shadow),
        put("/v1/policy/shadow", policy::set_shadow),
        delete("/v1/policy/shadow", policy::clear_shadow),
        get("/v1/policy/shadow/diff", policy::shadow),
        post("/v1/replay", policy::replay),
        get("/v1/openapi.json", openapi::serve),
        post("/v1/admin/gc", admin::gc),
    ]
}
