//! GPU assignment on the chosen node (`docs/fgd-replay/method.md` §6).
//!
//! Owns which GPUs a pod takes: a whole-GPU pod the `n` lowest-indexed completely free
//! allowed GPUs (every policy); a sharing pod, per policy, the best fit (smallest
//! `l ≥ m`, lowest index among equals), a uniform draw among the allowed GPUs with
//! `l ≥ m` (Random), or the GPU FGD's score picked. Positions are within the node's
//! GPU slice, which `node_view` keeps in device-index order. Does not own node choice.

use crate::node_view::GpuFree;
use crate::rank::Rng;
use crate::shape::{PodKind, PodShape};
use gantry_sdk::MILLI_PER_GPU;

/// How a sharing pod picks its GPU.
#[derive(Debug)]
pub enum ShareRule<'a> {
    /// The smallest free amount that fits; lowest index among equals.
    BestFit,
    /// Uniformly among the GPUs that fit.
    Random(&'a mut Rng),
    /// The GPU at this position (FGD's choice); checked to fit.
    Given(usize),
}

/// The GPU positions `pod` takes on a node with `gpus`, or `None` if it does not fit.
/// CPU-only pods take none (`Some(vec![])`).
pub fn assign(gpus: &[GpuFree], pod: &PodShape, rule: ShareRule<'_>) -> Option<Vec<usize>> {
    match pod.kind {
        PodKind::CpuOnly => Some(Vec::new()),
        PodKind::Whole => lowest_free(gpus, pod),
        PodKind::Sharing => match rule {
            ShareRule::BestFit => best_fit(gpus, pod),
            ShareRule::Random(rng) => random(gpus, pod, rng),
            ShareRule::Given(p) => gpus.get(p).filter(|g| fits(g, pod)).map(|_| p),
        }
        .map(|p| vec![p]),
    }
}

/// Whether a sharing pod fits on GPU `g`.
pub fn fits(g: &GpuFree, pod: &PodShape) -> bool {
    g.free >= pod.milli && pod.allows(g.model)
}

/// The `n` lowest-indexed completely free GPUs the pod may use.
pub fn lowest_free(gpus: &[GpuFree], pod: &PodShape) -> Option<Vec<usize>> {
    let picked: Vec<usize> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.free == MILLI_PER_GPU && pod.allows(g.model))
        .map(|(p, _)| p)
        .take(pod.gpus as usize)
        .collect();
    (picked.len() == pod.gpus as usize).then_some(picked)
}

/// The position of the GPU with the smallest `l ≥ m`, lowest index among equals.
pub fn best_fit(gpus: &[GpuFree], pod: &PodShape) -> Option<usize> {
    gpus.iter()
        .enumerate()
        .filter(|(_, g)| fits(g, pod))
        .min_by_key(|(p, g)| (g.free, *p))
        .map(|(p, _)| p)
}

/// A uniformly random position among the GPUs with `l ≥ m`.
pub fn random(gpus: &[GpuFree], pod: &PodShape, rng: &mut Rng) -> Option<usize> {
    let count = gpus.iter().filter(|g| fits(g, pod)).count();
    if count == 0 {
        return None;
    }
    let k = rng.below(count as u64) as usize;
    gpus.iter()
        .enumerate()
        .filter(|(_, g)| fits(g, pod))
        .nth(k)
        .map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::tests::{gpus, pod};

    #[test]
    fn whole_pods_take_the_lowest_free_gpus() {
        let g = gpus(&[1000, 300, 1000, 1000]);
        assert_eq!(
            assign(&g, &pod(2, 0, 1), ShareRule::BestFit),
            Some(vec![0, 2])
        );
        let mut other = g.clone();
        other[0].model = 1;
        let mut p = pod(2, 0, 1);
        p.model_mask = 0b1;
        assert_eq!(assign(&other, &p, ShareRule::BestFit), Some(vec![2, 3]));
        assert_eq!(assign(&g, &pod(4, 0, 1), ShareRule::BestFit), None);
        assert_eq!(assign(&g, &pod(0, 0, 1), ShareRule::BestFit), Some(vec![]));
    }

    #[test]
    fn best_fit_takes_the_smallest_fitting_lowest_index() {
        let g = gpus(&[1000, 600, 400, 600]);
        assert_eq!(
            assign(&g, &pod(0, 500, 1), ShareRule::BestFit),
            Some(vec![1])
        );
        assert_eq!(
            assign(&g, &pod(0, 300, 1), ShareRule::BestFit),
            Some(vec![2])
        );
        assert_eq!(
            assign(&g, &pod(0, 700, 1), ShareRule::BestFit),
            Some(vec![0])
        );
        assert_eq!(assign(&g, &pod(0, 1001, 1), ShareRule::BestFit), None);
    }

    #[test]
    fn random_is_uniform_over_fitting_gpus() {
        let g = gpus(&[1000, 200, 600, 600]);
        let p = pod(0, 500, 1);
        let mut hits = [0u32; 4];
        for job in 0..3000 {
            let mut rng = Rng::for_task(1, job, 0);
            if let Some(v) = assign(&g, &p, ShareRule::Random(&mut rng)) {
                hits[v[0]] += 1;
            }
        }
        assert_eq!(hits[1], 0);
        assert!(
            [0, 2, 3].iter().all(|&i| (900..1100).contains(&hits[i])),
            "{hits:?}"
        );
    }

    #[test]
    fn given_position_is_checked() {
        let g = gpus(&[1000, 200]);
        let p = pod(0, 500, 1);
        assert_eq!(assign(&g, &p, ShareRule::Given(0)), Some(vec![0]));
        assert_eq!(assign(&g, &p, ShareRule::Given(1)), None);
        assert_eq!(assign(&g, &p, ShareRule::Given(7)), None);
    }
}
