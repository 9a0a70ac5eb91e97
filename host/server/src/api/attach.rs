//! Following a job live (`gantry run`, `gantry attach`): `GET /v1/jobs/{id}/attach` streams
//! newline-delimited JSON frames — the state while it waits (with the reason), its output as
//! it is written, a heartbeat each second of silence, and a last frame with the final state
//! and exit code — and `POST /v1/jobs/{id}/signal` sends a signal to its tasks (the Ctrl-C a
//! client forwards). An interactive job whose attached client goes away is cancelled: an
//! interactive session nobody watches is a GPU lost to the cluster.
//!
//! A caller may follow at most `[http] max_streams_per_caller` jobs (and `/v1/stream`s) at
//! once; one more is a 429 (`streams.rs`).
//!
//! Owns: the frame format and the disconnect rule. Does not own job state (`scheduler`).

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use super::jobs::{JobId, owned_job, query};
use super::streams::StreamGate;
use crate::auth::Caller;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use gantry_api::model::job_options::WarnSignal;
use gantry_api::model::{JobRecord, JobState, StopCause};
use gantry_contract::JobKind;
use gantry_controller::Jobs;
use gantry_controller::jobs::TaskLog;
use gantry_controller::signal_ops::SignalError;
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

/// How often the job and its log are looked at.
const POLL: Duration = Duration::from_millis(100);
/// How often for a job that reads its client's input: what is typed is echoed from there.
const POLL_INTERACTIVE: Duration = Duration::from_millis(20);
/// A heartbeat frame after this much silence (it also reveals a client that went away).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Most output bytes per frame.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AttachQuery {
    /// Which task's output (default 0).
    #[serde(default)]
    task: usize,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SignalRequest)]
pub(super) struct SignalBody {
    /// Signal name: `INT`, `TERM`, `USR1`, `USR2`, `HUP`, `QUIT`, `CONT`, `URG`, `WINCH` or
    /// `ALRM`.
    signal: String,
}

pub(super) async fn attach(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    q: Result<Query<AttachQuery>, QueryRejection>,
    gate: StreamGate,
) -> Result<impl IntoResponse, ApiError> {
    let job = owned_job(&s, &caller, id, "attaching to a job")?;
    let task = query(q)?.task;
    if task >= job.spec.task_count() {
        return Err(ApiError::field(
            "invalid-query",
            "task",
            format!("job {id} has {} task(s)", job.spec.task_count()),
        ));
    }
    let slot = gate.open()?;
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        follow(s, id, task, tx).await;
        drop(slot);
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    ))
}

pub(super) async fn signal(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "signalling a job")?;
    let body: SignalBody = parse_json(&body)?;
    let number = WarnSignal {
        signal: body.signal.clone(),
        before_s: 0,
        scope: Default::default(),
    }
    .number()
    .map_err(|m| ApiError::field("invalid-field", "signal", m))?;
    let sent = blocking(move || s.signal(id, number))
        .await?
        .map_err(|e| match e {
            SignalError::NotFound(_) => ApiError::not_found(e.to_string()),
            SignalError::NotRunning(..) => {
                ApiError::new(StatusCode::CONFLICT, "not-running", e.to_string())
            }
        })?;
    Ok(Json(
        json!({"job": id, "signal": body.signal, "tasks": sent}),
    ))
}

fn frame(v: &Value) -> Bytes {
    let mut line = v.to_string();
    line.push('\n');
    Bytes::from(line)
}

/// What a client is told about the job's state, if it changed.
fn state_frame(job: &JobRecord) -> Value {
    let reason = job.reason.as_ref().map(|r| r.message.clone());
    let mut v = json!({"state": job.state.as_str(), "reason": reason});
    if job.state == JobState::Running {
        v["node"] = json!(job.tasks.first().map(|t| t.node.clone()));
        // A stop under way that a policy decided (an eviction: idle-GPU reclaim, priority
        // preemption) is told to whoever sits at the job's terminal.
        if matches!(job.stopping, Some(StopCause::Evicted { .. })) {
            v["notice"] = json!(reason);
        }
    }
    if job.state.is_terminal() {
        v["exit_code"] = json!(job.exit_code);
        v["end_reason"] = json!(job.end_reason);
    }
    v
}

