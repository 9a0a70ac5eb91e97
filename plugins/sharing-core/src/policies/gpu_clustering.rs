//! GpuClustering (`docs/fgd-replay/method.md` §7): keep pods of one kind together.
//!
//! Owns the score from the pod's tag ("share", "k-gpu") and the node's tags (the tags
//! of the GPU pods on it; built by `node_view` from the running jobs and the tasks
//! booked earlier in the same call): with `b = floor(25·(8000 − L)/8000)`,
//! `b + 75` (only the pod's tag), `b + 50` (the pod's tag and others), `b + 25` (no
//! tag), `b` (only other tags); 0 for CPU-only pods. Does not own feasibility or the
//! GPU choice (best fit, `assign`).

use crate::node_view::{GpuFree, NodeView, totals};
use crate::shape::{PodKind, PodShape};

/// The GpuClustering score of `pod` on a node.
pub fn score(node: &NodeView, gpus: &[GpuFree], pod: &PodShape) -> i64 {
    if pod.kind == PodKind::CpuOnly {
        return 0;
    }
    let (l, _, _) = totals(gpus);
    let b = (25 * (8000 - l as i64)).div_euclid(8000);
    let tag = pod.tag();
    if node.tags == tag {
        b + 75
    } else if node.tags & tag != 0 {
        b + 50
    } else if node.tags == 0 {
        b + 25
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod, view};

    fn tagged(tags: u64) -> NodeView {
        NodeView {
            tags,
            ..view(64_000)
        }
    }

    #[test]
    fn four_cases() {
        // L = 3000 → b = floor(25·5000/8000) = floor(15.625) = 15.
        let g = gpus(&[1000, 1000, 1000, 0]);
        let share = pod(0, 500, 1000);
        assert_eq!(share.tag(), 1);
        assert_eq!(score(&tagged(1), &g, &share), 90, "only its tag");
        assert_eq!(
            score(&tagged(1 | 1 << 2), &g, &share),
            65,
            "its tag and others"
        );
        assert_eq!(score(&tagged(0), &g, &share), 40, "no tag");
        assert_eq!(score(&tagged(1 << 2), &g, &share), 15, "only other tags");
        let two = pod(2, 0, 1000);
        assert_eq!(score(&tagged(1 << 2), &g, &two), 90);
        assert_eq!(score(&tagged(1), &g, &two), 15);
    }

    #[test]
    fn cpu_only_and_full_node() {
        let g = gpus(&[1000; 8]);
        assert_eq!(score(&tagged(1), &g, &pod(0, 0, 1000)), 0);
        // L = 8000 → b = 0.
        assert_eq!(score(&tagged(0), &g, &pod(1, 0, 1000)), 25);
        // L = 1 → b = floor(25·7999/8000) = 24.
        assert_eq!(score(&tagged(0), &gpus(&[1]), &pod(0, 1, 1)), 49);
    }
}
