//! `GET /v1/images`: the container images in this node's cache (`gantry images`): each
//! one's digest, the references tasks named it by, its size, when it was last used and
//! whether a container runs from it; with the cache's directory and size limit. Each
//! agent's node keeps a cache of its own, asked for here (`agents`: one entry per agent,
//! with `error` when it could not answer).
//!
//! Owns: this route. Does not own the cache (`gantry_node::container::cache`).

use super::error::ApiError;
use axum::Json;
use axum::extract::State;
use gantry_controller::Nodes;
use serde_json::{Value, json};

pub(super) async fn list(State(s): State<Nodes>) -> Result<Json<Value>, ApiError> {
    let (local, agents) = tokio::task::spawn_blocking(move || s.cached_images())
        .await
        .map_err(ApiError::internal)?;
    let local = local.map_err(|e| ApiError::internal(format!("reading the image cache: {e}")))?;
    let agents: Vec<Value> = agents
        .into_iter()
        .map(|(node, answer)| match answer {
            Ok(images) => json!({"node": node, "enabled": images.enabled,
                "cache_dir": images.cache_dir, "cache_max_mib": images.cache_max_mib,
                "images": images.images}),
            Err(why) => json!({"node": node, "error": why, "images": []}),
        })
        .collect();
    Ok(Json(
        json!({"enabled": local.enabled, "cache_dir": local.cache_dir,
        "cache_max_mib": local.cache_max_mib, "images": local.images, "agents": agents}),
    ))
}
