//! Every route under the token check, each method of each path once, with its handler and
//! its documentation (`route.rs`). The router (`mod.rs`) and the OpenAPI document
//! (`openapi.rs`, served here at `GET /v1/openapi.json`) are both built from [`all`], so a
//! route is added here and nowhere else in the server.
//!
//! Owns the list. The handlers live with their area (`jobs.rs`, `policy.rs`, ...); the
//! layers every route shares (body limit, authentication, guard) are `mod.rs`'s.

use super::route::{In, Out, Route, delete, doc, get, patch, post, put};
use super::{
    accounting, admin, attach, images, job_control, job_input, jobs, join_tokens, live, logs,
    nodes, openapi, policy, services,
};
use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use gantry_controller::Admin;

/// `GET /v1/health`: liveness, the node's isolation and where state and history live.
async fn health(State(s): State<Admin>) -> Json<serde_json::Value> {
    let about = s.about();
    Json(serde_json::json!({
        "status": "ok",
        "isolation": about.isolation,
        "store": {"state": about.state_backend, "history": about.history_backend},
        "leadership": crate::leadership::status(),
    }))
}

/// `GET /v1/openapi.json`: the document of [`all`].
async fn openapi_document() -> impl IntoResponse {
    Json(openapi::document(&all()))
}

/// Every route under the token check.
#[rustfmt::skip]
pub(super) fn all() -> Vec<Route> {
    vec![
        get("/v1/health", health, doc("Liveness (open without a token)", In::Nothing, 200, Out::Object, &[])),
        post("/v1/jobs", jobs::submit, doc("Submit a job (user and account come from the token)", In::Body("JobSpec"), 201, Out::Schema("Submitted"), &[400, 401, 403, 413, 422, 429])),
        post("/v1/jobs/forecast", jobs::forecast, doc("When a job that is not submitted would start (as sbatch --test-only), or a variant of a pending job (`replaces`): the forecast's median and 90th percentile and why; a shape no node can hold answers `never: ...`; one at a time (429 while another runs)", In::Body("WhatIfRequest"), 200, Out::Schema("StartForecast"), &[400, 401, 403, 413, 422, 429])),
        get("/v1/jobs", jobs::list, doc("List jobs, newest first, from memory and history (at most 10000; `X-Page-Limit` says the limit applied, `X-Next-After` the `after` of the next page)", In::JobQuery, 200, Out::ListOf("JobRecord"), &[400, 401])),
        get("/v1/jobs/{id}", jobs::get_one, doc("One job", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 404])),
        delete("/v1/jobs/{id}", jobs::cancel, doc("Cancel a job (owner or operator)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409])),
        post("/v1/jobs/{id}/cancel", jobs::cancel, doc("Cancel a job (owner or operator)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409])),
        patch("/v1/jobs/{id}", job_control::update, doc("Change a pending job's time limit or dependencies, checked as at submit, admission policy included (owner or operator; as scontrol update)", In::IdBody("JobUpdate"), 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409, 413, 422])),
        post("/v1/jobs/{id}/hold", job_control::hold, doc("Hold a pending job: it does not start until released (owner or operator; as scontrol hold)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409])),
        post("/v1/jobs/{id}/release", job_control::release, doc("Release a held job (owner or operator; a hold an operator or admin set: operator or admin only, 403 naming held_by; as scontrol release)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409])),
        post("/v1/jobs/{id}/requeue", job_control::requeue, doc("Requeue a running job: its tasks are stopped and it runs again from the start (owner or operator; as scontrol requeue)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409])),
        get("/v1/jobs/{id}/logs", logs::logs, doc("A byte range of a task's log as text, at most 8 MiB: by default its last 8 MiB (a smaller log whole); `X-Log-Offset`, `X-Log-Next` and `X-Log-Size` say which bytes (owner or operator)", In::LogRange, 200, Out::Text, &[400, 401, 403, 404])),
        get("/v1/jobs/{id}/attach", attach::attach, doc("Follow a job live as JSON lines: state, output, heartbeats, exit (owner or operator); an interactive job is cancelled when its client goes away; at most `[http] max_streams_per_caller` streams per caller", In::Task, 200, Out::Ndjson, &[400, 401, 403, 404, 429])),
        post("/v1/jobs/{id}/signal", attach::signal, doc("Send a signal to a running job's tasks (owner or operator)", In::IdBody("SignalRequest"), 200, Out::Object, &[400, 401, 403, 404, 409, 413])),
        post("/v1/jobs/{id}/input", job_input::input, doc("Send input to a running interactive job's first task (`stdin` or `tty` jobs; owner or operator; as srun --pty): base64 bytes, a new terminal size, the end of input; `accepted` says how many bytes were taken, the rest is to be sent again; 409 while its input is not open", In::IdBody("JobInput"), 200, Out::Object, &[400, 401, 403, 404, 409, 413])),
        get("/v1/jobs/{id}/events", jobs::events, doc("A job's lifecycle events (owner or operator)", In::Id, 200, Out::Array, &[400, 401, 403, 404])),
        get("/v1/jobs/{id}/decisions", jobs::decisions, doc("Recent decisions about a job (owner or operator)", In::Id, 200, Out::Array, &[400, 401, 403, 404])),
        get("/v1/jobs/{id}/trace", live::trace, doc("The job's OpenTelemetry trace id (owner or operator; null when not exporting)", In::Id, 200, Out::Object, &[400, 401, 403, 404])),
        get("/v1/whoami", live::whoami, doc("The caller's user, token name, accounts and role (an open daemon: role admin, no user)", In::Nothing, 200, Out::Object, &[401])),
        get("/v1/stream", live::stream, doc("Server-sent events: `changed` with the parts (jobs, nodes, policy, faults) that changed, at once and then on each change; at most `[http] max_streams_per_caller` streams per caller", In::Nothing, 200, Out::EventStream, &[401, 429])),
        get("/v1/fairshare", live::fairshare, doc("Decayed GPU-seconds per user and account behind fair-share priority (a user sees their own)", In::Nothing, 200, Out::Object, &[401])),
        get("/metrics", jobs::metrics, doc("Prometheus metrics (open without a token)", In::Nothing, 200, Out::Text, &[])),
        get("/v1/nodes", jobs::nodes, doc("Nodes with per-GPU allocation", In::Nothing, 200, Out::ListOf("Node"), &[401])),
        get("/v1/images", images::list, doc("The container images in the cache of the controller's node and, under agents, of each agent's: digest, references, size, last use, in use (gantry images)", In::Nothing, 200, Out::Object, &[401])),
        post("/v1/services", services::create, doc("Create a replicated service (as a Kubernetes Deployment): a job spec of kind `service` whose `service.replicas` (default 1) copies each run as their own job through the policy pipeline; a replica that ends is replaced (gantry service create)", In::Body("JobSpec"), 201, Out::Schema("ServiceView"), &[400, 401, 403, 413, 422, 429])),
        get("/v1/services", services::list, doc("Replicated services with their live replicas: job, state, node, port, health, restarts (gantry service ls)", In::Nothing, 200, Out::ListOf("ServiceView"), &[401])),
        get("/v1/services/{id}", services::get_one, doc("One replicated service with its live replicas (gantry service ID)", In::Id, 200, Out::Schema("ServiceView"), &[400, 401, 404])),
        get("/v1/services/{id}/events", services::events, doc("A replicated service's events, oldest first (owner or operator; gantry service events): created, scaled, each autoscaling decision with the metric values that caused it, updates, rollouts completed or rolled back, stopped", In::Id, 200, Out::Array, &[400, 401, 403, 404])),
        post("/v1/services/{id}/scale", services::scale, doc("Set the number of replicas (owner or operator; gantry service scale): missing ones are submitted, extra ones cancelled, newest and pending first", In::IdBody("ScaleRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413])),
        post("/v1/services/{id}/update", services::update, doc("Change a replicated service (owner or operator; gantry service update): a new image, argv or env is a new revision, rolled out replica by replica within rollout.max_surge/max_unavailable, and rolled back by itself when not healthy within rollout.progress_deadline_s; rollout and autoscale settings take effect at once", In::IdBody("UpdateRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413])),
        post("/v1/services/{id}/rollback", services::rollback, doc("Make an earlier revision current again (owner or operator; gantry service rollback): by default the one before the current one; rolled out as an update", In::IdBody("RollbackRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413])),
        delete("/v1/services/{id}", services::stop, doc("Stop a replicated service (owner or operator; gantry service stop): its replicas are cancelled and none is made again", In::Id, 200, Out::Schema("ServiceView"), &[400, 401, 403, 404])),
        delete("/v1/nodes/{name}", nodes::forget, doc("Remove a node that is down (operator): its agent's node, with no task of a running job left on it; an agent reporting again under the name joins anew", In::Name(None), 200, Out::Object, &[401, 403, 404, 409])),
        post("/v1/nodes/{name}/drain", nodes::drain, doc("Drain a node (operator): running jobs continue, nothing new starts there; kept across restarts", In::Name(Some("DrainRequest")), 200, Out::Schema("Node"), &[400, 401, 403, 404, 413])),
        post("/v1/nodes/{name}/resume", nodes::resume, doc("Resume a drained node (operator)", In::Name(None), 200, Out::Schema("Node"), &[400, 401, 403, 404])),
        get("/v1/accounting", accounting::list, doc("Per-task usage records and GPU/CPU-hour totals per user and account (a user sees their own)", In::AccountingQuery, 200, Out::Schema("AccountingReport"), &[400, 401, 403])),
        get("/v1/faults", policy::faults, doc("Recent plugin faults", In::Nothing, 200, Out::Array, &[401])),
        post("/v1/plugins", policy::upload, doc("Upload a component (admin); validated before it is stored", In::Upload, 201, Out::Object, &[400, 401, 403, 413, 422])).without_body_limit(),
        get("/v1/plugins", policy::list_plugins, doc("Registered plugins", In::Nothing, 200, Out::Array, &[401])).without_body_limit(),
        get("/v1/policy", policy::show, doc("The active pipeline", In::Nothing, 200, Out::Object, &[401])),
        put("/v1/policy", policy::set, doc("Hot-swap the pipeline after a dry run (admin)", In::Body("PipelineSpec"), 200, Out::Object, &[400, 401, 403, 413, 422])),
        post("/v1/policy/rollback", policy::rollback, doc("Back to the previous pipeline (admin)", In::Nothing, 200, Out::Object, &[401, 403, 409, 422])),
        get("/v1/policy/history", policy::history, doc("Pipeline versions", In::Nothing, 200, Out::Array, &[401])),
        get("/v1/policy/shadow", policy::shadow, doc("The shadow pipeline and its differences", In::Nothing, 200, Out::Object, &[401, 404])),
        put("/v1/policy/shadow", policy::set_shadow, doc("Set a shadow pipeline (admin)", In::Body("PipelineSpec"), 200, Out::Object, &[400, 401, 403, 413, 422])),
        delete("/v1/policy/shadow", policy::clear_shadow, doc("Clear the shadow pipeline (admin)", In::Nothing, 200, Out::Object, &[401, 403, 404])),
        get("/v1/policy/shadow/diff", policy::shadow, doc("The shadow pipeline's differences", In::Nothing, 200, Out::Object, &[401, 404])),
        post("/v1/replay", policy::replay, doc("What-if replay over recorded cycles (admin)", In::Body("ReplayRequest"), 200, Out::Object, &[400, 401, 403, 413, 422])),
        get("/v1/openapi.json", openapi_document, doc("This document", In::Nothing, 200, Out::Object, &[401])),
        post("/v1/join-tokens", join_tokens::create, doc("Make a join token (admin; gantry token join): `ttl_s` (60 to 604800, default 3600) and `uses` (nodes it may join, 1 to 1000, default 1); the token is shown once, with the `gantry agent join` command; 409 without a cluster CA (gantry init)", In::Body("JoinTokenRequest"), 201, Out::Schema("JoinTokenCreated"), &[400, 401, 403, 409, 413])),
        get("/v1/join-tokens", join_tokens::list, doc("Join tokens, never their secrets: id, state (valid, expired, used, revoked), expiry, uses left, the nodes that joined with each (admin; gantry token list)", In::Nothing, 200, Out::ListOf("JoinTokenView"), &[401, 403])),
        delete("/v1/join-tokens/{name}", join_tokens::revoke, doc("Revoke a join token by its id, gjt_<id> (admin; gantry token revoke)", In::Name(None), 200, Out::Object, &[401, 403, 404])),
        post("/v1/admin/gc", admin::gc, doc("Delete what retention no longer keeps, now (admin); `done` says whether anything is left", In::GcQuery, 200, Out::Object, &[400, 401, 403])),
    ]
}
