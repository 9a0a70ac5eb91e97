//! FGD node scoring: the gradient of a pod on a node and, for a sharing pod, its GPU.
//!
//! Owns the target in use (configured, or derived per call), the candidate after-states
//! of a pod on a node (`docs/fgd-replay/method.md` §8: CPU-only pods change only CPU; whole-GPU pods empty the
//! `n` lowest-indexed free GPUs; sharing pods try every GPU with `l ≥ m`, one
//! evaluation per distinct free amount, the lowest index among equal scores), and the
//! memo. Per node the work is O(shapes × GPUs): one pass builds each shape's summary
//! ([`ShapeFit`]) of the before-state, and each after-state is then evaluated in
//! O(shapes) by adjusting the summaries for the changed GPUs.
//! Does not own fragmentation arithmetic (`frag`) or node choice (`place`).

use crate::fgd::frag::{ShapeFit, fit_of, fragmentation, gradient_score, refit};
use crate::fgd::memo::{Memo, MemoKey};
use crate::fgd::target::{ResolvedShape, Target, derive_target, resolve};
use crate::node_view::{ClusterView, GpuFree};
use crate::shape::{PodKind, PodShape};
use gantry_sdk::{Cycle, Job, MILLI_PER_GPU, RunningJob};

/// FGD's per-plugin state: target, resolved shapes, memo and scratch buffers.
#[derive(Debug, Default)]
pub struct FgdScorer {
    configured: Option<Target>,
    shapes: Vec<ResolvedShape>,
    memo: Memo,
    fits: Vec<ShapeFit>,
    changed: Vec<(u8, u32, u32)>,
}

impl FgdScorer {
    /// Uses `target` (or, when `None`, a target derived in every call).
    pub fn set_target(&mut self, target: Option<Target>) {
        self.configured = target;
        self.shapes.clear();
        self.memo.clear();
    }

    /// Resolves the target for this call; clears the memo when it changed.
    pub fn prepare(&mut self, ctx: &Cycle, jobs: &[Job], running: &[RunningJob]) {
        let shapes = match &self.configured {
            Some(t) => resolve(ctx, t),
            None => resolve(ctx, &derive_target(ctx, jobs, running)),
        };
        if shapes != self.shapes {
            self.shapes = shapes;
            self.memo.clear();
        }
    }

    /// The shapes in use.
    pub fn shapes(&self) -> &[ResolvedShape] {
        &self.shapes
    }

    /// The FGD score of `pod` on feasible node `i`, and the position of the GPU a
    /// sharing pod takes (0 otherwise).
    pub fn score(&mut self, view: &ClusterView, i: usize, pod: &PodShape) -> (i64, usize) {
        let node = &view.nodes()[i];
        let gpus = view.gpus(i);
        let key = MemoKey::new(node, gpus, pod);
        if let Some(hit) = key.as_ref().and_then(|k| self.memo.get(k)) {
            return hit;
        }
        let result = evaluate(
            &self.shapes,
            &mut self.fits,
            &mut self.changed,
            node.cpu,
            gpus,
            pod,
        );
        if let Some(k) = key {
            self.memo.put(k, result.0, result.1);
        }
        result
    }
}

/// The FGD score of `pod` on a node with free CPU `cpu` and `gpus` (the pod fits), and
/// the GPU position a sharing pod takes. `fits` and `changed` are scratch buffers.
pub fn evaluate(
    shapes: &[ResolvedShape],
    fits: &mut Vec<ShapeFit>,
    changed: &mut Vec<(u8, u32, u32)>,
    cpu: u32,
    gpus: &[GpuFree],
    pod: &PodShape,
) -> (i64, usize) {
    let total: u64 = gpus.iter().map(|g| u64::from(g.free)).sum();
    fits.clear();
    fits.extend(shapes.iter().map(|s| {
        if s.cpu_only {
            ShapeFit::default()
        } else {
            fit_of(s, gpus)
        }
    }));
    let fits: &[ShapeFit] = fits;
    let cpu = i64::from(cpu);
    let before = fragmentation(shapes, cpu, total, |t, _| fits[t]);
    let cpu_after = cpu - i64::from(pod.cpu);
    let after = |changed: &[(u8, u32, u32)], total_after: u64| {
        fragmentation(shapes, cpu_after, total_after, |t, s| {
            refit(s, fits[t], changed)
        })
    };
    match pod.kind {
        PodKind::CpuOnly => (gradient_score(before, after(&[], total)), 0),
        PodKind::Whole => {
            changed.clear();
            changed.extend(
                gpus.iter()
                    .filter(|g| g.free == MILLI_PER_GPU && pod.allows(g.model))
                    .take(pod.gpus as usize)
                    .map(|g| (g.model, g.free, 0)),
            );
            let taken = changed.len() as u64 * u64::from(MILLI_PER_GPU);
            (
                gradient_score(before, after(changed, total.saturating_sub(taken))),
                0,
            )
        }
        PodKind::Sharing => {
            // One evaluation per distinct (free, model); the lowest index wins ties.
            let mut seen: Vec<(u32, u8, i64)> = Vec::new();
            let mut best: Option<(i64, usize)> = None;
            for (p, g) in gpus.iter().enumerate() {
                if g.free < pod.milli || !pod.allows(g.model) {
                    continue;
                }
                let s = match seen.iter().find(|x| x.0 == g.free && x.1 == g.model) {
                    Some(x) => x.2,
                    None => {
                        let change = [(g.model, g.free, g.free - pod.milli)];
                        let s =
                            gradient_score(before, after(&change, total - u64::from(pod.milli)));
                        seen.push((g.free, g.model, s));
                        s
                    }
                };
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, p));
                }
            }
            best.unwrap_or((0, 0))
        }
    }
}
