//! What the web dashboard needs beyond the plain resources: `GET /v1/whoami` (the
//! caller's user, accounts and role, so the page hides what the role may not do),
//! `GET /v1/stream` (server-sent events saying *what* changed),
//! `GET /v1/jobs/{id}/trace` (the job's OpenTelemetry trace id) and `GET /v1/fairshare`
//! (the decayed GPU usage the fair-share priority is computed from).
//!
//! Why server-sent events that carry no data: the page must update live, but the
//! resources (`/v1/nodes`, `/v1/jobs`, `/v1/policy`...) stay the one source of truth and
//! keep their authorization. The stream checks a cheap fingerprint of each part of the
//! state once a second (a hash over job ids, states and reasons; the node view; the
//! active pipeline and history length; the fault count) and sends one `changed` event
//! naming the parts that differ; the page refetches only those. One small task per open
//! page, no change to the scheduler, and a quiet cluster costs one comment line every
//! 15 s (which also ends the task soon after the page goes away). Polling with ETags
//! would need every list route to hash its answer; websockets would need a new
//! dependency for a one-way signal.
//!
//! Owns: these four routes. Does not own the state they look at (`scheduler`).

use super::error::ApiError;
use super::jobs::{JobId, owned_job};
use super::streams::StreamGate;
use crate::auth::Caller;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use gantry_controller::{Admin, Controller, Jobs};
use serde_json::json;
use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the stream looks for changes.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// A keep-alive comment after this much silence.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The parts of the state a `changed` event can name, in fingerprint order.
const PARTS: [&str; 4] = ["jobs", "nodes", "policy", "faults"];

/// The user a change is recorded under (`unauthenticated` on an open daemon).
pub(super) fn caller_user(caller: &Caller) -> String {
    match caller {
        Caller::Token(id) => id.user.clone(),
        Caller::Open(_) => "unauthenticated".into(),
    }
}

/// `GET /v1/whoami`: `{user, token, accounts, role, authenticated}`. A caller without
/// identity (TCP, no tokens) is the user `anonymous` with `auth.anonymous_role`.
pub(super) async fn whoami(caller: Caller) -> impl IntoResponse {
    Json(match caller {
        Caller::Token(id) => json!({
            "authenticated": true,
            "user": id.user,
            "token": id.name,
            "accounts": id.accounts,
            "role": id.role.name(),
        }),
        Caller::Open(role) => json!({
            "authenticated": false,
            "user": crate::auth::ANONYMOUS_USER,
            "token": null,
            "accounts": [crate::auth::ANONYMOUS_USER],
            "role": role.name(),
        }),
    })
}

/// `GET /v1/jobs/{id}/trace` (owner or operator): `{job, trace_id, exporting}`;
/// `trace_id` is null when no OTLP endpoint is configured or the job's trace began
/// before this daemon process started.
pub(super) async fn trace(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "reading a job's trace id")?;
    let trace_id = gantry_telemetry::job_trace_id(id);
    let exporting = gantry_telemetry::job_traces_enabled();
    Ok(Json(
        json!({"job": id, "trace_id": trace_id, "exporting": exporting}),
    ))
}

/// `GET /v1/fairshare`: `{half_life_s, total_gpu_seconds, users, accounts}`, each entry
/// `{name, gpu_seconds, share}` (decayed GPU-seconds: closed task runs halved per
/// half-life since they ended, plus running tasks in full; `share` of the total), most
/// used first. A `user` token sees its own user and accounts only (as in accounting);
/// the total is the cluster's either way.
pub(super) async fn fairshare(State(s): State<Admin>, caller: Caller) -> impl IntoResponse {
    let now = gantry_controller::now_ms();
    let (users, accounts) = s.usage_at(now);
    let total: f64 = users.values().sum();
    let sees = |name: &str, accounts_too: bool| match &caller {
        Caller::Token(id) if id.role < gantry_config::auth::Role::Operator => {
            id.user == name || (accounts_too && id.accounts.iter().any(|a| a == name))
        }
        Caller::Open(role) if *role < gantry_config::auth::Role::Operator => {
            name == crate::auth::ANONYMOUS_USER
        }
        _ => true,
    };
    let rows = |m: std::collections::BTreeMap<String, f64>, accounts_too: bool| {
        let mut v: Vec<_> = m
            .into_iter()
            .filter(|(name, _)| sees(name, accounts_too))
            .map(|(name, g)| {
                let share = if total > 0.0 { g / total } else { 0.0 };
                (name, g, share)
            })
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v.into_iter()
            .map(|(name, g, share)| json!({"name": name, "gpu_seconds": g, "share": share}))
            .collect::<Vec<_>>()
    };
    Json(json!({
        "half_life_s": s.config().usage_half_life_s,
        "total_gpu_seconds": total,
        "users": rows(users, false),
        "accounts": rows(accounts, true),
    }))
}

