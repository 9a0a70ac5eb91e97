//! How a replicated service changes over time, as a Kubernetes Deployment with its
//! HorizontalPodAutoscaler: the rolling update's strategy (`max_surge`, `max_unavailable`,
//! a progress deadline after which it rolls back by itself), the revision history, the
//! autoscaler's settings (a metric the replicas expose in Prometheus text format, a target
//! per replica, bounds, stabilisation windows, step limits, scale to zero) and the
//! requests that change them (`POST /v1/services/{id}/update`, `.../rollback`).
//!
//! Owns: these types and their validation, with errors naming the field. Does not own
//! acting on them (`host/controller/src/service_rollout.rs`, the daemon's autoscaler).

use super::{FieldError, JobSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most replicas of one service (also the bound of a rollout's surge and of the
/// autoscaler's steps).
pub const MAX_REPLICAS: u32 = 64;

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// How replicas are replaced when the template changes (`service.rollout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RolloutStrategy {
    /// Replicas of the new revision that may run beyond the wanted number (default 1).
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub max_surge: u32,
    /// Replicas that may be unavailable (not healthy) during the update (default 0).
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub max_unavailable: u32,
    /// Seconds the new revision has to become healthy; past that the service rolls back
    /// to the revision before by itself (default 300).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub progress_deadline_s: u32,
}

impl Default for RolloutStrategy {
    fn default() -> Self {
        Self {
            max_surge: 1,
            max_unavailable: 0,
            progress_deadline_s: 300,
        }
    }
}

impl RolloutStrategy {
    /// Checks the ranges; `field` prefixes the names in errors.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        if self.max_surge > MAX_REPLICAS {
            return Err(bad(format!("{field}.max_surge"), "more than 64"));
        }
        if self.max_unavailable > MAX_REPLICAS {
            return Err(bad(format!("{field}.max_unavailable"), "more than 64"));
        }
        if self.max_surge == 0 && self.max_unavailable == 0 {
            return Err(bad(
                format!("{field}.max_surge"),
                "max_surge and max_unavailable cannot both be 0: the update could not progress",
            ));
        }
        if self.progress_deadline_s == 0 || self.progress_deadline_s > 86_400 {
            return Err(bad(
                format!("{field}.progress_deadline_s"),
                "must be 1..=86400",
            ));
        }
        Ok(())
    }
}

/// Scaling on a metric the replicas expose (`service.autoscale`), like a Kubernetes HPA:
/// wanted = ceil(sum of the metric over ready replicas / `target`), within the bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AutoscaleSpec {
    /// Fewest replicas (0 allows scaling to zero after `scale_to_zero_after_s` idle).
    #[cfg_attr(feature = "openapi", schema(maximum = 64))]
    pub min_replicas: u32,
    /// Most replicas.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 64))]
    pub max_replicas: u32,
    /// The metric's name in the replicas' Prometheus text (for vLLM
    /// `vllm:num_requests_waiting`); the samples of every label set are added.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub metric: String,
    /// The value wanted per replica (greater than 0).
    pub target: f64,
    /// Where each replica serves its metrics (default `/metrics`).
    #[serde(default = "default_metrics_path")]
    #[cfg_attr(feature = "openapi", schema(max_length = 1024))]
    pub path: String,
    /// Seconds between two readings (default 15).
    #[serde(default = "default_period")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3600))]
    pub period_s: u32,
    /// A scale-up takes the lowest recommendation over this window (default 0).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(maximum = 3600))]
    pub scale_up_window_s: u32,
    /// A scale-down takes the highest recommendation over this window (default 300).
    #[serde(default = "default_down_window")]
    #[cfg_attr(feature = "openapi", schema(maximum = 3600))]
    pub scale_down_window_s: u32,
    /// Most replicas added by one decision (default 4).
    #[serde(default = "default_step_up")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 64))]
    pub max_step_up: u32,
    /// Most replicas removed by one decision (default 64).
    #[serde(default = "default_step_down")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 64))]
    pub max_step_down: u32,
    /// With `min_replicas` 0: seconds with the metric at 0 and no request through the
    /// endpoint before the last replica stops. A request to the endpoint then starts one
    /// and waits for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 86400))]
    pub scale_to_zero_after_s: Option<u32>,
}

