//! The six policies of the FGD paper (`docs/fgd-replay/method.md` §7), Gantry's
//! `stranding` (`crate::stranding`), and their names, config hints and per-node scores.
//!
//! Owns the [`Policy`] enum and the dispatch to each integer score. The simple scores
//! live one per module here; FGD's lives in `crate::fgd`. Does not own the node
//! choice among scores (`place`) or the GPU choice (`assign`).

pub mod best_fit;
pub mod dot_product;
pub mod gpu_clustering;
pub mod gpu_packing;
pub mod random;

use crate::node_view::{GpuFree, NodeView};
use crate::shape::PodShape;

/// A per-node score function of the simple policies.
pub type ScoreFn = fn(&NodeView, &[GpuFree], &PodShape) -> i64;

/// One of the six placement policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// A feasible node uniformly at random.
    Random,
    /// Tetris-style dot product of free and requested resources.
    DotProduct,
    /// Pods of one kind together.
    GpuClustering,
    /// Shared GPUs first, then used nodes, then the smallest idle node.
    GpuPacking,
    /// The tightest fit.
    BestFit,
    /// Fragmentation gradient descent.
    Fgd,
    /// FGD's gradient counting memory, weighing shapes by GPU demand learnt online, and
    /// compared exactly (`crate::stranding`).
    Stranding,
}

const SEED_NOTE: &str = "seed: the tie-break rank (and random draws) use this seed, default the cycle seed; the daemon changes the cycle seed every cycle, so set it for stable ranks (the simulator keeps it fixed for a run)";

impl Policy {
    /// The paper's six, in its order, then Gantry's own.
    pub const ALL: [Policy; 7] = [
        Policy::Random,
        Policy::DotProduct,
        Policy::GpuClustering,
        Policy::GpuPacking,
        Policy::BestFit,
        Policy::Fgd,
        Policy::Stranding,
    ];

    /// The plugin name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::DotProduct => "dot-product",
            Policy::GpuClustering => "gpu-clustering",
            Policy::GpuPacking => "gpu-packing",
            Policy::BestFit => "best-fit",
            Policy::Fgd => "fgd",
            Policy::Stranding => "stranding",
        }
    }

    /// The config hint of the plugin's metadata.
    pub fn config_hint(self) -> String {
        match self {
            Policy::Fgd => format!(
                "{{\"seed\"?: u64, \"strict\"?: bool (default false), \"target\"?: [{{\"cpu_milli\": u32, \"gpu_milli\": u32 (per GPU, 0 for CPU-only), \"gpus\": u32, \"models\": [string] (empty = any), \"count\": u64}}] (in target order, already cut to the 95% prefix; default: derived each call from the pending and running tasks), \"total_pods\"?: u64 (pods of the original list, default the sum of counts; weights are (count/total)/(cum/total))}}. {SEED_NOTE}"
            ),
            Policy::Stranding => format!(
                "{{\"seed\"?: u64, \"strict\"?: bool (default false), \"memory\"?: bool (default true: memory strands GPUs like CPU), \"coverage_pct\"?: 1..=100 (default 100: every task shape seen), \"scale\"?: u32 (default 1400: score trunc(100·sigmoid(−ΔF/scale)); 0 compares ΔF exactly), \"cpu_only_ties\"?: \"packed\" (default) | \"rank\", \"weigh\"?: \"tasks\" (default) | \"gpu-demand\"}}; the target is learnt each call from the pending and running tasks. {SEED_NOTE}"
            ),
            _ => format!(
                "{{\"seed\"?: u64, \"strict\"?: bool (default false: a job that does not fit does not stop later ones)}}. {SEED_NOTE}"
            ),
        }
    }

    /// The score of the simple argmax policies (`None` for Random and Fgd).
    pub fn simple_score(self) -> Option<ScoreFn> {
        match self {
            Policy::DotProduct => Some(dot_product::score),
            Policy::GpuClustering => Some(gpu_clustering::score),
            Policy::GpuPacking => Some(gpu_packing::score),
            Policy::BestFit => Some(best_fit::score),
            Policy::Random | Policy::Fgd | Policy::Stranding => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::shape::NO_MODEL;
    use gantry_sdk::TaskGroup;

    /// A node view with free CPU `cpu` (other fields neutral).
    pub(crate) fn view(cpu: u32) -> NodeView {
        let ctx = crate::node_view::tests::ctx();
        let mut v = crate::node_view::ClusterView::default();
        v.rebuild(&ctx, &[crate::node_view::tests::node(0, 0, &[], cpu)], 0);
        v.nodes()[0]
    }

    /// GPUs of model index 0 with the given free amounts.
    pub(crate) fn gpus(free: &[u32]) -> Vec<GpuFree> {
        free.iter()
            .enumerate()
            .map(|(i, &f)| GpuFree {
                index: i as u32,
                free: f,
                model: 0,
            })
            .collect()
    }

    /// A pod of `gpus` whole GPUs or `gpu_milli` of one, with `cpu_milli`.
    pub(crate) fn pod(gpus: u32, gpu_milli: u32, cpu_milli: u32) -> PodShape {
        PodShape::of(&TaskGroup {
            count: 1,
            gpus,
            gpu_milli,
            cpu_milli,
            memory_mib: 0,
            gpu_model_mask: 0,
        })
    }

    #[test]
    fn names_and_dispatch() {
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            [
                "random",
                "dot-product",
                "gpu-clustering",
                "gpu-packing",
                "best-fit",
                "fgd",
                "stranding"
            ]
        );
        assert!(Policy::Random.simple_score().is_none());
        assert!(Policy::Fgd.simple_score().is_none());
        assert!(Policy::Fgd.config_hint().contains("target"));
        assert!(Policy::BestFit.config_hint().contains("seed"));
        let f = Policy::BestFit.simple_score();
        assert!(f.is_some_and(|f| f(&view(8000), &gpus(&[300]), &pod(0, 300, 8000)) == 100));
        assert_eq!(gpus(&[1])[0].model, 0);
        assert_ne!(NO_MODEL, 0);
    }
}