fn hash_of(value: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// One fingerprint per entry of [`PARTS`].
fn fingerprints(s: &Controller) -> [u64; 4] {
    let changed = s.admin().change_fingerprint();
    let (jobs, faults) = (changed.jobs, changed.faults);
    let nodes = hash_of(serde_json::to_vec(&s.nodes().list()).unwrap_or_default());
    let policy = {
        let policy = s.policy();
        let view = policy.view();
        hash_of((
            view.active.version,
            view.quarantined,
            policy.history().len(),
            serde_json::to_vec(&policy.shadow()).unwrap_or_default(),
        ))
    };
    [jobs, nodes, policy, faults]
}

/// One `changed` event: `id` counts the stream's events from 1, `data` is one line of JSON
/// `{"cycle", "parts"}` (the order of its keys is fixed: [`event_schema`] spells it out).
pub(super) fn event(id: u64, cycle: u64, parts: &[&str]) -> Bytes {
    let data = json!({"cycle": cycle, "parts": parts});
    Bytes::from(format!("event: changed\nid: {id}\ndata: {data}\n\n"))
}

/// The documented form of each event of `GET /v1/stream` (OpenAPI 3.0 has no schema for a
/// stream as a whole: a `text/event-stream` schema describes one event as the object of its
/// fields, `event`, `id`, `data`). What [`event`] writes; keep-alive comments are no events.
pub(super) fn event_schema() -> serde_json::Value {
    let part = format!("\"({})\"", PARTS.join("|"));
    json!({
        "type": "object",
        "required": ["event", "id", "data"],
        "additionalProperties": false,
        "properties": {
            "event": {"type": "string", "enum": ["changed"]},
            "id": {
                "type": "string",
                "pattern": "^[1-9][0-9]*$",
                "description": "the stream's own count of events, from 1",
            },
            "data": {
                "type": "string",
                "pattern": format!("^\\{{\"cycle\":[0-9]+,\"parts\":\\[{part}(,{part})*\\]\\}}$"),
                "description": "JSON `{\"cycle\": n, \"parts\": [...]}`: the scheduler's cycle and the parts that changed (`jobs`, `nodes`, `policy`, `faults`); refetch those",
            },
        },
    })
}

/// `GET /v1/stream`: `text/event-stream` of `changed` events, the first one at once
/// (naming every part), then one whenever a part changes; 429 when the caller has its
/// limit of streams open (`streams.rs`).
pub(super) async fn stream(
    State(s): State<Controller>,
    gate: StreamGate,
) -> Result<impl IntoResponse, ApiError> {
    let slot = gate.open()?;
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        watch(s, tx).await;
        drop(slot);
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    ))
}

/// Sends an event whenever a fingerprint changes, until the client goes away.
async fn watch(s: Controller, tx: mpsc::Sender<Bytes>) {
    let mut last: Option<[u64; 4]> = None;
    let mut sent = 0u64;
    let mut silent = Duration::ZERO;
    loop {
        let s2 = s.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || fingerprints(&s2)).await else {
            return;
        };
        let changed: Vec<&str> = PARTS
            .iter()
            .enumerate()
            .filter(|(i, _)| last.is_none_or(|l| l[*i] != now[*i]))
            .map(|(_, p)| *p)
            .collect();
        let frame = if !changed.is_empty() {
            sent += 1;
            let cycle = s.admin().change_fingerprint().cycle;
            Some(event(sent, cycle, &changed))
        } else if silent >= KEEP_ALIVE {
            Some(Bytes::from_static(b": keep-alive\n\n"))
        } else {
            None
        };
        last = Some(now);
        match frame {
            Some(f) => {
                if tx.send(f).await.is_err() {
                    return;
                }
                silent = Duration::ZERO;
            }
            None => silent += CHECK_EVERY,
        }
        tokio::select! {
            () = tx.closed() => return,
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}
