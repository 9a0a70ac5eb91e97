//! The agent's HTTP routes for the controller (axum): launch, signal, a free port, its
//! image cache, log reads, an interactive task's input and services' check commands, every one behind the cluster token (401 with a JSON [`ProtoError`] otherwise).
//! Refusals are JSON [`ProtoError`]s naming the field concerned; 4xx means "do not retry".
//!
//! Owns: routes, the token check, request parsing and status mapping. Does not own the task
//! table (`tasks`, `launch`).

use super::tasks::{TaskError, TaskTable};
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use gantry_api::cluster::{
    CHECK_PATH, CheckReply, CheckRequest, FREE_PORT_PATH, FreePort, IMAGES_PATH, INPUT_PATH,
    InputReply, InputRequest, LAUNCH_PATH, LaunchRequest, PORT_OWNER_PATH, PROTOCOL_VERSION,
    PortOwnerReply, PortOwnerRequest, ProtoError, SIGNAL_PATH, SignalRequest, TaskKey,
};
use gantry_api::cluster_term::Highest;
use gantry_api::cluster_token::token_matches;
use gantry_node::executor::{InputError, task_input};
use http::StatusCode;
use serde::Deserialize;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

/// Route of log reads.
pub(crate) const LOG_PATH: &str = "/agent/v1/tasks/{job}/{task}/{run}/log";

/// Most bytes one log read returns.
pub(crate) const MAX_LOG_READ: u64 = 4 << 20;

/// The routes over `table`, requiring `token` and a controller term no older than the
/// newest seen (`terms`).
pub(crate) fn router(table: Arc<TaskTable>, token: &str, terms: Arc<Highest>) -> Router {
    let token: Arc<str> = Arc::from(token);
    Router::new()
        .route(LAUNCH_PATH, post(launch))
        .route(SIGNAL_PATH, post(signal))
        .route(FREE_PORT_PATH, get(free_port))
        .route(IMAGES_PATH, get(images))
        .route(LOG_PATH, get(log))
        .route(INPUT_PATH, post(input))
        .route(CHECK_PATH, post(check))
        .route(PORT_OWNER_PATH, post(port_owner))
        .fallback(|| async { refuse(StatusCode::NOT_FOUND, "no such route".into(), None) })
        .with_state(table)
        .layer(axum::middleware::from_fn_with_state(
            terms,
            require_current_term,
        ))
        .layer(axum::middleware::from_fn_with_state(token, require_token))
        // Host, Origin and Content-Type first (`gantry_http::checks`).
        .layer(axum::middleware::from_fn(
            gantry_http::checks::cluster_guard,
        ))
}

async fn require_token(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    if token_matches(given, &token) {
        next.run(request).await
    } else {
        let message = "missing or wrong cluster token (Authorization: Bearer <[cluster] token>)";
        refuse(StatusCode::UNAUTHORIZED, message.into(), None)
    }
}

/// Refuses a call from a controller whose term is over (409: never retried by it).
async fn require_current_term(
    State(terms): State<Arc<Highest>>,
    request: Request,
    next: Next,
) -> Response {
    let term = gantry_api::cluster_term::parse(
        request
            .headers()
            .get(gantry_api::cluster_term::TERM_HEADER)
            .and_then(|h| h.to_str().ok()),
    );
    if terms.admits(term) {
        return next.run(request).await;
    }
    let newest = terms.get();
    tracing::warn!(
        term,
        newest,
        "refused a call from a controller that no longer leads"
    );
    let message =
        format!("term {term} is over: a controller of term {newest} leads; this one must not act");
    refuse(StatusCode::CONFLICT, message, Some("x-gantry-term"))
}

fn refuse(status: StatusCode, error: String, field: Option<&str>) -> Response {
    let body = ProtoError {
        error,
        field: field.map(str::to_string),
        controller: None,
    };
    (status, Json(body)).into_response()
}

fn task_error(e: &TaskError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::warn!("{e}");
    }
    refuse(status, e.to_string(), e.field())
}

/// Parses a request body; a body with another `protocol` is refused as such (409) before
/// its fields are read, so a newer controller learns why.
fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, TaskError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| TaskError::Malformed(e.to_string()))?;
    if let Some(given) = value.get("protocol").and_then(serde_json::Value::as_u64)
        && given != u64::from(PROTOCOL_VERSION)
    {
        let given = u32::try_from(given).unwrap_or(u32::MAX);
        return Err(TaskError::Protocol { given });
    }
    serde_json::from_value(value).map_err(|e| TaskError::Malformed(e.to_string()))
}

async fn launch(State(table): State<Arc<TaskTable>>, body: Bytes) -> Response {
    let request: LaunchRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return task_error(&e),
    };
    match tokio::task::spawn_blocking(move || table.launch(&request)).await {
        Ok(Ok(reply)) => Json(reply).into_response(),
        Ok(Err(e)) => task_error(&e),
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("launch failed: {e}"),
            None,
        ),
    }
}

async fn signal(State(table): State<Arc<TaskTable>>, body: Bytes) -> Response {
    let request: SignalRequest = match parse(&body) {
        Ok(r) => r,
        Err(e) => return task_error(&e),
    };
    match table.signal(&request) {
        Ok(()) => Json(serde_json::json!({})).into_response(),
        Err(e) => task_error(&e),
    }
}

async fn images(State(table): State<Arc<TaskTable>>) -> Response {
    let listed = tokio::task::spawn_blocking(move || {
        gantry_node::container::cache::node_images(table.executor.containers())
    })
    .await;
    match listed {
        Ok(Ok(images)) => Json(images).into_response(),
        Ok(Err(e)) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reading the image cache: {e}"),
            None,
        ),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
    }
}

