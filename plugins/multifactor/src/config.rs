//! The plugin's JSON configuration: weights, the age horizon, the job-size direction,
//! the fair-share tree (accounts with shares, users inside accounts), per-queue and
//! per-QoS factors. Parsed with `gantry_sdk::parse_config` into structs that refuse
//! unknown keys, then checked by [`Config::validate`], whose errors name the key.
//!
//! Owns: config types, defaults and validation. Does not own any arithmetic on jobs
//! (`factors`, `fairshare`, `score`).

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// SLURM's `PriorityMaxAge` default: 7 days.
pub const DEFAULT_MAX_AGE_S: u64 = 7 * 24 * 3600;

/// Weight of each factor (SLURM's `PriorityWeight*`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    /// Weight of the age factor (default 1000).
    pub age: f64,
    /// Weight of the fair-share factor (default 10000).
    pub fairshare: f64,
    /// Weight of the job-size factor (default 1000).
    pub jobsize: f64,
    /// Weight of the queue factor (default 1000).
    pub queue: f64,
    /// Weight of the QoS factor (default 0).
    pub qos: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            age: 1000.0,
            fairshare: 10_000.0,
            jobsize: 1000.0,
            queue: 1000.0,
            qos: 0.0,
        }
    }
}

/// One account of the fair-share tree.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountShares {
    /// Raw shares of the account among accounts (default 1).
    #[serde(default = "one")]
    pub shares: f64,
    /// Raw shares of users inside the account. None: every user of the account is
    /// charged as the account itself.
    #[serde(default)]
    pub users: Option<BTreeMap<String, f64>>,
}

fn one() -> f64 {
    1.0
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Factor weights.
    pub weights: Weights,
    /// The age factor reaches 1 after this many seconds of waiting (default 7 days).
    pub max_age_s: u64,
    /// Job size: false favours large jobs (factor = demand / cluster), true small ones
    /// (factor = 1 − demand / cluster). Default false, as SLURM's `PriorityFavorSmall`.
    pub favor_small: bool,
    /// Use SLURM's Fair Tree ranking instead of the classic `2^(−U/S)` (default false).
    pub fair_tree: bool,
    /// Accounts with shares (and optionally users with shares inside them).
    pub accounts: BTreeMap<String, AccountShares>,
    /// Per-queue raw factors, normalised by the largest; unlisted queues get 0.
    pub queues: BTreeMap<String, f64>,
    /// Per-QoS raw factors (job label `qos`), normalised by the largest; a job without
    /// the label or with an unlisted value gets 0.
    pub qos: BTreeMap<String, f64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            weights: Weights::default(),
            max_age_s: DEFAULT_MAX_AGE_S,
            favor_small: false,
            fair_tree: false,
            accounts: BTreeMap::new(),
            queues: BTreeMap::new(),
            qos: BTreeMap::new(),
        }
    }
}

/// A configuration the plugin refuses.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// Not valid JSON, or not an object.
    Parse(String),
    /// An unknown key, or a value of the wrong type.
    Invalid {
        /// Dotted path of the key, e.g. `weights.age`.
        key: String,
        /// serde's message.
        message: String,
    },
    /// A number that must be ≥ 0 is negative.
    Negative {
        /// Dotted path of the key, e.g. `accounts.vision.shares`.
        key: String,
        /// The value given.
        value: f64,
    },
    /// `max_age_s` is 0.
    ZeroMaxAge,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parse(m) => f.write_str(m),
            Self::Invalid { key, message } => write!(f, "invalid config: {key}: {message}"),
            Self::Negative { key, value } => {
                write!(f, "invalid config: {key} must be >= 0, got {value}")
            }
            Self::ZeroMaxAge => f.write_str("invalid config: max_age_s must be > 0, got 0"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Parses and validates `config_json` ("" is `{}`).
    pub fn parse(config_json: &str) -> Result<Self, ConfigError> {
        let value: Value = gantry_sdk::parse_config(config_json).map_err(ConfigError::Parse)?;
        let config: Self = match serde_json::from_value(value.clone()) {
            Ok(c) => c,
            Err(e) => {
                return Err(
                    locate(&value).unwrap_or(ConfigError::Parse(format!("invalid config: {e}")))
                );
            }
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks values serde cannot: signs and the age horizon.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_age_s == 0 {
            return Err(ConfigError::ZeroMaxAge);
        }
        let w = &self.weights;
        let weights = [
            ("age", w.age),
            ("fairshare", w.fairshare),
            ("jobsize", w.jobsize),
            ("queue", w.queue),
            ("qos", w.qos),
        ];
        for (name, value) in weights {
            non_negative(&format!("weights.{name}"), value)?;
        }
        for (name, a) in &self.accounts {
            non_negative(&format!("accounts.{name}.shares"), a.shares)?;
            for (user, &v) in a.users.iter().flatten() {
                non_negative(&format!("accounts.{name}.users.{user}"), v)?;
            }
        }
        for (name, &v) in &self.queues {
            non_negative(&format!("queues.{name}"), v)?;
        }
        for (name, &v) in &self.qos {
            non_negative(&format!("qos.{name}"), v)?;
        }
        Ok(())
    }
}

/// Finds the key whose value fails to deserialize (serde alone names an unknown key
/// but not the key of a value of the wrong type).
fn locate(value: &Value) -> Option<ConfigError> {
    let top = value.as_object()?;
    for (key, v) in top {
        let Err(e) = serde_json::from_value::<Config>(single(key, v)) else {
            continue;
        };
        let inner = match (key.as_str(), v.as_object()) {
            ("weights", Some(m)) => first_err(key, m, |k, v| {
                serde_json::from_value::<Weights>(single(k, v)).err()
            }),
            ("accounts", Some(m)) => first_err(key, m, |_, v| {
                serde_json::from_value::<AccountShares>(v.clone()).err()
            }),
            ("queues" | "qos", Some(m)) => first_err(key, m, |_, v| {
                serde_json::from_value::<f64>(v.clone()).err()
            }),
            _ => None,
        };
        return Some(inner.unwrap_or(ConfigError::Invalid {
            key: key.clone(),
            message: e.to_string(),
        }));
    }
    None
}

fn first_err(
    parent: &str,
    map: &Map<String, Value>,
    check: impl Fn(&str, &Value) -> Option<serde_json::Error>,
) -> Option<ConfigError> {
    map.iter().find_map(|(k, v)| {
        check(k, v).map(|e| ConfigError::Invalid {
            key: format!("{parent}.{k}"),
            message: e.to_string(),
        })
    })
}

fn single(key: &str, value: &Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_string(), value.clone());
    Value::Object(m)
}

