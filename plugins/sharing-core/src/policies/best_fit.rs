//! BestFit (`docs/fgd-replay/method.md` §7).
//!
//! Owns the score `trunc(100·(1 − [((cpu − c)/128000)·0.5 + ((L − R)/8000)·0.5]))`,
//! in `f64` in the order written. The authors' min–max rescaling over the feasible
//! nodes never changes which nodes have the maximum, so it is skipped. Does not own
//! feasibility or the GPU choice (best fit, `assign`).

use crate::node_view::{GpuFree, NodeView, totals};
use crate::policies::dot_product::{MAX_CPU_MILLI, MAX_GPU_MILLI};
use crate::shape::PodShape;

/// The BestFit score of `pod` on a node (higher for a tighter fit).
pub fn score(node: &NodeView, gpus: &[GpuFree], pod: &PodShape) -> i64 {
    let (l, _, _) = totals(gpus);
    let cpu_left = i64::from(node.cpu) - i64::from(pod.cpu);
    let gpu_left = l as i64 - pod.gpu_request() as i64;
    let s = (cpu_left as f64 / MAX_CPU_MILLI) * 0.5 + (gpu_left as f64 / MAX_GPU_MILLI) * 0.5;
    (100.0 * (1.0 - s)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod, view};

    #[test]
    fn hand_computed() {
        // cpu 64000 − 32000 = 32000 → 0.125; L − R = 4000 − 2000 → 0.125; 100·0.75 = 75.
        let g = gpus(&[1000, 1000, 1000, 1000]);
        assert_eq!(score(&view(64_000), &g, &pod(2, 0, 32_000)), 75);
        // Exact fit scores 100.
        assert_eq!(score(&view(8_000), &gpus(&[300]), &pod(0, 300, 8_000)), 100);
        // (100000 − 1000)/128000·0.5 = 0.38671875; (1700 − 700)/8000·0.5 = 0.0625
        // → 100·(1 − 0.44921875) = 55.078125 → 55.
        let g = gpus(&[1000, 700]);
        assert_eq!(score(&view(100_000), &g, &pod(0, 700, 1_000)), 55);
        // A CPU-only pod with c = 0 counts as 100 milli: (100 − 100) → 0, L = 0 → 100.
        assert_eq!(score(&view(100), &gpus(&[]), &pod(0, 0, 0)), 100);
    }
}
