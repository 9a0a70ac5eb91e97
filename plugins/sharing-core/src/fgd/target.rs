//! FGD's target workload ("typical pods", `docs/fgd-replay/method.md` §8).
//!
//! Owns: the shape of a trace row (§1 conversion rules), building the target from an
//! original pod list (count shapes, sort by count descending with ties to larger c,
//! m, n and spec string, keep the shortest prefix covering ≥ 95 % of the pods), the
//! config form of a target ([`TargetEntry`], [`Target`]), and resolving a target against
//! a cycle (model names to a model mask, weights `(count/total)/(cum/total)`).
//! Does not own deriving a target from a call's tasks (`derive`), fragmentation or
//! scores (`frag`, `scorer`).

use crate::shape::{PodKind, PodShape, non_zero_cpu};
use gantry_sdk::{Cycle, MILLI_PER_GPU, TaskGroup};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shape `(c, m, n, spec)` of a pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TraceShape {
    /// Non-zero CPU request `c`, milli-cores.
    pub cpu_milli: u32,
    /// Milli-GPU per GPU `m` (0 for CPU-only pods).
    pub gpu_milli: u32,
    /// GPU count `n`.
    pub gpus: u32,
    /// Allowed models (empty = any).
    pub models: Vec<String>,
    /// Memory, MiB (0 for FGD's shapes, which ignore memory).
    #[serde(default)]
    pub memory_mib: u64,
}

impl TraceShape {
    /// The shape of one row of an openb pod list (`cpu_milli`, `num_gpu`, `gpu_milli`,
    /// `gpu_spec`) under the conversion rules of `docs/fgd-replay/method.md` §1: `num_gpu = 0` is CPU-only
    /// (n = m = 0, no model constraint); otherwise n = `num_gpu` and m = `gpu_milli`
    /// clamped to 1000 (0 when ≤ 0); spec = the `|`-separated models; c is non-zero.
    pub fn from_trace_row(cpu_milli: u32, num_gpu: u32, gpu_milli: i64, gpu_spec: &str) -> Self {
        if num_gpu == 0 {
            return Self {
                cpu_milli: non_zero_cpu(cpu_milli),
                gpu_milli: 0,
                gpus: 0,
                models: Vec::new(),
                memory_mib: 0,
            };
        }
        Self {
            cpu_milli: non_zero_cpu(cpu_milli),
            gpu_milli: gpu_milli.clamp(0, i64::from(MILLI_PER_GPU)) as u32,
            gpus: num_gpu,
            models: gpu_spec
                .split('|')
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect(),
            memory_mib: 0,
        }
    }

    /// The shape of one task of `group`; models are the names of the mask's bits; memory
    /// is left at 0 (FGD's shapes).
    pub fn of_task(ctx: &Cycle, group: &TaskGroup) -> Self {
        let pod = PodShape::of(group);
        let models = if pod.kind == PodKind::CpuOnly {
            Vec::new()
        } else {
            ctx.gpu_models
                .iter()
                .enumerate()
                .filter(|(i, _)| *i < 64 && pod.model_mask & (1u64 << i) != 0)
                .map(|(_, s)| ctx.text(*s).to_string())
                .collect()
        };
        Self {
            cpu_milli: pod.cpu,
            gpu_milli: pod.milli,
            gpus: pod.gpus,
            models,
            memory_mib: 0,
        }
    }

    /// The spec string: the models joined with `|`.
    pub fn spec(&self) -> String {
        self.models.join("|")
    }
}

/// One shape of a configured target, in target order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    /// Non-zero CPU request, milli-cores.
    pub cpu_milli: u32,
    /// Milli-GPU per GPU (0 for CPU-only shapes).
    pub gpu_milli: u32,
    /// GPU count n.
    pub gpus: u32,
    /// Allowed model names (empty = any); unknown names never match.
    #[serde(default)]
    pub models: Vec<String>,
    /// Pods of this shape in the original list.
    pub count: u64,
    /// Memory each pod asks for, MiB (default 0: FGD's shapes ignore memory).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_mib: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// A target workload: the kept shapes and the size of the list they came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The kept shapes, in target order (the `target` config key).
    pub target: Vec<TargetEntry>,
    /// Pods of the original list (the `total_pods` config key).
    pub total_pods: u64,
}