fn non_negative(key: &str, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(ConfigError::Negative {
            key: key.to_string(),
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn empty_config_gives_slurm_like_defaults() {
        let c = Config::parse("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.weights.age, 1000.0);
        assert_eq!(c.weights.fairshare, 10_000.0);
        assert_eq!(c.weights.jobsize, 1000.0);
        assert_eq!(c.weights.queue, 1000.0);
        assert_eq!(c.weights.qos, 0.0);
        assert_eq!(c.max_age_s, 604_800);
        assert!(!c.favor_small && !c.fair_tree);
    }

    #[test]
    fn partial_weights_keep_the_other_defaults_and_shares_default_to_one() {
        let c = Config::parse(r#"{"weights": {"qos": 500}, "accounts": {"a": {}}}"#).unwrap();
        assert_eq!(c.weights.qos, 500.0);
        assert_eq!(c.weights.fairshare, 10_000.0);
        assert_eq!(c.accounts["a"].shares, 1.0);
        assert_eq!(c.accounts["a"].users, None);
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = Config::parse(r#"{"max_age": 5}"#).unwrap_err().to_string();
        assert!(e.contains("max_age"), "{e}");
        let e = Config::parse(r#"{"weights": {"fair_share": 5}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fair_share"), "{e}");
        let e = Config::parse(r#"{"accounts": {"a": {"share": 5}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`share`"), "{e}");
    }

    #[test]
    fn bad_values_are_named_by_their_path() {
        let cases = [
            (r#"{"weights": {"age": -1}}"#, "weights.age"),
            (
                r#"{"accounts": {"vision": {"shares": -2}}}"#,
                "accounts.vision.shares",
            ),
            (
                r#"{"accounts": {"vision": {"users": {"ann": -1}}}}"#,
                "accounts.vision.users.ann",
            ),
            (r#"{"queues": {"gpu": -0.5}}"#, "queues.gpu"),
            (r#"{"qos": {"high": -3}}"#, "qos.high"),
            (r#"{"max_age_s": 0}"#, "max_age_s"),
        ];
        for (json, key) in cases {
            let e = Config::parse(json).unwrap_err().to_string();
            assert!(e.contains(key), "{json}: {e}");
        }
        let e = Config::parse(r#"{"max_age_s": -5}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("-5"), "{e}");
        let wrong_types = [
            (r#"{"fair_tree": "yes"}"#, "fair_tree"),
            (r#"{"weights": {"age": "high"}}"#, "weights.age"),
            (
                r#"{"accounts": {"vision": {"shares": "2"}}}"#,
                "accounts.vision",
            ),
            (r#"{"queues": {"gpu": true}}"#, "queues.gpu"),
            (r#"{"qos": {"high": null}}"#, "qos.high"),
            (r#"{"accounts": []}"#, "accounts"),
        ];
        for (json, key) in wrong_types {
            let e = Config::parse(json).unwrap_err().to_string();
            assert!(e.contains(&format!("{key}: invalid type")), "{json}: {e}");
        }
        let e = Config::parse("[1]").unwrap_err().to_string();
        assert!(e.contains("invalid type"), "{e}");
    }
}
