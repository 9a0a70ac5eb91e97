//! The typed calls of [`Client`] whose answers the CLI shows as they are (JSON): the active
//! pipeline, its history, rollback and shadow, the plugin list, a replay, the daemon's health
//! and who it takes the caller for. One method per route, each naming its path once, so the
//! CLI and the binary never spell a path of the API (`routes.rs` has the calls whose answers
//! are read into this crate's types).
//!
//! Owns these paths. Does not own the transport or errors (`client`).

use super::{Client, Result};
use serde::Serialize;
use serde_json::{Value, json};

impl Client {
    /// `GET /v1/whoami`: who the daemon takes this client for, over which way in.
    pub fn whoami(&self) -> Result<Value> {
        self.get_json("/v1/whoami")
    }

    /// `GET /v1/health`: the daemon's health.
    pub fn health(&self) -> Result<Value> {
        self.get_json("/v1/health")
    }

    /// `GET /v1/plugins`: the plugins in the registry.
    pub fn plugins(&self) -> Result<Value> {
        self.get_json("/v1/plugins")
    }

    /// `POST /v1/replay`: a recorded window replayed through a pipeline (`body`: window and
    /// pipeline, as `gantry replay` sends them).
    pub fn replay<B: Serialize + ?Sized>(&self, body: &B) -> Result<Value> {
        self.post_json("/v1/replay", body)
    }

    /// `GET /v1/policy`: the active pipeline and its health.
    pub fn policy(&self) -> Result<Value> {
        self.get_json("/v1/policy")
    }

    /// `PUT /v1/policy`: swaps the active pipeline for `pipeline`.
    pub fn set_policy<B: Serialize + ?Sized>(&self, pipeline: &B) -> Result<Value> {
        self.put_json("/v1/policy", pipeline)
    }

    /// `GET /v1/policy/history`: the pipeline versions, newest first.
    pub fn policy_history(&self) -> Result<Value> {
        self.get_json("/v1/policy/history")
    }

    /// `POST /v1/policy/rollback`: back to the previous pipeline version.
    pub fn rollback_policy(&self) -> Result<Value> {
        self.post_json("/v1/policy/rollback", &json!({}))
    }

    /// `PUT /v1/policy/shadow`: runs `pipeline` beside the live one, deciding nothing.
    pub fn set_shadow<B: Serialize + ?Sized>(&self, pipeline: &B) -> Result<Value> {
        self.put_json("/v1/policy/shadow", pipeline)
    }

    /// `DELETE /v1/policy/shadow`: stops the shadow pipeline.
    pub fn clear_shadow(&self) -> Result<Value> {
        self.delete_json("/v1/policy/shadow")
    }

    /// `GET /v1/policy/shadow/diff`: where the shadow pipeline decided otherwise.
    pub fn shadow_diff(&self) -> Result<Value> {
        self.get_json("/v1/policy/shadow/diff")
    }
}
