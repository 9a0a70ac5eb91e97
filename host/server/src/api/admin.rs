//! `POST /v1/admin/gc?max_batches=N`: runs the retention collector now (admin only) and
//! answers what it deleted, the store's size before and after, and whether it is done;
//! `gantry admin gc` calls it with a small budget until it is, printing each answer as
//! progress.
//!
//! Owns: this route's parsing and authorization. Does not own what is collected
//! (`scheduler::retention`).

use super::blocking;
use super::error::ApiError;
use super::jobs::query;
use crate::auth::Caller;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::IntoResponse;
use gantry_config::auth::Role;
use gantry_controller::Admin;

/// The query of `POST /v1/admin/gc`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GcQuery {
    /// Most batches of `retention.gc_batch` deletes before answering (default: until done).
    max_batches: Option<u64>,
}

pub(super) async fn gc(
    State(s): State<Admin>,
    caller: Caller,
    q: Result<Query<GcQuery>, QueryRejection>,
    // Read (and ignore) a body, so a client that sends one keeps a usable connection.
    _body: axum::body::Bytes,
) -> Result<impl IntoResponse, ApiError> {
    caller.require(Role::Admin, "collecting history")?;
    let q = query(q)?;
    let max_batches = match q.max_batches {
        Some(0) => {
            return Err(ApiError::field(
                "invalid-query",
                "max_batches",
                "must be at least 1",
            ));
        }
        Some(n) => n,
        None => u64::MAX,
    };
    blocking(move || s.collect_garbage(max_batches))
        .await?
        .map(Json)
        .map_err(ApiError::internal)
}
