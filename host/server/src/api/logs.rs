//! `GET /v1/jobs/{id}/logs?task=&offset=&limit=`: a byte range of a task's log as
//! `text/plain` (owner or operator), never more than [`MAX_LOG_RESPONSE`] (8 MiB) of it
//! in memory.
//!
//! - Without `offset`: the last `limit` bytes (default and at most 8 MiB), so a log
//!   up to 8 MiB comes whole, as before, and a bigger one as its tail.
//! - With `offset`: up to `limit` bytes (at most 8 MiB) from that byte; an offset past
//!   the end gives an empty body.
//!
//! The answer says which bytes it holds: `X-Log-Offset` (its first byte's offset),
//! `X-Log-Next` (the offset after its last byte: ask from there to follow the log) and,
//! for a log on the controller's node, `X-Log-Size` (the log's size when read). Bytes that
//! are not valid UTF-8 (a character cut by the range included) come as U+FFFD.
//!
//! A task on an agent's node is read from the agent (its last run), from `offset` or the
//! start (the agent does not say a log's size, so there is no tail); when the agent cannot
//! be reached the text says so, as before.
//!
//! Owns: the range rules and the headers. Does not own where logs live (`scheduler`, the
//! agent's `server`).

use super::blocking;
use super::error::ApiError;
use super::jobs::{JobId, owned_job, query};
use crate::auth::Caller;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use gantry_controller::Jobs;
use gantry_controller::jobs::TaskLog;
use serde::Deserialize;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Most log bytes one answer holds (and the default `limit`).
pub(super) const MAX_LOG_RESPONSE: u64 = 8 << 20;

/// Most bytes one read from an agent asks for (its own cap is 4 MiB).
const AGENT_READ: u64 = 4 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogQuery {
    /// Which task (default 0).
    #[serde(default)]
    task: usize,
    /// First byte wanted (default: the tail).
    offset: Option<u64>,
    /// Most bytes wanted (default and cap: 8 MiB).
    limit: Option<u64>,
}

/// Bytes of a log and where they sit in it.
#[derive(Debug, PartialEq, Eq)]
struct Piece {
    start: u64,
    bytes: Vec<u8>,
    size: Option<u64>,
}

/// The range `[start, start + len)` to read of a log of `size` bytes.
fn window(offset: Option<u64>, limit: Option<u64>, size: u64) -> (u64, u64) {
    let limit = limit.unwrap_or(MAX_LOG_RESPONSE).min(MAX_LOG_RESPONSE);
    let start = match offset {
        Some(o) => o.min(size),
        None => size.saturating_sub(limit),
    };
    (start, limit.min(size - start))
}

/// Reads the asked range of a log file on this node (empty when there is none yet).
fn read_local(path: &Path, offset: Option<u64>, limit: Option<u64>) -> std::io::Result<Piece> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Piece {
                start: 0,
                bytes: Vec::new(),
                size: Some(0),
            });
        }
        Err(e) => return Err(e),
    };
    let size = file.metadata()?.len();
    let (start, len) = window(offset, limit, size);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes)?;
    Ok(Piece {
        start,
        bytes,
        size: Some(size),
    })
}

/// Reads up to `limit` bytes from `offset` of a task's log on its agent, a few MiB at a
/// time; the text of the failure when the agent cannot be reached.
fn read_remote(
    agent: &gantry_api::agent_client::AgentClient,
    key: gantry_api::cluster::TaskKey,
    offset: u64,
    limit: u64,
) -> Result<Piece, String> {
    let mut bytes = Vec::new();
    let want = limit.min(MAX_LOG_RESPONSE);
    while (bytes.len() as u64) < want {
        let from = offset + bytes.len() as u64;
        let ask = (want - bytes.len() as u64).min(AGENT_READ);
        let got = agent.log(key, from, ask).map_err(|e| e.to_string())?;
        let short = (got.len() as u64) < ask;
        bytes.extend(got);
        if short {
            break;
        }
    }
    Ok(Piece {
        start: offset,
        bytes,
        size: None,
    })
}

fn number(n: u64) -> HeaderValue {
    HeaderValue::from(n)
}

fn answer(piece: Piece) -> Response {
    let next = piece.start + piece.bytes.len() as u64;
    let text = String::from_utf8_lossy(&piece.bytes).into_owned();
    let mut resp = ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response();
    let h = resp.headers_mut();
    h.insert(HeaderName::from_static("x-log-offset"), number(piece.start));
    h.insert(HeaderName::from_static("x-log-next"), number(next));
    if let Some(size) = piece.size {
        h.insert(HeaderName::from_static("x-log-size"), number(size));
    }
    resp
}

pub(super) async fn logs(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    q: Result<Query<LogQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let job = owned_job(&s, &caller, id, "reading a job's logs")?;
    let q = query(q)?;
    let path = match s.task_log(&job, q.task) {
        TaskLog::Here(path) => path,
        TaskLog::Agent(agent, key) => {
            let (offset, limit) = (q.offset.unwrap_or(0), q.limit.unwrap_or(MAX_LOG_RESPONSE));
            let read = blocking(move || read_remote(&agent, key, offset, limit)).await?;
            return Ok(match read {
                Ok(piece) => answer(piece),
                Err(e) => (
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    format!("[gantry: cannot read this task's log from its node: {e}]\n"),
                )
                    .into_response(),
            });
        }
    };
    let piece = blocking(move || read_local(&path, q.offset, q.limit))
        .await?
        .map_err(|e| ApiError::internal(format!("cannot read the log of job {id}: {e}")))?;
    Ok(answer(piece))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_tails_by_default_and_never_over_the_cap() {
        let mib = 1 << 20;
        assert_eq!(window(None, None, 100), (0, 100));
        assert_eq!(window(None, Some(10), 100), (90, 10));
        assert_eq!(window(Some(10), Some(5), 100), (10, 5));
        assert_eq!(window(Some(98), Some(5), 100), (98, 2));
        assert_eq!(window(Some(500), None, 100), (100, 0));
        assert_eq!(window(None, None, 20 * mib), (12 * mib, 8 * mib));
        assert_eq!(window(Some(0), Some(u64::MAX), 20 * mib), (0, 8 * mib));
    }

    #[test]
    fn a_local_read_returns_the_asked_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        std::fs::write(&path, b"0123456789").expect("write");
        let piece = read_local(&path, Some(3), Some(4)).expect("read");
        assert_eq!((piece.start, piece.bytes.as_slice()), (3, &b"3456"[..]));
        assert_eq!(piece.size, Some(10));
        let tail = read_local(&path, None, Some(2)).expect("tail");
        assert_eq!((tail.start, tail.bytes.as_slice()), (8, &b"89"[..]));
        let none = read_local(&dir.path().join("missing"), None, None).expect("none");
        assert!(none.bytes.is_empty());
    }
}
