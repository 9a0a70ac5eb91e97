//! Tests of the cluster view: what is usable, feasibility, booking, and the update from a
//! call's hint against a rebuild.

use super::*;
use gantry_sdk::changes::FRESH;
use gantry_sdk::{Gpu, TaskGroup};

/// A cycle with models "A" (index 0) and "B" (index 1) and node names n0..n9.
pub(crate) fn ctx() -> Cycle {
    let mut strings = vec!["A".to_string(), "B".to_string()];
    strings.extend((0..10).map(|i| format!("n{i}")));
    Cycle {
        seed: 42,
        strings,
        gpu_models: vec![0, 1],
        ..Default::default()
    }
}

/// A node `n{id}` with model symbol `model` and the given free GPU amounts.
pub(crate) fn node(id: u32, model: u32, free: &[u32], cpu: u32) -> Node {
    Node {
        id,
        name: 2 + id,
        state: NodeState::Up,
        cpu_milli_total: 128_000,
        cpu_milli_free: cpu,
        memory_mib_total: 1 << 20,
        memory_mib_free: 1 << 19,
        gpus: free
            .iter()
            .enumerate()
            .map(|(i, &f)| Gpu {
                index: i as u32,
                model,
                memory_mib: 16_000,
                free_milli: f,
                healthy: true,
                parent: None,
            })
            .collect(),
        ..Default::default()
    }
}

fn pod(gpus: u32, gpu_milli: u32, mask: u64) -> PodShape {
    PodShape::of(&TaskGroup {
        count: 1,
        gpus,
        gpu_milli,
        cpu_milli: 1000,
        memory_mib: 1024,
        gpu_model_mask: mask,
    })
}

#[test]
fn usable_nodes_and_gpus_only() {
    let mut nodes = vec![node(0, 0, &[1000, 500], 4000), node(1, 1, &[1000], 4000)];
    nodes[0].gpus[0].healthy = false;
    nodes[1].state = NodeState::Draining;
    nodes.push(node(2, 1, &[300, 1000], 4000));
    nodes[2].gpus.swap(0, 1);
    nodes[2].gpus[1].model = 0;
    let mut v = ClusterView::default();
    v.rebuild(&ctx(), &nodes, 1);
    assert_eq!(v.nodes().len(), 2);
    assert_eq!(v.gpus(0).len(), 1);
    assert_eq!(v.gpus(0)[0].free, 500);
    assert_eq!(v.nodes()[0].model, 0);
    assert_eq!(v.nodes()[1].model, MIXED_MODEL);
    let idx: Vec<u32> = v.gpus(1).iter().map(|g| g.index).collect();
    assert_eq!(idx, vec![0, 1]);
    assert_eq!(totals(v.gpus(1)), (1300, 1, 2));
}

#[test]
fn feasibility_follows_spec_section_4() {
    let mut v = ClusterView::default();
    v.rebuild(
        &ctx(),
        &[node(0, 0, &[1000, 400], 4000), node(1, 1, &[600, 600], 500)],
        1,
    );
    assert!(v.feasible(0, &pod(1, 0, 0)));
    assert!(!v.feasible(0, &pod(2, 0, 0)));
    assert!(v.feasible(0, &pod(0, 900, 0)));
    assert!(!v.feasible(0, &pod(0, 900, 0b10)), "model B only");
    assert!(!v.feasible(1, &pod(0, 100, 0)), "CPU short");
    assert!(v.feasible(0, &pod(0, 0, 0)));
}

#[test]
fn book_and_unbook_round_trip() {
    let mut v = ClusterView::default();
    v.rebuild(&ctx(), &[node(0, 0, &[1000, 1000], 4000)], 1);
    let before = (v.nodes()[0], v.gpus(0).to_vec(), *v.model_totals());
    assert_eq!(
        v.model_totals()[0],
        ModelTotals {
            gpus: 2,
            free_milli: 2000,
            free_whole: 2
        }
    );
    let p = pod(0, 300, 0);
    let b = v.book(0, &p, &[1]);
    assert_eq!(v.gpus(0)[1].free, 700);
    assert_eq!(v.nodes()[0].cpu, 3000);
    assert_eq!((v.cpu_free(), v.memory_free()), (3000, (1 << 19) - 1024));
    assert_eq!(v.nodes()[0].tags, 1);
    assert_eq!(
        v.model_totals()[0],
        ModelTotals {
            gpus: 2,
            free_milli: 1700,
            free_whole: 1
        }
    );
    v.unbook(&b);
    assert_eq!(
        (v.nodes()[0], v.gpus(0).to_vec(), *v.model_totals()),
        before
    );
    assert_eq!(v.cpu_free(), 4000);
}