async fn free_port() -> Response {
    match std::net::TcpListener::bind("0.0.0.0:0").and_then(|l| l.local_addr()) {
        Ok(addr) => Json(FreePort { port: addr.port() }).into_response(),
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot find a free port: {e}"),
            None,
        ),
    }
}

#[derive(Debug, Deserialize)]
struct LogQuery {
    #[serde(default)]
    offset: u64,
    #[serde(default)]
    limit: Option<u64>,
}

/// Input for an interactive task of this agent (409 when its input is not open).
async fn input(
    State(table): State<Arc<TaskTable>>,
    path: Result<Path<(u64, u32, u64)>, axum::extract::rejection::PathRejection>,
    body: Bytes,
) -> Response {
    let Path((job, task, run)) = match path {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.body_text(), Some("key")),
    };
    let request: InputRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string(), None),
    };
    let data = match base64::engine::general_purpose::STANDARD.decode(request.data.as_bytes()) {
        Ok(d) => d,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.to_string(), Some("data")),
    };
    let fifo = task_input::fifo_path(&TaskTable::exit_path(&table.dir(TaskKey {
        job,
        task,
        run,
    })));
    let sent = tokio::task::spawn_blocking(move || {
        task_input::deliver(&fifo, &data, request.resize, request.eof)
    })
    .await;
    match sent {
        Ok(Ok(accepted)) => Json(InputReply { accepted }).into_response(),
        Ok(Err(InputError::NotOpen)) => refuse(
            StatusCode::CONFLICT,
            "the task's input is not open".into(),
            None,
        ),
        Ok(Err(e)) => refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None),
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("input failed: {e}"),
            None,
        ),
    }
}

async fn log(
    State(table): State<Arc<TaskTable>>,
    path: Result<Path<(u64, u32, u64)>, axum::extract::rejection::PathRejection>,
    query: Result<Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Path((job, task, run)) = match path {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.body_text(), Some("key")),
    };
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.body_text(), Some("offset")),
    };
    let key = TaskKey { job, task, run };
    let dir = table.dir(key);
    let limit = query.limit.unwrap_or(MAX_LOG_READ).min(MAX_LOG_READ);
    let read = tokio::task::spawn_blocking(move || {
        if !dir.is_dir() {
            return Err(TaskError::Unknown(key));
        }
        read_log(&TaskTable::log_path(&dir), query.offset, limit).map_err(|source| {
            TaskError::Prepare {
                key,
                what: "cannot read its log".into(),
                source,
            }
        })
    })
    .await;
    match read {
        Ok(Ok(bytes)) => (
            [(http::header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        Ok(Err(e)) => task_error(&e),
        Err(e) => refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("log read failed: {e}"),
            None,
        ),
    }
}

/// Longest health-check command accepted, ms.
const MAX_CHECK_MS: u64 = 600_000;

/// Who listens on a service's port on this node, and the uid the job's tasks run as here
/// (the controller's endpoint sends a replica traffic only while that uid alone listens).
async fn port_owner(State(table): State<Arc<TaskTable>>, body: Bytes) -> Response {
    let request: PortOwnerRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("not a port query: {e}"),
                None,
            );
        }
    };
    let uid = match table.executor.identity(&request.user, request.anonymous) {
        Ok(Some(who)) => Some(who.uid),
        Ok(None) => Some(gantry_node::sys::effective_uid()),
        Err(_) => None,
    };
    let holders = gantry_node::port_owner::listeners(request.port);
    Json(PortOwnerReply { holders, uid }).into_response()
}

/// Runs a service's check command in its rank-0 run's directory (`work/` when the task runs
/// as another user), as the job's user in the task's cgroup, like the controller does for
/// services on its own node.
async fn check(State(table): State<Arc<TaskTable>>, body: Bytes) -> Response {
    let request: CheckRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not a check: {e}"), None),
    };
    let dir = table.dir(request.key);
    if !dir.is_dir() {
        return task_error(&TaskError::Unknown(request.key));
    }
    let limit = std::time::Duration::from_millis(request.timeout_ms.clamp(1, MAX_CHECK_MS));
    if let Some(path) = &request.http_path {
        let Some(port) = request.port else {
            return refuse(
                StatusCode::BAD_REQUEST,
                "an HTTP check needs a port".into(),
                Some("port"),
            );
        };
        let owner = table
            .executor
            .identity(&request.user, request.anonymous)
            .ok()
            .flatten()
            .map(|who| who.uid);
        let result = gantry_node::health_probe::http_on_this_node(path, port, owner, limit).await;
        return Json(verdict(result)).into_response();
    }
    let work = dir.join("work");
    let workdir = match &request.workdir {
        Some(own) => std::path::PathBuf::from(own),
        None if work.is_dir() => work,
        None => dir,
    };
    let run = gantry_node::health_probe::CommandRun {
        argv: &request.command,
        user: (&request.user, request.anonymous),
        task: (request.key.job, request.key.task),
        env: &request.env,
        workdir: &workdir,
    };
    let result = gantry_node::health_probe::run_command(&run, limit, &table.executor).await;
    Json(verdict(result)).into_response()
}

/// A check's result as the controller reads it.
fn verdict(result: Result<(), gantry_node::health_probe::ProbeError>) -> CheckReply {
    match result {
        Ok(()) => CheckReply {
            healthy: true,
            message: None,
        },
        Err(e) => CheckReply {
            healthy: false,
            message: Some(e.to_string()),
        },
    }
}

/// Up to `limit` bytes of the log from `offset` (nothing when there is no log yet).
fn read_log(path: &std::path::Path, offset: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}
