//! GpuPacking (`docs/fgd-replay/method.md` §7): prefer shared GPUs, then free GPUs on used nodes, then the
//! smallest idle node.
//!
//! Owns the three cases: all GPUs of the node fully free → `max(33 − F, F)`; else with
//! the GPUs the pod would use (increasing `l`, the first `n` with `l ≥ m`) of which `k`
//! are fully free: `k > 0` → `max(50 − k, 33)`, else `max(100 − floor(S/10), 50)` with
//! `S = Σ floor(100·l/1000)` over them. CPU-only pods score 0. Does not own
//! feasibility or the GPU choice (best fit, `assign`).

use crate::node_view::{GpuFree, NodeView, totals};
use crate::shape::{PodKind, PodShape};
use gantry_sdk::MILLI_PER_GPU;

/// The GpuPacking score of `pod` on a node.
pub fn score(_node: &NodeView, gpus: &[GpuFree], pod: &PodShape) -> i64 {
    if pod.kind == PodKind::CpuOnly {
        return 0;
    }
    let (_, f, g) = totals(gpus);
    if f == g {
        return (33 - i64::from(f)).max(i64::from(f));
    }
    // The GPUs the pod would use (smallest fitting amounts first): for a whole-GPU pod
    // (m = 1000) the first n fully free ones; for a sharing pod (n = 1) the smallest l ≥ m.
    let (k, s) = match pod.kind {
        PodKind::Whole => {
            let free = gpus
                .iter()
                .filter(|x| x.free == MILLI_PER_GPU && pod.allows(x.model))
                .count() as i64;
            (free.min(i64::from(pod.gpus)), 0)
        }
        _ => match gpus
            .iter()
            .filter(|x| x.free >= pod.milli && pod.allows(x.model))
            .map(|x| x.free)
            .min()
        {
            Some(MILLI_PER_GPU) => (1, 0),
            Some(l) => (0, i64::from(l) * 100 / 1000),
            None => (0, 0),
        },
    };
    if k > 0 {
        return (50 - k).max(33);
    }
    (100 - s / 10).max(50)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod, view};

    #[test]
    fn idle_node_case() {
        let v = view(64_000);
        assert_eq!(score(&v, &gpus(&[1000; 8]), &pod(0, 500, 1000)), 25);
        assert_eq!(score(&v, &gpus(&[1000; 2]), &pod(1, 0, 1000)), 31);
        assert_eq!(score(&v, &gpus(&[1000; 20]), &pod(1, 0, 1000)), 20);
    }

    #[test]
    fn fresh_gpu_on_used_node_case() {
        let v = view(64_000);
        // The 400 GPU is too small for 600: the pod takes a fully free one → k = 1.
        assert_eq!(score(&v, &gpus(&[400, 1000, 1000]), &pod(0, 600, 1000)), 49);
        // Whole pod of 2 on a used node: k = 2 → 48.
        assert_eq!(score(&v, &gpus(&[0, 1000, 1000]), &pod(2, 0, 1000)), 48);
        // k = 20 is capped at 33.
        let mut many = vec![1000; 21];
        many[0] = 0;
        assert_eq!(score(&v, &gpus(&many), &pod(20, 0, 1000)), 33);
    }

    #[test]
    fn shared_gpu_case() {
        let v = view(64_000);
        // Smallest fitting l = 700: S = 70 → 100 − 7 = 93.
        assert_eq!(score(&v, &gpus(&[900, 700, 1000]), &pod(0, 500, 1000)), 93);
        // l = 999: S = 99 → 100 − 9 = 91.
        assert_eq!(score(&v, &gpus(&[999, 1000]), &pod(0, 999, 1000)), 91);
        assert_eq!(score(&v, &gpus(&[0, 250]), &pod(0, 100, 1000)), 98);
        assert_eq!(score(&v, &gpus(&[0]), &pod(0, 0, 1000)), 0, "CPU-only");
    }
}
