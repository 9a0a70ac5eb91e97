//! The OpenAPI 3.0 document, `GET /v1/openapi.json`: every route of `api/mod.rs` with its
//! method, parameters, request body (with the limits enforced), response codes and the
//! error body. The operations are a table written by hand ([`OPERATIONS`]); the schemas they
//! refer to are generated from the Rust types (`openapi/schemas.rs`).
//!
//! Served behind the token check like every route but `/v1/health` and `/metrics` (any
//! role may read it). A unit test reads `api/mod.rs` and checks that every route
//! registered there is in [`OPERATIONS`], and the other way round.

use super::body::MAX_JSON_BODY;
use axum::Json;
use axum::response::IntoResponse;
use schemas::{components, schema_ref};
use serde_json::{Map, Value, json};

/// What an operation takes.
#[derive(Debug, Clone, Copy)]
enum In {
    /// No body, no parameters.
    Nothing,
    /// The `{id}` path parameter.
    Id,
    /// A JSON body of this schema.
    Body(&'static str),
    /// Component bytes.
    Upload,
    /// Query parameters of the job list.
    JobQuery,
    /// `{id}` and `?task=`.
    Task,
    /// `{id}`, `?task=`, `?offset=` and `?limit=` (a log's byte range).
    LogRange,
    /// Query parameters of `GET /v1/accounting`.
    AccountingQuery,
    /// `{id}` and a JSON body of this schema.
    IdBody(&'static str),
    /// `?max_batches=` of `POST /v1/admin/gc`.
    GcQuery,
    /// A node's `{name}`, with a JSON body of this schema when given.
    Name(Option<&'static str>),
}

/// What a 2xx answer is.
#[derive(Debug, Clone, Copy)]
enum Out {
    /// JSON of this schema.
    Schema(&'static str),
    /// A JSON array of this schema.
    ListOf(&'static str),
    /// Any JSON object.
    Object,
    /// Any JSON array.
    Array,
    /// Plain text.
    Text,
    /// A stream of JSON lines.
    Ndjson,
    /// A `text/event-stream`.
    EventStream,
}

/// One route and method: (method, path, summary, input, success status, output, 4xx).
type Operation = (
    &'static str,
    &'static str,
    &'static str,
    In,
    u16,
    Out,
    &'static [u16],
);

/// Every operation of the API.
#[rustfmt::skip]
const OPERATIONS: &[Operation] = &[
    ("get", "/v1/health", "Liveness (open without a token)", In::Nothing, 200, Out::Object, &[]),
    ("get", "/metrics", "Prometheus metrics (open without a token)", In::Nothing, 200, Out::Text, &[]),
    ("get", "/v1/openapi.json", "This document", In::Nothing, 200, Out::Object, &[401]),
    ("post", "/v1/jobs", "Submit a job (user and account come from the token)", In::Body("JobSpec"), 201, Out::Schema("Submitted"), &[400, 401, 403, 413, 422, 429]),
    ("get", "/v1/jobs", "List jobs, newest first, from memory and history (at most 10000; `X-Page-Limit` says the limit applied, `X-Next-After` the `after` of the next page)", In::JobQuery, 200, Out::ListOf("JobRecord"), &[400, 401]),
    ("get", "/v1/jobs/{id}", "One job", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 404]),
    ("delete", "/v1/jobs/{id}", "Cancel a job (owner or operator)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409]),
    ("post", "/v1/jobs/{id}/cancel", "Cancel a job (owner or operator)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409]),
    ("patch", "/v1/jobs/{id}", "Change a pending job's time limit or dependencies, checked as at submit, admission policy included (owner or operator; as scontrol update)", In::IdBody("JobUpdate"), 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409, 413, 422]),
    ("post", "/v1/jobs/{id}/hold", "Hold a pending job: it does not start until released (owner or operator; as scontrol hold)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409]),
    ("post", "/v1/jobs/{id}/release", "Release a held job (owner or operator; a hold an operator or admin set: operator or admin only, 403 naming held_by; as scontrol release)", In::Id, 200, Out::Schema("JobRecord"), &[400, 401, 403, 404, 409]),
    ("get", "/v1/jobs/{id}/logs", "A byte range of a task's log as text, at most 8 MiB: by default its last 8 MiB (a smaller log whole); `X-Log-Offset`, `X-Log-Next` and `X-Log-Size` say which bytes (owner or operator)", In::LogRange, 200, Out::Text, &[400, 401, 403, 404]),
    ("get", "/v1/jobs/{id}/attach", "Follow a job live as JSON lines: state, output, heartbeats, exit (owner or operator); an interactive job is cancelled when its client goes away; at most `[http] max_streams_per_caller` streams per caller", In::Task, 200, Out::Ndjson, &[400, 401, 403, 404, 429]),
    ("post", "/v1/jobs/{id}/signal", "Send a signal to a running job's tasks (owner or operator)", In::IdBody("SignalRequest"), 200, Out::Object, &[400, 401, 403, 404, 409, 413]),
    ("post", "/v1/jobs/{id}/input", "Send input to a running interactive job's first task (`stdin` or `tty` jobs; owner or operator; as srun --pty): base64 bytes, a new terminal size, the end of input; `accepted` says how many bytes were taken, the rest is to be sent again; 409 while its input is not open", In::IdBody("JobInput"), 200, Out::Object, &[400, 401, 403, 404, 409, 413]),
    ("get", "/v1/jobs/{id}/events", "A job's lifecycle events (owner or operator)", In::Id, 200, Out::Array, &[400, 401, 403, 404]),
    ("get", "/v1/jobs/{id}/decisions", "Recent decisions about a job (owner or operator)", In::Id, 200, Out::Array, &[400, 401, 403, 404]),
    ("get", "/v1/jobs/{id}/trace", "The job's OpenTelemetry trace id (owner or operator; null when not exporting)", In::Id, 200, Out::Object, &[400, 401, 403, 404]),
    ("get", "/v1/images", "The container images in the cache of the controller's node and, under agents, of each agent's: digest, references, size, last use, in use (gantry images)", In::Nothing, 200, Out::Object, &[401]),
    ("post", "/v1/services", "Create a replicated service (as a Kubernetes Deployment): a job spec of kind `service` whose `service.replicas` (default 1) copies each run as their own job through the policy pipeline; a replica that ends is replaced (gantry service create)", In::Body("JobSpec"), 201, Out::Schema("ServiceView"), &[400, 401, 403, 413, 422, 429]),
    ("get", "/v1/services", "Replicated services with their live replicas: job, state, node, port, health, restarts (gantry service ls)", In::Nothing, 200, Out::ListOf("ServiceView"), &[401]),
    ("get", "/v1/services/{id}", "One replicated service with its live replicas (gantry service ID)", In::Id, 200, Out::Schema("ServiceView"), &[400, 401, 404]),
    ("post", "/v1/services/{id}/scale", "Set the number of replicas (owner or operator; gantry service scale): missing ones are submitted, extra ones cancelled, newest and pending first", In::IdBody("ScaleRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413]),
    ("get", "/v1/services/{id}/events", "A replicated service's events, oldest first (owner or operator; gantry service events): created, scaled, each autoscaling decision with the metric values that caused it, updates, rollouts completed or rolled back, stopped", In::Id, 200, Out::Array, &[400, 401, 403, 404]),
    ("post", "/v1/services/{id}/update", "Change a replicated service (owner or operator; gantry service update): a new image, argv or env is a new revision, rolled out replica by replica within rollout.max_surge/max_unavailable, and rolled back by itself when not healthy within rollout.progress_deadline_s; rollout and autoscale settings take effect at once", In::IdBody("UpdateRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413]),
    ("post", "/v1/services/{id}/rollback", "Make an earlier revision current again (owner or operator; gantry service rollback): by default the one before the current one; rolled out as an update", In::IdBody("RollbackRequest"), 200, Out::Schema("ServiceView"), &[400, 401, 403, 404, 409, 413]),
    ("delete", "/v1/services/{id}", "Stop a replicated service (owner or operator; gantry service stop): its replicas are cancelled and none is made again", In::Id, 200, Out::Schema("ServiceView"), &[400, 401, 403, 404]),
    ("get", "/v1/fairshare", "Decayed GPU-seconds per user and account behind fair-share priority (a user sees their own)", In::Nothing, 200, Out::Object, &[401]),
    ("get", "/v1/whoami", "The caller's user, token name, accounts and role (an open daemon: role admin, no user)", In::Nothing, 200, Out::Object, &[401]),
    ("get", "/v1/stream", "Server-sent events: `changed` with the parts (jobs, nodes, policy, faults) that changed, at once and then on each change; at most `[http] max_streams_per_caller` streams per caller", In::Nothing, 200, Out::EventStream, &[401, 429]),
    ("get", "/v1/nodes", "Nodes with per-GPU allocation", In::Nothing, 200, Out::ListOf("Node"), &[401]),
    ("post", "/v1/nodes/{name}/drain", "Drain a node (operator): running jobs continue, nothing new starts there; kept across restarts", In::Name(Some("DrainRequest")), 200, Out::Schema("Node"), &[400, 401, 403, 404, 413]),
    ("post", "/v1/nodes/{name}/resume", "Resume a drained node (operator)", In::Name(None), 200, Out::Schema("Node"), &[400, 401, 403, 404]),
    ("delete", "/v1/nodes/{name}", "Remove a node that is down (operator): its agent's node, with no task of a running job left on it; an agent reporting again under the name joins anew", In::Name(None), 200, Out::Object, &[401, 403, 404, 409]),
    ("get", "/v1/accounting", "Per-task usage records and GPU/CPU-hour totals per user and account (a user sees their own)", In::AccountingQuery, 200, Out::Schema("AccountingReport"), &[400, 401, 403]),
    ("get", "/v1/faults", "Recent plugin faults", In::Nothing, 200, Out::Array, &[401]),
    ("post", "/v1/plugins", "Upload a component (admin); validated before it is stored", In::Upload, 201, Out::Object, &[400, 401, 403, 413, 422]),
    ("get", "/v1/plugins", "Registered plugins", In::Nothing, 200, Out::Array, &[401]),
    ("get", "/v1/policy", "The active pipeline", In::Nothing, 200, Out::Object, &[401]),
    ("put", "/v1/policy", "Hot-swap the pipeline after a dry run (admin)", In::Body("PipelineSpec"), 200, Out::Object, &[400, 401, 403, 413, 422]),
    ("post", "/v1/policy/rollback", "Back to the previous pipeline (admin)", In::Nothing, 200, Out::Object, &[401, 403, 409, 422]),
    ("get", "/v1/policy/history", "Pipeline versions", In::Nothing, 200, Out::Array, &[401]),
    ("get", "/v1/policy/shadow", "The shadow pipeline and its differences", In::Nothing, 200, Out::Object, &[401, 404]),
    ("put", "/v1/policy/shadow", "Set a shadow pipeline (admin)", In::Body("PipelineSpec"), 200, Out::Object, &[400, 401, 403, 413, 422]),
    ("delete", "/v1/policy/shadow", "Clear the shadow pipeline (admin)", In::Nothing, 200, Out::Object, &[401, 403, 404]),
    ("post", "/v1/admin/gc", "Delete what retention no longer keeps, now (admin); `done` says whether anything is left", In::GcQuery, 200, Out::Object, &[400, 401, 403]),
    ("get", "/v1/policy/shadow/diff", "The shadow pipeline's differences", In::Nothing, 200, Out::Object, &[401, 404]),
    ("post", "/v1/replay", "What-if replay over recorded cycles (admin)", In::Body("ReplayRequest"), 200, Out::Object, &[400, 401, 403, 413, 422]),
];

fn describe(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Malformed or invalid request; `field` names what is wrong",
        401 => "No or unknown API token (`field`: `authorization`)",
        403 => {
            "The token's role or accounts do not allow this (e.g. a user's `tier`), or a browser page of another origin sent it (`field`: `origin`)"
        }
        404 => "No such job or node, or nothing set",
        409 => "Conflicts with the current state (already ended, no previous version)",
        413 => {
            "Body, or a submission with its array expanded, over the limit (`field`: `body` or `array`)"
        }
        422 => {
            "Well-formed but refused (unsatisfiable, invalid plugin or pipeline, dry run failed)"
        }
        415 => "A body whose Content-Type the route does not take (`field`: `content-type`)",
        421 => {
            "A Host this server does not answer to (`field`: `host`; see `[http] allowed_hosts`)"
        }
        429 => {
            "Too many pending jobs of the user (`field`: `user`), or too many open streams of the caller"
        }
        _ => "See the message",
    }
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true,
           "schema": {"type": "integer", "format": "int64", "minimum": 0}})
}

fn query_param(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema})
}

fn parameters(input: In) -> Vec<Value> {
    let text = || json!({"type": "string"});
    match input {
        In::Id | In::IdBody(_) => vec![id_param()],
        In::Name(_) => vec![json!({"name": "name", "in": "path", "required": true,
                                   "schema": {"type": "string"}})],
        In::Task => vec![
            id_param(),
            query_param("task", json!({"type": "integer", "minimum": 0})),
        ],
        In::LogRange => vec![
            id_param(),
            query_param("task", json!({"type": "integer", "minimum": 0})),
            query_param(
                "offset",
                json!({"type": "integer", "minimum": 0, "description": "first byte; without it, the log's tail"}),
            ),
            query_param(
                "limit",
                json!({"type": "integer", "minimum": 0, "description": "most bytes (default and cap: 8388608, 8 MiB)"}),
            ),
        ],
        In::JobQuery => vec![
            query_param(
                "state",
                json!({"type": "string", "enum": ["pending", "running", "succeeded", "failed", "cancelled", "timed_out", "preempted"]}),
            ),
            query_param("user", text()),
            query_param("account", text()),
            query_param("queue", text()),
            query_param(
                "since",
                json!({"type": "string", "description": "submitted at or after: ms since the Unix epoch or RFC 3339"}),
            ),
            query_param(
                "until",
                json!({"type": "string", "description": "submitted before: ms since the Unix epoch or RFC 3339"}),
            ),
            query_param(
                "after",
                json!({"type": "integer", "minimum": 0, "description": "only jobs older than this id: the `X-Next-After` of the previous page"}),
            ),
            query_param(
                "limit",
                json!({"type": "integer", "minimum": 0, "description": "most jobs, newest first (default 1000; a limit over 10000 is clamped to 10000)"}),
            ),
        ],
        In::AccountingQuery => super::accounting::query_parameters(),
        In::GcQuery => vec![query_param(
            "max_batches",
            json!({"type": "integer", "minimum": 1, "description": "most batches of `retention.gc_batch` deletes before answering (default: until done)"}),
        )],
        In::Nothing | In::Body(_) | In::Upload => Vec::new(),
    }
}

fn request_body(input: In) -> Option<Value> {
    match input {
        In::Body(schema) | In::IdBody(schema) | In::Name(Some(schema)) => {
            let mut media = json!({"schema": schema_ref(schema)});
            if let Some(example) = example(schema) {
                media["example"] = example;
            }
            Some(json!({
                "required": true,
                "description": format!("JSON, at most {MAX_JSON_BODY} bytes (1 MiB); nesting deeper than 128 levels is a 400"),
                "content": {"application/json": media},
            }))
        }
        In::Upload => Some(json!({
            "required": true,
            "description": "A WebAssembly component, at most `plugins.max_upload_mib` MiB (default 64); checked as a component before it is stored",
            "content": {
                "application/wasm": {"schema": {"type": "string", "format": "binary"}},
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
        })),
        _ => None,
    }
}

/// A body the daemon accepts, for the bodies whose schema cannot say everything the server
/// checks: which plugins are registered (a pipeline) or which argv runs (a job).
fn example(schema: &str) -> Option<Value> {
    let pipeline = || serde_json::to_value(gantry_policy::default_spec()).ok();
    match schema {
        "JobSpec" => Some(json!({"name": "example", "argv": ["true"]})),
        "PipelineSpec" => pipeline(),
        "ReplayRequest" => Some(json!({"pipeline": pipeline()?, "since_s": 3600})),
        _ => None,
    }
}

fn success(out: Out) -> Value {
    let (media, schema) = match out {
        Out::Schema(s) => ("application/json", schema_ref(s)),
        Out::ListOf(s) => (
            "application/json",
            json!({"type": "array", "items": schema_ref(s)}),
        ),
        Out::Object => ("application/json", json!({"type": "object"})),
        Out::Array => ("application/json", json!({"type": "array"})),
        Out::Text => ("text/plain", json!({"type": "string"})),
        Out::Ndjson => ("application/x-ndjson", json!({"type": "string"})),
        // Each event, as OpenAPI 3.0 readers (schemathesis among them) take this schema.
        Out::EventStream => ("text/event-stream", super::live::event_schema()),
    };
    json!({ media: { "schema": schema } })
}

fn operation(op: &Operation) -> Value {
    let (method, path, summary, input, ok, out, errors) = *op;
    let mut responses = Map::new();
    responses.insert(
        ok.to_string(),
        json!({"description": describe(ok), "content": success(out)}),
    );
    // Every route: the Host and Origin checks; a route with a body: its Content-Type.
    let mut codes: Vec<u16> = errors.to_vec();
    codes.extend([403, 421]);
    if request_body(input).is_some() {
        codes.push(415);
    }
    codes.sort_unstable();
    codes.dedup();
    for code in &codes {
        responses.insert(
            code.to_string(),
            json!({
                "description": describe(*code),
                "content": {"application/json": {"schema": schema_ref("Error")}},
            }),
        );
    }
    let id = operation_id(method, path);
    if (method, path) == ("post", "/v1/jobs")
        && let Some(created) = responses.get_mut("201")
    {
        created["links"] = job_links();
    }
    if let Some(headers) = response_headers(method, path)
        && let Some(answer) = responses.get_mut(&ok.to_string())
    {
        answer["headers"] = headers;
    }
    let mut o = json!({
        "operationId": id,
        "summary": summary,
        "parameters": parameters(input),
        "responses": responses,
    });
    if let Some(body) = request_body(input) {
        o["requestBody"] = body;
    }
    if !errors.contains(&401) {
        o["security"] = json!([]);
    }
    o
}

/// The headers of a 2xx answer that says which part of a whole it holds.
fn response_headers(method: &str, path: &str) -> Option<Value> {
    let int = |description: &str| json!({"description": description, "schema": {"type": "integer", "minimum": 0}});
    match (method, path) {
        ("get", "/v1/jobs") => Some(json!({
            "X-Page-Limit": int("the limit applied (the one asked, at most 10000; 1000 by default)"),
        })),
        ("get", "/v1/jobs/{id}/logs") => Some(json!({
            "X-Log-Offset": int("the offset of the first byte returned"),
            "X-Log-Next": int("the offset after the last byte returned (ask from there to follow)"),
            "X-Log-Size": int("the log's size when read (a log on the controller's node only)"),
        })),
        _ => None,
    }
}

/// Links from a submitted job to the operations on it (for stateful testers).
fn job_links() -> Value {
    let mut links = Map::new();
    for (method, path, ..) in OPERATIONS.iter().filter(|op| op.1.contains("{id}")) {
        let target = operation_id(method, path);
        links.insert(
            target.clone(),
            json!({"operationId": target, "parameters": {"id": "$response.body#/id"}}),
        );
    }
    Value::Object(links)
}

fn operation_id(method: &str, path: &str) -> String {
    format!("{method}{path}")
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in OPERATIONS {
        let entry = paths
            .entry(op.1.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[op.0] = operation(op);
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Gantry",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "GPU-cluster scheduler API. Errors are `{\"error\": {\"code\", \"message\", \"field\"}}` with a 4xx status.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": components(),
    })
}

/// `GET /v1/openapi.json`.
pub(super) async fn serve() -> impl IntoResponse {
    Json(document())
}

mod schemas;
#[cfg(test)]
mod tests;
