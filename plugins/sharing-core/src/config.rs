//! The JSON config of the six plugins.
//!
//! Owns parsing and validation: `{"seed"?: u64, "strict"?: bool}` for every policy,
//! plus `"target"?: [{"cpu_milli", "gpu_milli", "gpus", "models"?, "count"}]` and
//! `"total_pods"?: u64` for `fgd`, and `"weigh"`, `"coverage_pct"`, `"memory"`, `"scale"`
//! and `"cpu_only_ties"` for `stranding`. Unknown keys are rejected with an error naming the
//! key. Does not own what the settings do (`place`, `fgd`).

use crate::fgd::{Target, TargetEntry};
use crate::policies::Policy;
use crate::stranding::{StrandingOptions, Weigh};
use serde::Deserialize;

/// The settings a plugin runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Seed of ranks and random draws; `None` uses the cycle's seed.
    pub seed: Option<u64>,
    /// Stop at the first job that does not fit.
    pub strict: bool,
    /// FGD's configured target; `None` derives one per call.
    pub target: Option<Target>,
    /// The `stranding` policy's knobs.
    pub stranding: StrandingOptions,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    strict: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fgd {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    strict: bool,
    #[serde(default)]
    target: Option<Vec<TargetEntry>>,
    #[serde(default)]
    total_pods: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stranding {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    strict: bool,
    #[serde(default)]
    weigh: Option<String>,
    #[serde(default)]
    coverage_pct: Option<u32>,
    #[serde(default)]
    memory: Option<bool>,
    #[serde(default)]
    scale: Option<u32>,
    #[serde(default)]
    cpu_only_ties: Option<String>,
}

fn parse_stranding(json: &str) -> Result<Settings, String> {
    let c: Stranding = gantry_sdk::parse_config(json)?;
    let mut opts = StrandingOptions::default();
    opts.weigh = match c.weigh.as_deref() {
        None => opts.weigh,
        Some("tasks") => Weigh::Tasks,
        Some("gpu-demand") => Weigh::GpuDemand,
        Some(other) => {
            return Err(format!(
                "invalid config: `weigh` is \"tasks\" or \"gpu-demand\", not {other:?}"
            ));
        }
    };
    opts.cpu_only_packed = match c.cpu_only_ties.as_deref() {
        None => opts.cpu_only_packed,
        Some("packed") => true,
        Some("rank") => false,
        Some(other) => {
            return Err(format!(
                "invalid config: `cpu_only_ties` is \"packed\" or \"rank\", not {other:?}"
            ));
        }
    };
    if let Some(p) = c.coverage_pct {
        if !(1..=100).contains(&p) {
            return Err(format!(
                "invalid config: `coverage_pct` is 1..=100, not {p}"
            ));
        }
        opts.coverage_pct = p;
    }
    opts.measure.memory = c.memory.unwrap_or(opts.measure.memory);
    opts.measure.scale = c.scale.unwrap_or(opts.measure.scale);
    Ok(Settings {
        seed: c.seed,
        strict: c.strict,
        target: None,
        stranding: opts,
    })
}

/// Parses the config of `policy` ("" counts as `{}`).
pub fn parse(policy: Policy, json: &str) -> Result<Settings, String> {
    if policy == Policy::Stranding {
        return parse_stranding(json);
    }
    if policy != Policy::Fgd {
        let c: Common = gantry_sdk::parse_config(json)?;
        return Ok(Settings {
            seed: c.seed,
            strict: c.strict,
            ..Settings::default()
        });
    }
    let c: Fgd = gantry_sdk::parse_config(json)?;
    let target = match (c.target, c.total_pods) {
        (None, None) => None,
        (None, Some(_)) => {
            return Err("invalid config: `total_pods` needs a `target`".into());
        }
        (Some(entries), total) => {
            let covered: u64 = entries.iter().map(|e| e.count).sum();
            let total_pods = total.unwrap_or(covered);
            if total_pods < covered {
                return Err(format!(
                    "invalid config: `total_pods` ({total_pods}) is below the sum of the target's counts ({covered})"
                ));
            }
            Some(Target {
                target: entries,
                total_pods,
            })
        }
    };
    Ok(Settings {
        seed: c.seed,
        strict: c.strict,
        target,
        ..Settings::default()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_and_keys() {
        let s = parse(Policy::BestFit, "").unwrap();
        assert_eq!(s, Settings::default());
        let s = parse(Policy::Random, r#"{"seed": 7, "strict": true}"#).unwrap();
        assert_eq!((s.seed, s.strict), (Some(7), true));
        let err = parse(Policy::GpuPacking, r#"{"sed": 7}"#).unwrap_err();
        assert!(err.contains("sed"), "{err}");
        let err = parse(Policy::DotProduct, r#"{"target": []}"#).unwrap_err();
        assert!(err.contains("target"), "{err}");
    }

    #[test]
    fn fgd_target() {
        let s = parse(
            Policy::Fgd,
            r#"{"target": [{"cpu_milli": 1000, "gpu_milli": 500, "gpus": 1, "models": ["T4"], "count": 3},
                           {"cpu_milli": 1000, "gpu_milli": 0, "gpus": 0, "count": 1}], "seed": 1}"#,
        )
        .unwrap();
        let t = s.target.unwrap();
        assert_eq!((t.total_pods, t.target.len()), (4, 2));
        assert!(t.target[1].models.is_empty());
        let with_total = parse(
            Policy::Fgd,
            r#"{"target": [{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "count": 3}], "total_pods": 9}"#,
        )
        .unwrap();
        assert_eq!(with_total.target.unwrap().total_pods, 9);
        let err = parse(
            Policy::Fgd,
            r#"{"target": [{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "count": 3, "qos": "LS"}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("qos"), "{err}");
        assert!(parse(Policy::Fgd, r#"{"total_pods": 9}"#).is_err());
        assert!(
            parse(
                Policy::Fgd,
                r#"{"target": [{"cpu_milli": 1, "gpu_milli": 0, "gpus": 0, "count": 3}], "total_pods": 2}"#
            )
            .is_err()
        );
        let err = parse(Policy::Fgd, r#"{"targets": []}"#).unwrap_err();
        assert!(err.contains("targets"), "{err}");
    }
}
