//! The shared `queues` config as written: one entry per queue with either queue
//! totals (`nominal_gpus`, `borrowing_limit_gpus`, `lending_limit_gpus`) or quotas
//! per GPU model (`flavors`), plus its `cohort`; and the `unlisted` option.
//!
//! Owns: parsing and validation of one queue's entry into [`QueueSpec`], with errors
//! that name the offending key. Does not own the assembled [`crate::Quotas`] (the
//! cross-queue checks and lookups live in `quotas`), nor the other keys of each
//! plugin's config (each plugin's own `deny_unknown_fields` struct holds them).

use serde::Deserialize;
use std::collections::BTreeMap;

pub use crate::error::{ConfigError, MAX_GPUS};

/// What to do with a job whose queue is not in `queues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Unlisted {
    /// Admit it freely; its use counts against no quota (the default).
    #[default]
    Admit,
    /// Hold it every cycle with a reason.
    Hold,
    /// Reject it at submit.
    Reject,
}

impl Unlisted {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admit => "admit",
            Self::Hold => "hold",
            Self::Reject => "reject",
        }
    }
}

/// One queue's entry as written in the config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    #[serde(default)]
    nominal_gpus: Option<f64>,
    #[serde(default)]
    borrowing_limit_gpus: Option<f64>,
    #[serde(default)]
    lending_limit_gpus: Option<f64>,
    #[serde(default)]
    cohort: Option<String>,
    #[serde(default)]
    flavors: Option<BTreeMap<String, serde_json::Value>>,
}

/// One flavor's entry (`queues.<name>.flavors.<model>`) as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlavor {
    nominal_gpus: f64,
    #[serde(default)]
    borrowing_limit_gpus: Option<f64>,
    #[serde(default)]
    lending_limit_gpus: Option<f64>,
}

/// Converts GPUs (fractions allowed) to milli-GPU, rounding to the nearest milli.
pub fn gpus_to_milli(key: &str, gpus: f64) -> Result<u64, ConfigError> {
    if !gpus.is_finite() || !(0.0..=MAX_GPUS).contains(&gpus) {
        return Err(ConfigError::Quantity {
            key: key.to_string(),
            value: gpus,
        });
    }
    Ok((gpus * 1000.0).round() as u64)
}

/// One quota (a queue's totals, or one flavor of it) in milli-GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The GPU model for a flavor; `None` for a queue's totals over all models.
    pub flavor: Option<String>,
    /// Nominal quota.
    pub nominal_milli: u64,
    /// Most it may use above nominal; `None` is no limit (what the cohort can lend).
    pub borrowing_limit_milli: Option<u64>,
    /// Most of its unused nominal quota others may borrow; `None` is all of it.
    pub lending_limit_milli: Option<u64>,
}

/// One queue's validated entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Its cohort; `None`: it neither borrows nor lends.
    pub cohort: Option<String>,
    /// Whether it has quotas per GPU model (`flavors`) rather than totals.
    pub flavored: bool,
    /// One entry (totals) or one per flavor, in model name order.
    pub limits: Vec<Limits>,
}

/// Parses and validates the entry `value` of queue `name` (`key` is `queues.<name>`).
pub fn parse_queue(
    key: &str,
    name: &str,
    value: &serde_json::Value,
) -> Result<QueueSpec, ConfigError> {
    if name.is_empty() {
        return Err(ConfigError::EmptyName {
            key: key.to_string(),
        });
    }
    let raw: RawQueue = serde_json::from_value(value.clone()).map_err(|e| ConfigError::Entry {
        key: key.to_string(),
        message: e.to_string(),
    })?;
    let cohort = match &raw.cohort {
        Some(c) if c.is_empty() => {
            return Err(ConfigError::EmptyName {
                key: format!("{key}.cohort"),
            });
        }
        other => other.clone(),
    };
    let has_cohort = cohort.is_some();
    let Some(flavors) = &raw.flavors else {
        let Some(nominal) = raw.nominal_gpus else {
            return Err(ConfigError::NoQuota {
                key: key.to_string(),
            });
        };
        let limits = vec![limits(
            key,
            None,
            (nominal, raw.borrowing_limit_gpus, raw.lending_limit_gpus),
            has_cohort,
        )?];
        return Ok(QueueSpec {
            cohort,
            flavored: false,
            limits,
        });
    };
    let totals_field = [
        ("nominal_gpus", raw.nominal_gpus),
        ("borrowing_limit_gpus", raw.borrowing_limit_gpus),
        ("lending_limit_gpus", raw.lending_limit_gpus),
    ]
    .into_iter()
    .find(|(_, v)| v.is_some());
    if let Some((field, _)) = totals_field {
        return Err(ConfigError::BothModes {
            key: key.to_string(),
            field: field.to_string(),
        });
    }
    if flavors.is_empty() {
        return Err(ConfigError::NoFlavors {
            key: format!("{key}.flavors"),
        });
    }
    let mut out = Vec::with_capacity(flavors.len());
    for (model, value) in flavors {
        let fkey = format!("{key}.flavors.{model}");
        if model.is_empty() {
            return Err(ConfigError::EmptyName {
                key: format!("{key}.flavors.\"\""),
            });
        }
        let f: RawFlavor =
            serde_json::from_value(value.clone()).map_err(|e| ConfigError::Entry {
                key: fkey.clone(),
                message: e.to_string(),
            })?;
        out.push(limits(
            &fkey,
            Some(model),
            (f.nominal_gpus, f.borrowing_limit_gpus, f.lending_limit_gpus),
            has_cohort,
        )?);
    }
    Ok(QueueSpec {
        cohort,
        flavored: true,
        limits: out,
    })
}

/// Validates nominal, borrowing and lending limit of one quota under `key`.
fn limits(
    key: &str,
    flavor: Option<&String>,
    (nominal, borrowing, lending): (f64, Option<f64>, Option<f64>),
    has_cohort: bool,
) -> Result<Limits, ConfigError> {
    let nominal_milli = gpus_to_milli(&format!("{key}.nominal_gpus"), nominal)?;
    let limit = |field: &str, v: Option<f64>| -> Result<Option<u64>, ConfigError> {
        let key = format!("{key}.{field}");
        match v {
            None => Ok(None),
            Some(_) if !has_cohort => Err(ConfigError::NeedsCohort { key }),
            Some(g) => gpus_to_milli(&key, g).map(Some),
        }
    };
    let borrowing_limit_milli = limit("borrowing_limit_gpus", borrowing)?;
    let lending_limit_milli = limit("lending_limit_gpus", lending)?;
    if let (Some(l), Some(g)) = (lending_limit_milli, lending)
        && l > nominal_milli
    {
        return Err(ConfigError::LendingAboveNominal {
            key: format!("{key}.lending_limit_gpus"),
            lending: g,
            nominal,
        });
    }
    Ok(Limits {
        flavor: flavor.cloned(),
        nominal_milli,
        borrowing_limit_milli,
        lending_limit_milli,
    })
}
