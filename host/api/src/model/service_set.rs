//! A replicated service (`POST /v1/services`, `gantry service`): several copies of one
//! service job, as a Kubernetes Deployment keeps a number of pods. The daemon's service
//! owner (`host/controller/src/service_sets.rs`) turns the wanted number of replicas
//! into ordinary service jobs, each with its own allocation through the policy pipeline.
//!
//! Owns: the stored record and the views of it. Does not own the replicas' jobs (each a
//! [`super::JobRecord`]) nor how a replica restarts (a service job's own rules).

use super::{
    AutoscaleSpec, HealthState, JobSpec, Revision, RolloutStatus, RolloutStrategy, ScaleSample,
};
use serde::{Deserialize, Serialize};

/// What the daemon keeps about a replicated service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceRecord {
    /// Its id (its own sequence, not a job id).
    pub id: u64,
    /// The name its replicas' jobs are named after (`NAME-r1`, `NAME-r2`...).
    pub name: String,
    /// The job every replica is made from (kind `service`; `service.replicas` cleared).
    pub template: JobSpec,
    /// How many replicas are wanted.
    pub replicas: u32,
    /// Changes with every change of `template` (1 at creation).
    pub revision: u32,
    /// Every replica job made so far (names them: `NAME-rN`).
    pub made: u64,
    /// When it was created, ms since the epoch.
    pub created_ms: u64,
    /// Stopped: no replica is made again, the running ones are cancelled.
    pub stopped: bool,
    /// The creator could submit at any tier (an operator): its replicas are submitted so too.
    pub privileged: bool,
    /// The port of its endpoint on the controller, which balances HTTP requests over its
    /// healthy replicas. Kept across restarts: never moved to another port; while another
    /// process holds it the endpoint stays closed and the view's `endpoint_problem` says why.
    #[serde(default)]
    pub endpoint_port: Option<u16>,
    /// Why the last replica could not be made, if it could not (retried every cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How an update replaces replicas.
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// Scaling on a metric, when set (`replicas` is then the autoscaler's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<AutoscaleSpec>,
    /// The revisions kept, oldest first (the last 10; the current one among them).
    #[serde(default)]
    pub history: Vec<Revision>,
    /// The last rolling update, once there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The highest revision number given so far.
    #[serde(default)]
    pub last_revision: u32,
}

/// One replica as `gantry service ID` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicaView {
    /// Its job.
    pub job: u64,
    /// The job's state (`pending`, `running`...).
    pub state: String,
    /// The node of its first task, once placed.
    pub node: Option<String>,
    /// The port it listens on, once started.
    pub port: Option<u16>,
    /// Its health check's verdict, when it has one.
    pub health: Option<HealthState>,
    /// How many times it was restarted in place.
    pub restarts: u32,
    /// Why it waits, when pending.
    pub reason: Option<String>,
    /// The revision it was made from.
    #[serde(default)]
    pub revision: u32,
    /// The endpoint sends it no new request: it stops once those in flight are answered.
    #[serde(default)]
    pub draining: bool,
}

/// A service with its replicas (`GET /v1/services/{id}`; the list has `replica_jobs` too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceView {
    /// The service as kept.
    #[serde(flatten)]
    pub service: ServiceRecord,
    /// Its live replicas, oldest first.
    pub replica_jobs: Vec<ReplicaView>,
    /// The autoscaler's recent readings, oldest first (empty without autoscaling).
    #[serde(default)]
    pub scale_samples: Vec<ScaleSample>,
    /// Why the endpoint does not listen on `endpoint_port` now (another process holds it),
    /// when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_problem: Option<String>,
}

/// `POST /v1/services/{id}/scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScaleRequest {
    /// The number of replicas wanted (0 keeps the service with none running).
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub replicas: u32,
}
