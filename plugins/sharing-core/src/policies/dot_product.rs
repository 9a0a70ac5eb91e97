//! DotProd (`docs/fgd-replay/method.md` §7, Tetris-style, GPU dimensions merged, "max" normalisation).
//!
//! Owns the score `trunc(100·(1 − ½·[(cpu/128000)·(c/128000) + (L/8000)·(R/8000)]))`,
//! evaluated in `f64` in the order written. Higher for less free capacity. Does not
//! own feasibility or the GPU choice (best fit, `assign`).

use crate::node_view::{GpuFree, NodeView, totals};
use crate::shape::PodShape;

/// CPU normaliser, milli-cores.
pub const MAX_CPU_MILLI: f64 = 128_000.0;
/// GPU normaliser, milli-GPU.
pub const MAX_GPU_MILLI: f64 = 8_000.0;

/// The DotProd score of `pod` on a node with free CPU `node.cpu` and GPUs `gpus`.
pub fn score(node: &NodeView, gpus: &[GpuFree], pod: &PodShape) -> i64 {
    let (l, _, _) = totals(gpus);
    raw(f64::from(node.cpu), l as f64, pod)
}

fn raw(cpu: f64, l: f64, pod: &PodShape) -> i64 {
    let cpu_term = (cpu / MAX_CPU_MILLI) * (f64::from(pod.cpu) / MAX_CPU_MILLI);
    let gpu_term = (l / MAX_GPU_MILLI) * (pod.gpu_request() as f64 / MAX_GPU_MILLI);
    (100.0 * (1.0 - 0.5 * (cpu_term + gpu_term))) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod, view};

    #[test]
    fn hand_computed() {
        // cpu 64000, L = 4000; pod c = 32000, whole 2 GPUs (R = 2000):
        // 0.5·0.25 + 0.5·0.25 = 0.25 → 100·(1 − 0.125) = 87.5 → 87.
        let g = gpus(&[1000, 1000, 1000, 1000]);
        assert_eq!(score(&view(64_000), &g, &pod(2, 0, 32_000)), 87);
        // Empty node and a CPU-only pod with c = 0 (non-zero 100): 1 − ½·(1·100/128000) → 99.
        assert_eq!(score(&view(128_000), &gpus(&[]), &pod(0, 0, 0)), 99);
        // Fuller node scores higher: cpu 16000, L = 500 → ~100·(1 − tiny) = 99.
        let g = gpus(&[500, 0]);
        assert_eq!(score(&view(16_000), &g, &pod(0, 250, 8_000)), 99);
        // Big node, big pod: cpu 128000·128000 → 1, L 8000·8000 → 1 → 100·(1 − 1) = 0.
        let g = gpus(&[1000; 8]);
        assert_eq!(score(&view(128_000), &g, &pod(8, 0, 128_000)), 0);
    }
}