// `target` is checked finite and positive: equality is total on the values kept.
impl Eq for AutoscaleSpec {}

fn default_metrics_path() -> String {
    "/metrics".into()
}
fn default_period() -> u32 {
    15
}
fn default_down_window() -> u32 {
    300
}
fn default_step_up() -> u32 {
    4
}
fn default_step_down() -> u32 {
    64
}

impl AutoscaleSpec {
    /// Checks the ranges; `field` prefixes the names in errors.
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        let f = |name: &str| format!("{field}.{name}");
        if self.max_replicas == 0 || self.max_replicas > MAX_REPLICAS {
            return Err(bad(f("max_replicas"), "must be 1..=64"));
        }
        if self.min_replicas > self.max_replicas {
            return Err(bad(f("min_replicas"), "more than max_replicas"));
        }
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | ':');
        if self.metric.is_empty() || self.metric.len() > 256 || !self.metric.chars().all(name_ok) {
            return Err(bad(
                f("metric"),
                "a Prometheus metric name: 1 to 256 of [A-Za-z0-9_:]",
            ));
        }
        if !self.target.is_finite() || self.target <= 0.0 {
            return Err(bad(f("target"), "must be a number greater than 0"));
        }
        if !self.path.starts_with('/') || self.path.len() > 1024 || self.path.contains(['\r', '\n'])
        {
            return Err(bad(
                f("path"),
                "must start with / and be at most 1024 bytes",
            ));
        }
        if self.period_s == 0 || self.period_s > 3600 {
            return Err(bad(f("period_s"), "must be 1..=3600"));
        }
        if self.scale_up_window_s > 3600 || self.scale_down_window_s > 3600 {
            return Err(bad(f("scale_down_window_s"), "at most 3600 seconds"));
        }
        if self.max_step_up == 0 || self.max_step_up > MAX_REPLICAS {
            return Err(bad(f("max_step_up"), "must be 1..=64"));
        }
        if self.max_step_down == 0 || self.max_step_down > MAX_REPLICAS {
            return Err(bad(f("max_step_down"), "must be 1..=64"));
        }
        match self.scale_to_zero_after_s {
            Some(s) if s == 0 || s > 86_400 => {
                Err(bad(f("scale_to_zero_after_s"), "must be 1..=86400"))
            }
            Some(_) if self.min_replicas > 0 => Err(bad(
                f("scale_to_zero_after_s"),
                "scaling to zero needs min_replicas 0",
            )),
            None if self.min_replicas == 0 => Err(bad(
                f("min_replicas"),
                "0 needs scale_to_zero_after_s (how long idle before the last replica stops)",
            )),
            _ => Ok(()),
        }
    }
}

/// One revision of a service's template, as kept in its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Revision {
    /// Its number (1 at creation, one more for each change of the template).
    pub revision: u32,
    /// The job every replica of this revision is made from.
    pub template: JobSpec,
    /// When it was made, ms since the epoch.
    pub created_ms: u64,
    /// What changed from the revision before (`image=...`, `argv`, `env FOO`).
    pub change: String,
    /// Why it was rolled back, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<String>,
}

/// Where a rolling update stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RolloutState {
    /// Replicas of the old revision are still being replaced.
    Progressing,
    /// Every replica runs the new revision and is healthy.
    Complete,
    /// The new revision did not become healthy in time; the old one is back.
    RolledBack,
}

/// The last rolling update of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RolloutStatus {
    /// The revision replaced.
    pub from: u32,
    /// The revision rolled out.
    pub to: u32,
    /// When it began, ms since the epoch.
    pub started_ms: u64,
    /// Where it stands.
    pub state: RolloutState,
    /// When it ended (complete or rolled back), ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
}

