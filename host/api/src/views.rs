//! What the daemon's API answers beyond the job model itself: the answer to a submit
//! ([`Submitted`]), the node view of `GET /v1/nodes` ([`NodeView`], [`GpuView`]), an
//! uploaded plugin ([`PluginInfo`]) and the frames of `GET /v1/jobs/{id}/attach`
//! ([`AttachFrame`]).
//!
//! Owns these data types, defined once for both sides: the controller builds them and the
//! server writes them (`gantry_controller`'s `node_view.rs`, `jobs.rs`, `policy_ops.rs`,
//! `nodes.rs`, which also stores a node's drain as a [`DrainView`]; the server's
//! `api/attach.rs`), and the client reads them. Assembling them is not theirs.

use crate::cluster::NodeLoad;
use crate::model::JobRecord;
use crate::node::MigDevice;
use gantry_contract::Metadata;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The answer to `POST /v1/jobs`: the job (the first member of an array) and, for an array,
/// every member's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Submitted {
    /// The job (the first member of an array).
    #[serde(flatten)]
    pub job: JobRecord,
    /// Every member's id, for an array.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub array_job_ids: Vec<u64>,
}

/// The body of `POST /v1/jobs/forecast`: a job that is not submitted, and the pending job
/// it would replace (a variant of that job: `gantry job ID --what-if`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WhatIfRequest {
    /// The job, as it would be submitted.
    pub spec: crate::model::JobSpec,
    /// A pending job it stands in for (its variant), if any.
    #[serde(default)]
    pub replaces: Option<u64>,
}

/// Why and by whom a node was drained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrainView {
    /// The operator's reason.
    pub reason: String,
    /// Who drained it (the token's user; "unauthenticated" when auth is off).
    pub by: String,
    /// When, ms since the Unix epoch.
    pub since_ms: u64,
}

/// Why a GPU takes no new tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuFaultView {
    /// The reason (health rule or configuration).
    pub reason: String,
    /// Since when, ms since the Unix epoch.
    pub since_ms: u64,
    /// The last run of the node check that kept it out of service (`[node]
    /// health_check`), when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

/// One GPU in the node view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuView {
    /// Index.
    pub index: u32,
    /// Model.
    pub model: String,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Takes new tasks.
    pub healthy: bool,
    /// Why not, and since when (None when healthy).
    pub health: Option<GpuFaultView>,
    /// UUID when known.
    pub uuid: Option<String>,
    /// PCI bus id (NVML only).
    pub pci_bus_id: Option<String>,
    /// GPUs reached over NVLink, directly or through an NVSwitch.
    pub nvlink_peers: Vec<u32>,
    /// MIG mode is on.
    pub mig_enabled: bool,
    /// Its MIG devices as NVML lists them.
    pub mig_devices: Vec<MigDevice>,
    /// Its MIG devices as the scheduler places them, with who holds each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_slices: Vec<MigSliceView>,
    /// Allocated milli-GPU.
    #[cfg_attr(feature = "openapi", schema(maximum = 1000))]
    pub allocated_milli: u32,
    /// (job id, milli) holding it.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<u64>>))]
    pub jobs: Vec<(u64, u32)>,
}

/// A MIG slice as the scheduler places it (`gantry_api::mig`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigSliceView {
    /// Its device index (1000 + 10 × the GPU's index + its slot).
    pub index: u32,
    /// Its profile, the model a job asks for (`--gpus 1g.10gb:1`).
    pub profile: String,
    /// Its `MIG-…` UUID, what a task sees in `CUDA_VISIBLE_DEVICES`.
    pub uuid: String,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Allocated milli-GPU.
    pub allocated_milli: u32,
    /// (job id, milli) holding it.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<u64>>))]
    pub jobs: Vec<(u64, u32)>,
}

/// A node with per-GPU allocation, as `GET /v1/nodes` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Node))]
pub struct NodeView {
    /// Name.
    pub name: String,
    /// "up", "down", "awaiting" (its agent, after a controller restart), "draining"
    /// (drained, jobs still running) or "drained" (drained, empty).
    pub state: String,
    /// Why it is down (None unless down).
    pub down_reason: Option<String>,
    /// Since when it is down, ms since the Unix epoch.
    pub down_since_ms: Option<u64>,
    /// "local" (the controller's own executor) or the agent's URL.
    pub agent: String,
    /// Its address for other nodes' tasks.
    pub addr: String,
    /// Its agent's last heartbeat, ms since the Unix epoch (None: local, or none yet).
    pub last_heartbeat_ms: Option<u64>,
    /// Load at the last heartbeat (agents only).
    pub load: Option<NodeLoad>,
    /// The drain's reason, who and when (None when up).
    pub drain: Option<DrainView>,
    /// Where GPUs came from ("nvml" or "config").
    pub gpu_source: String,
    /// Labels (with `gantry.io/gpu-groups` from NVLink when found).
    pub labels: BTreeMap<String, String>,
    /// CPU in milli-cores.
    pub cpu_milli: u32,
    /// Allocated CPU.
    pub cpu_milli_allocated: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Allocated memory.
    pub memory_mib_allocated: u64,
    /// GPUs.
    pub gpus: Vec<GpuView>,
    /// Remarks for operators (e.g. that MIG devices are not scheduled separately).
    pub notes: Vec<String>,
}

/// A plugin in the registry (`POST /v1/plugins` answers with the one uploaded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// sha256 of its bytes.
    pub sha256: String,
    /// Its metadata (name, version, contract, stages, config hint).
    #[serde(flatten)]
    pub metadata: Metadata,
    /// Size in bytes.
    pub size_bytes: usize,
}

/// One line of `GET /v1/jobs/{id}/attach`: output (`out`), a state change (`state`, with
/// `reason`, `node` once running, `exit_code` and `end_reason` once ended) or a heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttachFrame {
    /// Output of the job's tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    /// The job's state (`pending`, `running`, or how it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Why it waits or ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The node of its first task, once running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its exit code, once ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Why it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// A keep-alive frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<bool>,
    /// A warning for whoever follows a running job: it is being stopped, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}