/// Everything a caller can read from a view.
fn readable(
    v: &ClusterView,
) -> (
    Vec<NodeView>,
    Vec<Vec<GpuFree>>,
    [ModelTotals; MODEL_SLOTS],
    u64,
    u64,
) {
    let gpus = (0..v.nodes().len()).map(|i| v.gpus(i).to_vec()).collect();
    (
        v.nodes().to_vec(),
        gpus,
        *v.model_totals(),
        v.cpu_free(),
        v.memory_free(),
    )
}

/// The hint an unchanged position gives: `i` where the node equals the previous one at
/// `i`, else `FRESH`.
fn kept_in_place(before: &[Node], now: &[Node]) -> Vec<u32> {
    (0..now.len())
        .map(|i| match before.get(i) {
            Some(b) if *b == now[i] => i as u32,
            _ => FRESH,
        })
        .collect()
}

#[test]
fn following_a_hint_equals_a_rebuild_after_random_changes_and_bookings() {
    let ctx = ctx();
    let mut x = 7u64;
    let mut next = |n: u64| {
        x = crate::rank::splitmix64(x);
        x % n
    };
    let (mut followed, mut rebuilt) = (0, 0);
    for round in 0..60 {
        let mut nodes: Vec<Node> = (0..8)
            .map(|i| {
                node(
                    i,
                    next(2) as u32,
                    &[1000, 1000, 500, 0][..1 + next(4) as usize],
                    8000,
                )
            })
            .collect();
        let mut view = ClusterView::default();
        view.rebuild(&ctx, &nodes, 3);
        for step in 0..25 {
            // Book a few tasks as a call would (they may or may not reach the next input).
            for _ in 0..next(3) {
                let i = next(view.nodes().len().max(1) as u64) as usize;
                if i < view.nodes().len() {
                    let p = pod(0, 100 * (1 + next(5) as u32), 0);
                    let free: Vec<usize> = (0..view.gpus(i).len())
                        .filter(|&g| view.gpus(i)[g].free >= p.milli)
                        .take(1)
                        .collect();
                    if view.feasible(i, &p) {
                        view.book(i, &p, &free);
                    }
                }
            }
            let before = nodes.clone();
            for _ in 0..next(3) {
                let n = &mut nodes[next(8) as usize];
                match next(6) {
                    0 => n.cpu_milli_free = next(9) as u32 * 1000,
                    1 => n.state = [NodeState::Up, NodeState::Draining][next(2) as usize],
                    2 => n.gpus[0].healthy = next(3) != 0,
                    3 => n.id += 100,
                    _ => {
                        let g = next(n.gpus.len() as u64) as usize;
                        n.gpus[g].free_milli = 250 * next(5) as u32;
                    }
                }
            }
            let mut kept = kept_in_place(&before, &nodes);
            if next(10) == 0 {
                // An element moved: the view must rebuild.
                kept.swap(0, 1);
                nodes.swap(0, 1);
            }
            if view.update(&ctx, &nodes, 3, Some(&kept)) {
                followed += 1;
            } else {
                rebuilt += 1;
            }
            let mut fresh = ClusterView::default();
            fresh.rebuild(&ctx, &nodes, 3);
            assert_eq!(
                readable(&view),
                readable(&fresh),
                "round {round} step {step}"
            );
        }
    }
    assert!(
        followed > 500 && rebuilt > 50,
        "followed {followed}, rebuilt {rebuilt}"
    );
}

#[test]
fn no_hint_another_seed_or_other_models_rebuild() {
    let ctx0 = ctx();
    let nodes = vec![node(0, 0, &[1000], 4000), node(1, 1, &[500], 4000)];
    let mut v = ClusterView::default();
    assert!(!v.update(&ctx0, &nodes, 1, Some(&[0, 1])), "never built");
    assert!(v.update(&ctx0, &nodes, 1, Some(&[0, 1])));
    assert!(!v.update(&ctx0, &nodes, 1, None));
    assert!(!v.update(&ctx0, &nodes, 2, Some(&[0, 1])), "seed changed");
    let mut ctx1 = ctx();
    ctx1.gpu_models = vec![1, 0];
    assert!(!v.update(&ctx1, &nodes, 2, Some(&[0, 1])), "models changed");
    assert!(!v.update(&ctx1, &nodes[..1], 2, Some(&[0])), "fewer nodes");
}