impl Target {
    /// Pods the kept shapes cover.
    pub fn covered(&self) -> u64 {
        self.target.iter().map(|e| e.count).sum()
    }

    /// The `fgd` plugin config carrying this target.
    pub fn config_json(&self, seed: Option<u64>, strict: bool) -> String {
        let mut v = serde_json::json!({
            "target": self.target,
            "total_pods": self.total_pods,
            "strict": strict,
        });
        if let (Some(seed), Some(map)) = (seed, v.as_object_mut()) {
            map.insert("seed".into(), seed.into());
        }
        v.to_string()
    }
}

/// Builds the target from the `(shape, count)` pairs of an original pod list, exactly
/// as `docs/fgd-replay/method.md` §8 says (duplicate shapes are merged; a CPU request of 0 counts as 100).
pub fn build_target(pods: &[(TraceShape, u64)]) -> Target {
    build_target_covering(pods, 95)
}

/// [`build_target`] keeping the shortest prefix that covers `coverage_pct` % of the pods.
pub fn build_target_covering(pods: &[(TraceShape, u64)], coverage_pct: u32) -> Target {
    target_of_counts(pods.iter().map(|(s, c)| (s, *c)), coverage_pct)
}

/// [`build_target_covering`] over borrowed `(shape, count)` pairs: shapes are merged
/// by content with a CPU request of 0 counted as 100, and only the kept ones are copied.
pub(crate) fn target_of_counts<'a>(
    pods: impl IntoIterator<Item = (&'a TraceShape, u64)>,
    coverage_pct: u32,
) -> Target {
    // Keyed like `TraceShape`'s own order (its fields in declaration order), with the CPU
    // request made non-zero.
    type Key<'a> = (u32, u32, u32, &'a Vec<String>, u64);
    let mut merged: BTreeMap<Key<'a>, u64> = BTreeMap::new();
    for (s, count) in pods {
        let key = (
            non_zero_cpu(s.cpu_milli),
            s.gpu_milli,
            s.gpus,
            &s.models,
            s.memory_mib,
        );
        *merged.entry(key).or_default() += count;
    }
    let mut list: Vec<(Key<'a>, u64, String)> = merged
        .into_iter()
        .map(|(k, c)| (k, c, k.3.join("|")))
        .collect();
    // Count descending, ties to larger c, m, n, spec string, models (a stable sort).
    list.sort_by(|(a, ca, sa), (b, cb, sb)| {
        cb.cmp(ca)
            .then(b.0.cmp(&a.0))
            .then(b.1.cmp(&a.1))
            .then(b.2.cmp(&a.2))
            .then_with(|| sb.cmp(sa))
            .then_with(|| b.3.cmp(a.3))
    });
    let total: u64 = list.iter().map(|(_, c, _)| c).sum();
    let mut cum = 0u64;
    let mut target = Vec::new();
    for ((cpu_milli, gpu_milli, gpus, models, memory_mib), count, _) in list {
        if u128::from(cum) * 100 >= u128::from(total) * u128::from(coverage_pct)
            && !target.is_empty()
        {
            break;
        }
        cum += count;
        target.push(TargetEntry {
            cpu_milli,
            gpu_milli,
            gpus,
            models: models.clone(),
            count,
            memory_mib,
        });
    }
    Target {
        target,
        total_pods: total,
    }
}

/// A target shape resolved against one cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedShape {
    /// Non-zero CPU request `c_t`.
    pub cpu: i64,
    /// Milli-GPU per GPU `m_t` (0 for CPU-only shapes).
    pub milli: u32,
    /// GPU count `n_t`.
    pub gpus: u32,
    /// No GPU (`m_t = 0` or `n_t = 0`).
    pub cpu_only: bool,
    /// Whether the shape names models at all.
    pub restricted: bool,
    /// The allowed models as a bitmask over `Cycle::gpu_models`.
    pub mask: u64,
    /// Memory `mem_t`, MiB (0 for FGD's shapes).
    pub memory: i64,
    /// Pods of this shape (integer weight).
    pub count: u64,
    /// Weight `(count/total)/(cum/total)`.
    pub weight: f64,
}

impl ResolvedShape {
    /// Whether a GPU of model index `model` is allowed for this shape.
    pub fn allows(&self, model: u8) -> bool {
        !self.restricted || (model < 64 && self.mask & (1u64 << model) != 0)
    }
}

