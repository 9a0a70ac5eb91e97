//! Why a job stays pending after a cycle: the stage, the code, the message and the plugin
//! that gave it, shown to users as the job's pending reason.
//!
//! Owns this data type only. The cycle (`cycle.rs`) and the stage calls (`stage_calls.rs`)
//! fill it in.

use gantry_contract::{ReasonCode, Stage};
use serde::{Deserialize, Serialize};

/// Why a job stays pending after this cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReason {
    /// The stage that left it pending.
    pub stage: Stage,
    /// Machine-readable code.
    pub code: ReasonCode,
    /// Human message.
    pub message: String,
    /// The plugin that gave the reason ("host" for the host's own).
    pub plugin: String,
    /// The priority stage's note about the job, if any.
    #[serde(default)]
    pub priority_note: Option<String>,
}