/// Streams job `id` to `tx` until it ends or the client goes away (then cancels it if it is
/// interactive).
async fn follow(s: Jobs, id: u64, task: usize, tx: mpsc::Sender<Bytes>) {
    let mut offset = 0u64;
    // The run whose agent-held log is followed (a requeued run starts a new log there).
    let mut remote_run = None;
    let mut pending_utf8: Vec<u8> = Vec::new();
    let mut last_state = Value::Null;
    let mut silent = Duration::ZERO;
    let mut changes = s.changes();
    let gone = loop {
        let Some(job) = s.get(id) else { break false };
        let poll = if job.spec.task_input() == gantry_api::task::TaskInput::None {
            POLL
        } else {
            POLL_INTERACTIVE
        };
        let state = state_frame(&job);
        let mut frames = Vec::new();
        // Output first, so the last frame comes after everything the job wrote.
        if job.state != JobState::Pending {
            let bytes = match s.task_log(&job, task) {
                TaskLog::Agent(agent, key) => {
                    if remote_run.replace(key) != Some(key) {
                        offset = 0;
                    }
                    read_remote(agent, key, &mut offset).await
                }
                TaskLog::Here(path) => read_from(&path, &mut offset).await,
            };
            pending_utf8.extend(bytes);
            let text = take_valid_utf8(&mut pending_utf8, job.state.is_terminal());
            for piece in text.as_bytes().chunks(CHUNK) {
                frames.push(json!({"out": String::from_utf8_lossy(piece)}));
            }
        }
        if state != last_state {
            frames.push(state.clone());
            last_state = state;
        }
        if frames.is_empty() && silent >= HEARTBEAT {
            frames.push(json!({"heartbeat": true}));
        }
        silent = if frames.is_empty() {
            silent + poll
        } else {
            Duration::ZERO
        };
        let mut closed = false;
        for f in &frames {
            if tx.send(frame(f)).await.is_err() {
                closed = true;
                break;
            }
        }
        if closed {
            break !job.state.is_terminal();
        }
        if job.state.is_terminal() {
            break false;
        }
        // The next look: after `poll`, or as soon as the scheduler is woken (the job may
        // have ended), whichever comes first.
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(poll).await;
                }
            }
        }
    };
    if gone && let Some(job) = s.get(id).filter(|j| j.spec.kind == JobKind::Interactive) {
        tracing::info!(
            job = id,
            "the attached client went away; cancelling the interactive job"
        );
        // Its user's client went away: the cancel is theirs.
        let (s2, by) = (s.clone(), job.spec.user.clone());
        let _ = tokio::task::spawn_blocking(move || s2.cancel(id, &by)).await;
    }
}

/// Reads what was appended to `path` since `offset` (at most 1 MiB at a time).
async fn read_from(path: &std::path::Path, offset: &mut u64) -> Vec<u8> {
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return Vec::new();
    };
    if file.seek(std::io::SeekFrom::Start(*offset)).await.is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let read = (&mut file).take(1 << 20).read_to_end(&mut buf).await;
    if read.is_ok() {
        *offset += buf.len() as u64;
    }
    buf
}

/// Reads what was appended to a task's log on its agent since `offset` (at most 1 MiB at a
/// time); nothing when the agent cannot be reached now (the next poll tries again).
async fn read_remote(
    agent: gantry_api::agent_client::AgentClient,
    key: gantry_api::cluster::TaskKey,
    offset: &mut u64,
) -> Vec<u8> {
    let from = *offset;
    let read = tokio::task::spawn_blocking(move || agent.log(key, from, 1 << 20)).await;
    match read {
        Ok(Ok(bytes)) => {
            *offset += bytes.len() as u64;
            bytes
        }
        _ => Vec::new(),
    }
}

/// The longest valid UTF-8 prefix of `buf` (all of it, lossily, when `flush`), leaving an
/// incomplete character at the end for the next read.
fn take_valid_utf8(buf: &mut Vec<u8>, flush: bool) -> String {
    let valid = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() && !flush => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    let rest = buf.split_off(valid);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_wait_for_their_end() {
        let mut buf = "é".as_bytes()[..1].to_vec();
        assert_eq!(take_valid_utf8(&mut buf, false), "");
        buf.extend(&"é".as_bytes()[1..]);
        buf.extend(b"x");
        assert_eq!(take_valid_utf8(&mut buf, false), "éx");
        assert!(buf.is_empty());
    }
}
