//! The shared `queues` config: one entry per queue with its nominal quota, borrowing
//! limit, lending limit and cohort, validated into [`Quotas`].
//!
//! Owns: parsing and validation of the `queues` map and the `unlisted` option, with
//! errors that name the offending key. Does not own the other keys of each plugin's
//! config (each plugin's own `deny_unknown_fields` struct holds them).

use serde::Deserialize;
use std::collections::BTreeMap;

/// Largest quantity accepted, in GPUs.
pub const MAX_GPUS: f64 = 1.0e9;

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
    nominal_gpus: f64,
    #[serde(default)]
    borrowing_limit_gpus: Option<f64>,
    #[serde(default)]
    lending_limit_gpus: Option<f64>,
    #[serde(default)]
    cohort: Option<String>,
}

/// A config error, naming the key (`queues.<name>.<field>`).
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// The entry of a queue does not parse (unknown or missing field, wrong type).
    Entry {
        /// `queues.<name>`.
        key: String,
        /// What serde said.
        message: String,
    },
    /// A quantity is negative, not finite or too large.
    Quantity {
        /// `queues.<name>.<field>`.
        key: String,
        /// The value given.
        value: f64,
    },
    /// A borrowing or lending limit on a queue without a cohort.
    NeedsCohort {
        /// `queues.<name>.<field>`.
        key: String,
    },
    /// A lending limit above the nominal quota.
    LendingAboveNominal {
        /// `queues.<name>.lending_limit_gpus`.
        key: String,
        /// The lending limit, GPUs.
        lending: f64,
        /// The nominal quota, GPUs.
        nominal: f64,
    },
    /// An empty queue or cohort name.
    EmptyName {
        /// The key holding the empty name.
        key: String,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Entry { key, message } => write!(f, "invalid config: {key}: {message}"),
            Self::Quantity { key, value } => write!(
                f,
                "invalid config: {key}: must be a number of GPUs from 0 to {MAX_GPUS}, got {value}"
            ),
            Self::NeedsCohort { key } => write!(
                f,
                "invalid config: {key}: a queue without a cohort neither borrows nor lends; set `cohort` or drop the limit"
            ),
            Self::LendingAboveNominal {
                key,
                lending,
                nominal,
            } => write!(
                f,
                "invalid config: {key}: lending limit {lending} exceeds the nominal quota {nominal}"
            ),
            Self::EmptyName { key } => write!(f, "invalid config: {key}: name is empty"),
        }
    }
}

impl std::error::Error for ConfigError {}

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

/// One queue's quota in milli-GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueQuota {
    /// Queue name.
    pub name: String,
    /// Nominal quota.
    pub nominal_milli: u64,
    /// Most it may use above nominal; `None` is no limit (what the cohort can lend).
    pub borrowing_limit_milli: Option<u64>,
    /// Most of its unused nominal quota others may borrow; `None` is all of it.
    pub lending_limit_milli: Option<u64>,
    /// Its cohort; `None`: it neither borrows nor lends.
    pub cohort: Option<String>,
}

impl QueueQuota {
    /// The lending limit, `nominal` when unset.
    pub fn lending_cap_milli(&self) -> u64 {
        self.lending_limit_milli.unwrap_or(self.nominal_milli)
    }
}

/// All configured queues, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    queues: Vec<QueueQuota>,
    by_name: BTreeMap<String, usize>,
}

impl Quotas {
    /// Validates the `queues` map of a plugin's config.
    pub fn from_map(map: &BTreeMap<String, serde_json::Value>) -> Result<Self, ConfigError> {
        let mut queues = Vec::with_capacity(map.len());
        for (name, value) in map {
            let key = format!("queues.{name}");
            if name.is_empty() {
                return Err(ConfigError::EmptyName { key });
            }
            let raw: RawQueue =
                serde_json::from_value(value.clone()).map_err(|e| ConfigError::Entry {
                    key: key.clone(),
                    message: e.to_string(),
                })?;
            queues.push(validate(&key, name, &raw)?);
        }
        let by_name = queues
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name.clone(), i))
            .collect();
        Ok(Self { queues, by_name })
    }

    /// Whether no queue is configured.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Number of queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// The index of a queue by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The queue at `index` (indices come from [`Quotas::index`]).
    pub fn queue(&self, index: usize) -> Option<&QueueQuota> {
        self.queues.get(index)
    }

    /// All queues, in name order (index order).
    pub fn queues(&self) -> &[QueueQuota] {
        &self.queues
    }

    /// Indices of the other queues of `index`'s cohort (none without a cohort).
    pub fn cohort_peers(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        let cohort = self.queue(index).and_then(|q| q.cohort.as_deref());
        self.queues
            .iter()
            .enumerate()
            .filter(move |(i, q)| *i != index && cohort.is_some() && q.cohort.as_deref() == cohort)
            .map(|(i, _)| i)
    }

    /// The most the queue could ever hold: nominal plus what it could borrow if every
    /// peer were idle (the peers' lending limits, capped by its borrowing limit).
    pub fn max_ever_milli(&self, index: usize) -> u64 {
        let Some(q) = self.queue(index) else { return 0 };
        let lendable: u64 = self
            .cohort_peers(index)
            .filter_map(|p| self.queue(p))
            .map(QueueQuota::lending_cap_milli)
            .sum();
        let borrow = q
            .borrowing_limit_milli
            .map_or(lendable, |b| b.min(lendable));
        q.nominal_milli + borrow
    }
}

fn validate(key: &str, name: &str, raw: &RawQueue) -> Result<QueueQuota, ConfigError> {
    let nominal_milli = gpus_to_milli(&format!("{key}.nominal_gpus"), raw.nominal_gpus)?;
    let cohort = match &raw.cohort {
        Some(c) if c.is_empty() => {
            return Err(ConfigError::EmptyName {
                key: format!("{key}.cohort"),
            });
        }
        other => other.clone(),
    };
    let limit = |field: &str, v: Option<f64>| -> Result<Option<u64>, ConfigError> {
        let key = format!("{key}.{field}");
        match v {
            None => Ok(None),
            Some(_) if cohort.is_none() => Err(ConfigError::NeedsCohort { key }),
            Some(g) => gpus_to_milli(&key, g).map(Some),
        }
    };
    let borrowing_limit_milli = limit("borrowing_limit_gpus", raw.borrowing_limit_gpus)?;
    let lending_limit_milli = limit("lending_limit_gpus", raw.lending_limit_gpus)?;
    if let (Some(l), Some(g)) = (lending_limit_milli, raw.lending_limit_gpus)
        && l > nominal_milli
    {
        return Err(ConfigError::LendingAboveNominal {
            key: format!("{key}.lending_limit_gpus"),
            lending: g,
            nominal: raw.nominal_gpus,
        });
    }
    Ok(QueueQuota {
        name: name.to_string(),
        nominal_milli,
        borrowing_limit_milli,
        lending_limit_milli,
        cohort,
    })
}
