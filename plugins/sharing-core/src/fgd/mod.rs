//! FGD, fragmentation gradient descent (`docs/fgd-replay/method.md` §8).
//!
//! Owns the target workload (`target`, derived per call in `derive`), fragmentation and the gradient score
//! (`frag`), node scoring with GPU choice (`scorer`) and its memo (`memo`). Does not
//! own the node choice among scores (`place`).

pub mod derive;
pub mod frag;
pub mod memo;
pub mod scorer;
pub mod target;

pub use derive::derive_target;
pub use scorer::FgdScorer;
pub use target::{Target, TargetEntry, TraceShape, build_target};

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::frag::*;
    use super::scorer::evaluate;
    use super::target::{ResolvedShape, resolve};
    use super::*;
    use crate::node_view::GpuFree;
    use crate::policies::tests::pod;
    use gantry_sdk::Cycle;

    fn ctx() -> Cycle {
        Cycle {
            strings: vec!["A".into(), "B".into()],
            gpu_models: vec![0, 1],
            ..Default::default()
        }
    }

    fn entry(c: u32, m: u32, n: u32, models: &[&str], count: u64) -> TargetEntry {
        TargetEntry {
            cpu_milli: c,
            gpu_milli: m,
            gpus: n,
            models: models.iter().map(|s| s.to_string()).collect(),
            count,
            memory_mib: 0,
        }
    }

    /// t0 CPU-only c=1000 ×2; t1 share 500 c=2000 ×3; t2 2 whole GPUs of A c=4000 ×1;
    /// t3 share 300 of B c=1000 ×1. Total 7.
    fn shapes() -> Vec<ResolvedShape> {
        let t = Target {
            target: vec![
                entry(1000, 0, 0, &[], 2),
                entry(2000, 500, 1, &[], 3),
                entry(4000, 1000, 2, &["A"], 1),
                entry(1000, 300, 1, &["B"], 1),
            ],
            total_pods: 7,
        };
        resolve(&ctx(), &t)
    }

    fn gpus(free: &[u32]) -> Vec<GpuFree> {
        free.iter()
            .enumerate()
            .map(|(i, &f)| GpuFree {
                index: i as u32,
                free: f,
                model: 0,
            })
            .collect()
    }

    fn classify_all(cpu: i64, free: &[u32]) -> Vec<(usize, u64)> {
        let g = gpus(free);
        let total = g.iter().map(|x| u64::from(x.free)).sum();
        shapes()
            .iter()
            .map(|s| classify(s, cpu, total, fit_of(s, &g)))
            .collect()
    }

    #[test]
    fn every_fragmentation_case() {
        let free = [1000, 600, 200, 0];
        // L = 1800. t1 satisfied: fragment = GPUs below 500 = 200.
        assert_eq!(
            classify_all(3000, &free),
            vec![
                (CPU_SHAPE_FITS, 1800),
                (SATISFIED, 200),
                (LACK_BOTH, 1800),
                (NO_ACCESS, 1800)
            ]
        );
        assert_eq!(classify_all(1500, &free)[1], (LACK_CPU, 1800));
        assert_eq!(classify_all(500, &free)[0], (CPU_SHAPE_LACKS_CPU, 1800));
        assert_eq!(classify_all(5000, &free)[2], (LACK_GPU, 1800));
        assert_eq!(classify_all(5000, &[1000, 1000])[2], (SATISFIED, 0));
        assert_eq!(classify_all(5000, &[400, 400])[1], (LACK_GPU, 800));
    }

    #[test]
    fn fragmentation_float_and_exact() {
        let s = shapes();
        let g = gpus(&[1000, 600, 200, 0]);
        let fit = |_: usize, t: &ResolvedShape| fit_of(t, &g);
        // 7·F = 2·1800 + 3·200 + 1800 + 1800 = 7800.
        assert_eq!(fragmentation_exact(&s, 3000i64, 1800, fit), 7800);
        let f = fragmentation(&s, 3000i64, 1800, fit);
        assert!((f - 7800.0 / 7.0).abs() < 1e-9, "{f}");
    }

    #[test]
    fn sharing_pod_gradient_and_gpu_choice() {
        let s = shapes();
        let g = gpus(&[1000, 600, 200, 0]);
        let (mut fits, mut changed) = (Vec::new(), Vec::new());
        // GPU 0 → [600,600,200,0]: 7·F' = 2800 + 600 + 1400 + 1400 = 6200, ΔF = −1600/7,
        // score trunc(100·σ(0.2286)) = 55. GPU 1 → [1000,200,200,0]: 7·F' = 6800,
        // ΔF = −1000/7, score 53. Best fit would take GPU 1; FGD takes GPU 0.
        let p = pod(0, 400, 1000);
        assert_eq!(evaluate(&s, &mut fits, &mut changed, 3000, &g, &p), (55, 0));
        assert_eq!(exact_gradient_score(-1600, 7), 55);
        assert_eq!(exact_gradient_score(-1000, 7), 53);
        // Equal free amounts: the lowest index wins.
        let g2 = gpus(&[200, 700, 700]);
        assert_eq!(evaluate(&s, &mut fits, &mut changed, 3000, &g2, &p).1, 1);
    }

    #[test]
    fn zero_gradient_scores_exactly_50() {
        let s = shapes();
        let g = gpus(&[1000, 600, 200, 0]);
        let (mut fits, mut changed) = (Vec::new(), Vec::new());
        // A CPU-only pod that crosses no CPU threshold.
        let p = pod(0, 0, 500);
        assert_eq!(evaluate(&s, &mut fits, &mut changed, 3000, &g, &p), (50, 0));
        // t0 moves from "CPU shape fits" to "CPU shape lacks CPU" with the same amount.
        assert_eq!(evaluate(&s, &mut fits, &mut changed, 1200, &g, &p), (50, 0));
        // Crossing t1's threshold (satisfied → lack CPU): 7·ΔF = 3·(1800 − 200) > 0.
        let (score, _) = evaluate(&s, &mut fits, &mut changed, 2400, &g, &p);
        assert_eq!(score, exact_gradient_score(4800, 7));
        assert!(score < 50);
        // No target at all: every gradient is zero.
        assert_eq!(
            evaluate(&[], &mut fits, &mut changed, 3000, &g, &p),
            (50, 0)
        );
    }

    #[test]
    fn whole_pod_takes_free_gpus_in_the_after_state() {
        let s = shapes();
        let g = gpus(&[1000, 1000, 600]);
        let (mut fits, mut changed) = (Vec::new(), Vec::new());
        // Before (cpu 8000, L 2600): t0 2600, t1 satisfied 0, t2 satisfied 600, t3 NA 2600
        // → 7·F = 5200 + 0 + 600 + 2600 = 8400. After 1 GPU (cpu 7000, [0,1000,600],
        // L 1600): 3200 + 0 + (lack GPU) 1600 + 1600 = 6400 → 7·ΔF = −2000.
        let p = pod(1, 0, 1000);
        let got = evaluate(&s, &mut fits, &mut changed, 8000, &g, &p);
        assert_eq!(got, (exact_gradient_score(-2000, 7), 0));
    }

    /// The float evaluation gives the exact integer score wherever ΔF ≠ 0.
    #[test]
    fn float_matches_exact_when_the_gradient_is_not_zero() {
        let s = shapes();
        let cum: u64 = s.iter().map(|t| t.count).sum();
        let (mut fits, mut changed) = (Vec::new(), Vec::new());
        let mut x = 12345u64;
        let mut next = |n: u64| {
            x = crate::rank::splitmix64(x);
            x % n
        };
        let levels = [0, 100, 200, 300, 450, 500, 600, 750, 1000];
        let mut compared = 0;
        for _ in 0..3000 {
            let len = 1 + next(8) as usize;
            let mut g: Vec<GpuFree> = (0..len)
                .map(|i| GpuFree {
                    index: i as u32,
                    free: levels[next(levels.len() as u64) as usize],
                    model: 0,
                })
                .collect();
            if next(4) == 0 {
                g.iter_mut().for_each(|x| x.model = 1);
            }
            let cpu = 500 * next(12) as u32;
            let p = match next(3) {
                0 => pod(0, 0, 250 * (1 + next(8) as u32)),
                1 => pod(0, 100 * (1 + next(9) as u32), 1000),
                _ => pod(1 + next(2) as u32, 0, 1000),
            };
            if p.cpu_request > cpu {
                continue;
            }
            // Exact: every candidate's scaled ΔF, best score, lowest index.
            let total: u64 = g.iter().map(|x| u64::from(x.free)).sum();
            let fit = |_: usize, t: &ResolvedShape| fit_of(t, &g);
            let f0 = fragmentation_exact(&s, i64::from(cpu), total, fit);
            let mut cands: Vec<(usize, Vec<GpuFree>)> = Vec::new();
            match p.kind {
                crate::shape::PodKind::CpuOnly => cands.push((0, g.clone())),
                crate::shape::PodKind::Whole => {
                    let mut after = g.clone();
                    let free: Vec<usize> = (0..len).filter(|&i| g[i].free == 1000).collect();
                    if free.len() < p.gpus as usize {
                        continue;
                    }
                    free.iter()
                        .take(p.gpus as usize)
                        .for_each(|&i| after[i].free = 0);
                    cands.push((0, after));
                }
                crate::shape::PodKind::Sharing => {
                    for i in (0..len).filter(|&i| g[i].free >= p.milli) {
                        let mut after = g.clone();
                        after[i].free -= p.milli;
                        cands.push((i, after));
                    }
                }
            }
            if cands.is_empty() {
                continue;
            }
            let mut best: Option<(i64, usize)> = None;
            let mut any_zero = false;
            for (pos, after) in &cands {
                let t1: u64 = after.iter().map(|x| u64::from(x.free)).sum();
                let cpu1 = i64::from(cpu) - i64::from(p.cpu);
                let f1 = fragmentation_exact(&s, cpu1, t1, |_, t| fit_of(t, after));
                any_zero |= f1 == f0;
                let sc = exact_gradient_score(f1 - f0, cum);
                if best.is_none_or(|(b, _)| sc > b) {
                    best = Some((sc, *pos));
                }
            }
            if any_zero {
                continue;
            }
            let got = evaluate(&s, &mut fits, &mut changed, cpu, &g, &p);
            assert_eq!(Some(got), best, "gpus {g:?} cpu {cpu} pod {p:?}");
            compared += 1;
        }
        assert!(compared > 500, "{compared}");
    }
}
