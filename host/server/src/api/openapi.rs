//! The OpenAPI 3.0 document, `GET /v1/openapi.json`: every route of `api/mod.rs` with its
//! method, parameters, request body (with the limits enforced), response codes and the
//! error body. The operations are generated from the route list (`routes.rs`, each route
//! with its [`Doc`](super::route::Doc)); the schemas they refer to from the Rust types
//! (`openapi/schemas.rs`).
//!
//! Served behind the token check like every route but `/v1/health` and `/metrics` (any
//! role may read it).

use super::body::MAX_JSON_BODY;
use super::route::{In, Out, Route};
use schemas::{components, schema_ref};
use serde_json::{Map, Value, json};

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

fn operation(route: &Route, routes: &[Route]) -> Value {
    let (method, path) = (route.method, route.path);
    let d = route.doc;
    let (summary, input, ok, out, errors) = (d.summary, d.input, d.ok, d.out, d.errors);
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
        created["links"] = job_links(routes);
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
fn job_links(routes: &[Route]) -> Value {
    let mut links = Map::new();
    for route in routes.iter().filter(|r| r.path.contains("{id}")) {
        let target = operation_id(route.method, route.path);
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

/// The whole document, of `routes` (`routes::all`).
pub(super) fn document(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for route in routes {
        let entry = paths
            .entry(route.path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[route.method] = operation(route, routes);
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

mod schemas;
#[cfg(test)]
mod tests;