/// Resolves `target` against `ctx` (model names are matched with `ctx.text`).
pub fn resolve(ctx: &Cycle, target: &Target) -> Vec<ResolvedShape> {
    let cum = target.covered();
    if cum == 0 {
        return Vec::new();
    }
    let total = target.total_pods.max(cum) as f64;
    let share = cum as f64 / total;
    target
        .target
        .iter()
        .map(|e| {
            let mask = ctx
                .gpu_models
                .iter()
                .enumerate()
                .filter(|(i, s)| *i < 64 && e.models.iter().any(|m| m == ctx.text(**s)))
                .fold(0u64, |m, (i, _)| m | (1u64 << i));
            ResolvedShape {
                cpu: i64::from(non_zero_cpu(e.cpu_milli)),
                milli: e.gpu_milli,
                gpus: e.gpus,
                cpu_only: e.gpu_milli == 0 || e.gpus == 0,
                restricted: !e.models.is_empty(),
                mask,
                memory: i64::try_from(e.memory_mib).unwrap_or(i64::MAX),
                count: e.count,
                weight: (e.count as f64 / total) / share,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(c: u32, m: u32, n: u32, models: &[&str]) -> TraceShape {
        TraceShape {
            cpu_milli: c,
            gpu_milli: m,
            gpus: n,
            models: models.iter().map(|s| s.to_string()).collect(),
            memory_mib: 0,
        }
    }

    #[test]
    fn trace_row_conversion() {
        assert_eq!(
            TraceShape::from_trace_row(0, 0, 500, "T4"),
            shape(100, 0, 0, &[])
        );
        assert_eq!(
            TraceShape::from_trace_row(8000, 1, 1500, "V100M16|V100M32"),
            shape(8000, 1000, 1, &["V100M16", "V100M32"])
        );
        assert_eq!(
            TraceShape::from_trace_row(8000, 2, -1, ""),
            shape(8000, 0, 2, &[])
        );
    }

    #[test]
    fn sort_ties_and_prefix() {
        // 20 pods: counts 8, 5, 5, 1, 1 → 8 + 5 + 5 = 18 < 19; + 1 = 19 ≥ 95 %.
        let pods = vec![
            (shape(1000, 500, 1, &[]), 5),
            (shape(2000, 500, 1, &[]), 5),
            (shape(4000, 1000, 1, &["A"]), 1),
            (shape(4000, 1000, 1, &["B"]), 1),
            (shape(100, 0, 0, &[]), 6),
            (shape(100, 0, 0, &[]), 2),
        ];
        let t = build_target(&pods);
        assert_eq!(t.total_pods, 20);
        let got: Vec<(u32, u64, String)> = t
            .target
            .iter()
            .map(|e| (e.cpu_milli, e.count, e.models.join("|")))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, 8, String::new()),
                (2000, 5, String::new()),
                (1000, 5, String::new()),
                (4000, 1, "B".to_string()),
            ]
        );
        assert_eq!(t.covered(), 19);
    }

    #[test]
    fn resolve_masks_and_weights() {
        let ctx = Cycle {
            strings: vec!["T4".into(), "A10".into()],
            gpu_models: vec![0, 1],
            ..Default::default()
        };
        let t = Target {
            target: vec![
                TargetEntry {
                    cpu_milli: 0,
                    gpu_milli: 500,
                    gpus: 1,
                    models: vec!["A10".into(), "H100".into()],
                    count: 3,
                    memory_mib: 0,
                },
                TargetEntry {
                    cpu_milli: 1000,
                    gpu_milli: 0,
                    gpus: 0,
                    models: vec![],
                    count: 1,
                    memory_mib: 0,
                },
            ],
            total_pods: 5,
        };
        let r = resolve(&ctx, &t);
        assert_eq!(r[0].mask, 0b10);
        assert_eq!(r[0].cpu, 100);
        assert!(r[0].allows(1) && !r[0].allows(0));
        assert!(r[1].cpu_only && r[1].allows(0) && r[1].allows(200));
        assert_eq!(r[0].weight, (3.0 / 5.0) / (4.0 / 5.0));
        assert_eq!(r[1].weight, (1.0 / 5.0) / (4.0 / 5.0));
        let json = t.config_json(Some(3), false);
        assert!(json.contains("\"total_pods\":5") && json.contains("\"seed\":3"));
    }
}
