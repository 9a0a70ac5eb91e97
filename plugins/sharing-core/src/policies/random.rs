//! Random (`docs/fgd-replay/method.md` §7): a feasible node uniformly at random.
//!
//! Owns the node draw: count the feasible nodes, draw one uniformly with the task's
//! generator (seeded by seed, job id and task index, so the same input gives the same
//! plan), and find it in a second pass. Does not own the GPU draw of a sharing pod
//! (`assign`).

use crate::node_view::ClusterView;
use crate::rank::Rng;
use crate::shape::PodShape;

/// A uniformly random feasible node for `pod`, or `None` when none is feasible.
pub fn pick_node(view: &ClusterView, pod: &PodShape, rng: &mut Rng) -> Option<usize> {
    let n = view.nodes().len();
    let count = (0..n).filter(|&i| view.feasible(i, pod)).count();
    if count == 0 {
        return None;
    }
    let k = rng.below(count as u64) as usize;
    (0..n).filter(|&i| view.feasible(i, pod)).nth(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_view::tests::{ctx, node};
    use crate::policies::tests::pod;

    #[test]
    fn uniform_over_feasible_nodes_only() {
        let mut v = ClusterView::default();
        let nodes = [
            node(0, 0, &[1000], 4000),
            node(1, 0, &[0], 4000),
            node(2, 0, &[1000], 4000),
            node(3, 0, &[1000], 4000),
        ];
        v.rebuild(&ctx(), &nodes, 1);
        let p = pod(1, 0, 1000);
        let mut hits = [0u32; 4];
        for job in 0..3000 {
            let mut rng = Rng::for_task(5, job, 0);
            if let Some(i) = pick_node(&v, &p, &mut rng) {
                hits[i] += 1;
            }
        }
        assert_eq!(hits[1], 0);
        assert!(
            hits.iter()
                .enumerate()
                .all(|(i, &h)| i == 1 || (900..1100).contains(&h))
        );
        let a = pick_node(&v, &p, &mut Rng::for_task(5, 9, 1));
        assert_eq!(a, pick_node(&v, &p, &mut Rng::for_task(5, 9, 1)));
        assert_eq!(
            pick_node(&v, &pod(2, 0, 1), &mut Rng::for_task(5, 9, 1)),
            None
        );
    }
}
