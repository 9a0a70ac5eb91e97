//! `GET /v1/images`: the container images in this node's cache (`gantry images`): each
//! one's digest, the references tasks named it by, its size, when it was last used and
//! whether a container runs from it; with the cache's directory and size limit. Agents'
//! nodes keep caches of their own, not listed here.
//!
//! Owns: this route. Does not own the cache (`gantry_node::container::cache`).

use super::error::ApiError;
use crate::scheduler::Scheduler;
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

pub(super) async fn list(State(s): State<Scheduler>) -> Result<Json<Value>, ApiError> {
    let listed = tokio::task::spawn_blocking(move || s.cached_images())
        .await
        .map_err(ApiError::internal)?;
    match listed {
        None => Ok(Json(
            json!({"enabled": false, "cache_dir": null, "cache_max_mib": 0, "images": []}),
        )),
        Some(Ok((dir, max, images))) => Ok(Json(
            json!({"enabled": true, "cache_dir": dir, "cache_max_mib": max, "images": images}),
        )),
        Some(Err(e)) => Err(ApiError::internal(format!("reading the image cache: {e}"))),
    }
}
