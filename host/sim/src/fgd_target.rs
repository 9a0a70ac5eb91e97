//! The FGD target workload (`docs/fgd-replay/method.md` §8) for a pod list: shapes counted over the original
//! pods, handed to `gantry-sharing-core`'s construction (sort and 95 % cut) and
//! returned as the `fgd` plugin's config keys.
//!
//! Owns: counting shapes of openb pods. Does not own the construction rules.

use super::openb::Pod;
use gantry_sharing_core::{TraceShape, build_target};
use std::collections::BTreeMap;

/// The `fgd` plugin config (`target`, `total_pods`) for `pods`, the original list;
/// `seed` is added to it.
pub fn fgd_config(pods: &[Pod], seed: u64) -> serde_json::Value {
    let mut counts: BTreeMap<TraceShape, u64> = BTreeMap::new();
    for p in pods {
        let shape = TraceShape::from_trace_row(
            p.cpu_milli,
            p.gpus,
            i64::from(p.gpu_milli),
            &p.models.join("|"),
        );
        *counts.entry(shape).or_default() += 1;
    }
    let pairs: Vec<(TraceShape, u64)> = counts.into_iter().collect();
    let target = build_target(&pairs);
    serde_json::json!({
        "seed": seed,
        "target": target.target,
        "total_pods": target.total_pods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_openb_list_gives_the_specified_target() {
        let path = super::super::openb::find_trace_dir()
            .expect("the openb trace; set GANTRY_TRACE_DIR")
            .join("openb_pod_list_default.csv");
        let pods = super::super::openb::read_pods(&path).expect("the openb trace");
        let config = fgd_config(&pods, 42);
        let target = config["target"].as_array().expect("target");
        let covered: u64 = target
            .iter()
            .map(|e| e["count"].as_u64().unwrap_or(0))
            .sum();
        // Spec §8: 35 shapes covering 7,766 of 8,152 pods.
        assert_eq!((target.len(), covered), (35, 7766));
        assert_eq!(config["total_pods"], 8152);
    }
}