/// `POST /v1/services/{id}/update`: what to change. A change of `image`, `argv` or `env`
/// makes a new revision, rolled out replica by replica; `rollout` and `autoscale` take
/// effect at once without one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct UpdateRequest {
    /// The new image (an empty string: run on the host).
    pub image: Option<String>,
    /// The new command.
    pub argv: Option<Vec<String>>,
    /// Environment variables to set; a null value removes the variable.
    pub env: BTreeMap<String, Option<String>>,
    /// A new rolling-update strategy (this update uses it).
    pub rollout: Option<RolloutStrategy>,
    /// New autoscaling settings.
    pub autoscale: Option<AutoscaleSpec>,
    /// Remove the autoscaling settings (the replicas stay as many as now).
    pub no_autoscale: bool,
}

/// `POST /v1/services/{id}/rollback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, default)]
pub struct RollbackRequest {
    /// The revision to go back to (default: the one before the current one).
    pub revision: Option<u32>,
}

/// One reading of the autoscaler, kept in memory for the dashboard (the last 240).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScaleSample {
    /// When, ms since the epoch.
    pub t_ms: u64,
    /// The metric summed over the ready replicas read.
    pub value: f64,
    /// Ready replicas read.
    pub ready: u32,
    /// Replicas wanted after this reading.
    pub replicas: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn autoscale() -> AutoscaleSpec {
        serde_json::from_value(serde_json::json!({
            "min_replicas": 1, "max_replicas": 4, "metric": "vllm:num_requests_waiting", "target": 2
        }))
        .unwrap()
    }

    fn field(r: Result<(), FieldError>) -> String {
        r.err().map(|e| e.field).unwrap_or_default()
    }

    #[test]
    fn autoscale_defaults_and_bad_values_name_their_field() {
        let a = autoscale();
        assert_eq!(
            (a.path.as_str(), a.period_s, a.scale_down_window_s),
            ("/metrics", 15, 300)
        );
        assert!(a.validate("autoscale").is_ok());
        let bad = |f: fn(&mut AutoscaleSpec)| {
            let mut a = autoscale();
            f(&mut a);
            field(a.validate("service.autoscale"))
        };
        assert_eq!(
            bad(|a| a.min_replicas = 5),
            "service.autoscale.min_replicas"
        );
        assert_eq!(
            bad(|a| a.max_replicas = 65),
            "service.autoscale.max_replicas"
        );
        assert_eq!(bad(|a| a.target = f64::NAN), "service.autoscale.target");
        assert_eq!(bad(|a| a.target = 0.0), "service.autoscale.target");
        assert_eq!(bad(|a| a.metric = "a b".into()), "service.autoscale.metric");
        assert_eq!(bad(|a| a.path = "metrics".into()), "service.autoscale.path");
        assert_eq!(
            bad(|a| a.min_replicas = 0),
            "service.autoscale.min_replicas"
        );
        assert_eq!(
            bad(|a| a.scale_to_zero_after_s = Some(60)),
            "service.autoscale.scale_to_zero_after_s"
        );
        assert_eq!(
            bad(|a| {
                a.min_replicas = 0;
                a.scale_to_zero_after_s = Some(60);
            }),
            ""
        );
    }

    #[test]
    fn a_strategy_must_be_able_to_progress() {
        let s = RolloutStrategy::default();
        assert_eq!((s.max_surge, s.max_unavailable), (1, 0));
        assert!(s.validate("rollout").is_ok());
        let stuck = RolloutStrategy {
            max_surge: 0,
            max_unavailable: 0,
            ..s
        };
        assert_eq!(field(stuck.validate("rollout")), "rollout.max_surge");
        let forever = RolloutStrategy {
            progress_deadline_s: 0,
            ..s
        };
        assert_eq!(
            field(forever.validate("rollout")),
            "rollout.progress_deadline_s"
        );
    }
}
