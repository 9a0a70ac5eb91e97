//! `POST /v1/jobs/{id}/input`: what the client of an interactive job types (`gantry run`,
//! like `srun --pty`): base64 bytes for its first task's stdin, a new terminal size, the end
//! of input. The answer says how many bytes were taken; a task that reads slower than its
//! client types takes part, and the client sends the rest again (nothing is dropped on the
//! way, nothing waits in the daemon).
//!
//! Authorization: the job's owner or an operator, as for signals. Owns the HTTP side only;
//! delivery is `gantry_controller::job_input`.

use super::blocking;
use super::body::{JsonBody, parse_json};
use super::error::ApiError;
use super::jobs::{JobId, owned_job};
use crate::auth::Caller;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use base64::Engine;
use gantry_api::model::TtySize;
use gantry_controller::Jobs;
use gantry_controller::job_input::{InputRequest, InputSendError};
use serde::Deserialize;
use serde_json::json;

/// Most bytes of data in one request (before base64).
const MAX_DATA: usize = 256 << 10;

/// The body of `POST /v1/jobs/{id}/input`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = JobInput)]
pub(super) struct JobInputBody {
    /// Bytes for the first task's stdin, base64 (standard alphabet, padded); at most 256 KiB
    /// once decoded.
    #[serde(default)]
    #[schema(format = Byte, max_length = 349528)]
    data: String,
    /// The terminal's new size (a job with a `tty`).
    #[serde(default)]
    resize: Option<TtySize>,
    /// The end of input, after the data (a pipe is closed; a terminal gets its end-of-file
    /// character).
    #[serde(default)]
    eof: bool,
}

fn refused(e: InputSendError) -> ApiError {
    let conflict = |code: &'static str, e: &InputSendError| {
        ApiError::new(StatusCode::CONFLICT, code, e.to_string())
    };
    match e {
        InputSendError::NotFound(_) => ApiError::not_found(e.to_string()),
        InputSendError::NotRunning(..) => conflict("not-running", &e),
        InputSendError::NoInput(_) => conflict("no-input", &e),
        InputSendError::NotOpen(_) => conflict("input-not-open", &e),
        InputSendError::Failed(..) => ApiError::internal(e),
    }
}

pub(super) async fn input(
    State(s): State<Jobs>,
    caller: Caller,
    JobId(id): JobId,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    owned_job(&s, &caller, id, "sending input to a job")?;
    let body: JobInputBody = parse_json(&body)?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(body.data.as_bytes())
        .map_err(|e| ApiError::field("invalid-field", "data", format!("not base64: {e}")))?;
    if data.len() > MAX_DATA {
        return Err(ApiError::field(
            "invalid-field",
            "data",
            format!("more than {MAX_DATA} bytes in one request"),
        ));
    }
    if let Some(size) = &body.resize {
        size.check("resize")
            .map_err(|f| ApiError::field("invalid-field", f.field, f.message))?;
    }
    let request = InputRequest {
        data,
        resize: body.resize.map(|r| (r.rows, r.cols)),
        eof: body.eof,
    };
    let accepted = blocking(move || s.send_input(id, &request))
        .await?
        .map_err(refused)?;
    Ok(Json(json!({"job": id, "accepted": accepted})))
}
