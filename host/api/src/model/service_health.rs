//! The health and restart state of a service as its job record shows it: what the last
//! checks said, how the previous run ended, the back-off.
//!
//! Owns these data types only. Running checks and restarts is `scheduler::service`.

use serde::{Deserialize, Serialize};

/// What the last health checks of a service said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// (Re)started; no check has passed yet in this run.
    Starting,
    /// The last check passed.
    Healthy,
    /// The last check failed.
    Unhealthy,
    /// The service has no health check.
    Unchecked,
}

impl HealthState {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Healthy => "healthy",
            Self::Unhealthy => "unhealthy",
            Self::Unchecked => "unchecked",
        }
    }
}

/// Health and restart state of a service, shown in its job record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServiceHealth {
    /// What the checks of the current run say.
    pub state: HealthState,
    /// The latest failed check's error (kept after the service recovers).
    #[serde(default)]
    pub last_error: Option<String>,
    /// When the last check ran, ms since the Unix epoch.
    #[serde(default)]
    pub checked_ms: Option<u64>,
    /// Failed checks in a row.
    #[serde(default)]
    pub failures: u32,
    /// How the previous run ended.
    #[serde(default)]
    pub last_exit: Option<String>,
    /// The back-off before the latest restart, seconds; the next one doubles it.
    #[serde(default)]
    pub backoff_s: u32,
}

impl ServiceHealth {
    /// The health of a new run: `starting` when it has checks, else `unchecked`.
    pub fn new(checked: bool) -> Self {
        Self {
            state: if checked {
                HealthState::Starting
            } else {
                HealthState::Unchecked
            },
            last_error: None,
            checked_ms: None,
            failures: 0,
            last_exit: None,
            backoff_s: 0,
        }
    }
}
