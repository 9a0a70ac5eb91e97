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

use crate::fgd::derive::RunningShapes;
use crate::fgd::frag::{Room, ShapeFit, fine_score, fit_of, fragmentation, gradient_score, refit};
use crate::fgd::memo::{Memo, MemoKey};
use crate::fgd::target::{ResolvedShape, Target, resolve};
use crate::node_view::{ClusterView, GpuFree};
use crate::shape::{PodKind, PodShape};
use gantry_sdk::{Cycle, Job, MILLI_PER_GPU, RunningJob};

/// How a [`FgdScorer`] measures. The default is FGD as published: CPU and GPU only, the
/// score `trunc(100·sigmoid(−ΔF/1000))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    /// Memory counts like CPU: a shape whose memory does not fit cannot use the node's GPUs.
    pub memory: bool,
    /// The score is `trunc(100·sigmoid(−ΔF/scale))` (FGD: 1000); 0 scores the exact `−ΔF`
    /// ([`fine_score`]).
    pub scale: u32,
}

impl Default for Measure {
    fn default() -> Self {
        Self {
            memory: false,
            scale: 1000,
        }
    }
}

impl Measure {
    /// The score of `F` going from `before` to `after` (larger is better).
    pub fn score(self, before: f64, after: f64) -> i64 {
        match self.scale {
            0 => fine_score(before, after),
            1000 => gradient_score(before, after),
            s => gradient_score(
                before / f64::from(s) * 1000.0,
                after / f64::from(s) * 1000.0,
            ),
        }
    }

    /// A node's room: its CPU, and its memory when memory counts.
    fn room(self, cpu: u32, memory_mib: u64) -> Room {
        let room = Room::from(cpu);
        if !self.memory {
            return room;
        }
        Room {
            memory: i64::try_from(memory_mib).unwrap_or(i64::MAX / 2),
            ..room
        }
    }
}

/// FGD's per-plugin state: target, resolved shapes, memo and scratch buffers.
#[derive(Debug, Default)]
pub struct FgdScorer {
    measure: Measure,
    configured: Option<Target>,
    shapes: Vec<ResolvedShape>,
    memo: Memo,
    fits: Vec<ShapeFit>,
    changed: Vec<(u8, u32, u32)>,
    running: RunningShapes,
}

impl FgdScorer {
    /// Uses `target` (or, when `None`, a target derived in every call).
    pub fn set_target(&mut self, target: Option<Target>) {
        self.configured = target;
        self.shapes.clear();
        self.memo.clear();
        // Calls under a configured target do not count the running jobs: start over.
        self.running = RunningShapes::default();
    }

    /// Measures with `measure` from now on.
    pub fn set_measure(&mut self, measure: Measure) {
        self.measure = measure;
        self.memo.clear();
    }

    /// Resolves the target for this call; clears the memo when it changed. `kept` is the
    /// call's hint for `running` (`gantry_sdk::changes`), if any.
    pub fn prepare(
        &mut self,
        ctx: &Cycle,
        jobs: &[Job],
        running: &[RunningJob],
        kept: Option<&[u32]>,
    ) {
        let shapes = match &self.configured {
            Some(t) => resolve(ctx, t),
            None => {
                self.running.update(ctx, running, kept);
                resolve(ctx, &self.running.target_with(ctx, jobs))
            }
        };
        self.use_shapes(shapes);
    }

    /// Uses `shapes` as the target; clears the memo when they changed.
    pub fn use_shapes(&mut self, shapes: Vec<ResolvedShape>) {
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
        let with_memory = self.measure.memory;
        let key = MemoKey::new(node, gpus, pod, with_memory);
        if let Some(hit) = key.as_ref().and_then(|k| self.memo.get(k)) {
            return hit;
        }
        let result = evaluate_with(
            &self.shapes,
            &mut self.fits,
            &mut self.changed,
            Scoring {
                room: self.measure.room(node.cpu, node.memory_mib),
                pod_memory: if with_memory { pod.memory_mib } else { 0 },
                measure: self.measure,
            },
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
    let scoring = Scoring {
        room: Room::from(cpu),
        pod_memory: 0,
        measure: Measure::default(),
    };
    evaluate_with(shapes, fits, changed, scoring, gpus, pod)
}

/// What one evaluation measures against: the node's room, the memory the pod takes from
/// it (0 when memory is not counted) and the score of `F` before and after.
#[derive(Debug, Clone, Copy)]
pub struct Scoring {
    /// The node's free CPU and memory.
    pub room: Room,
    /// Memory the pod takes, MiB.
    pub pod_memory: u64,
    /// How a change of `F` scores.
    pub measure: Measure,
}

/// [`evaluate`] with a given [`Scoring`].
pub fn evaluate_with(
    shapes: &[ResolvedShape],
    fits: &mut Vec<ShapeFit>,
    changed: &mut Vec<(u8, u32, u32)>,
    scoring: Scoring,
    gpus: &[GpuFree],
    pod: &PodShape,
) -> (i64, usize) {
    let gradient_score = |before, after| scoring.measure.score(before, after);
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
    let before = fragmentation(shapes, scoring.room, total, |t, _| fits[t]);
    let room_after = scoring.room.minus(
        i64::from(pod.cpu),
        i64::try_from(scoring.pod_memory).unwrap_or(i64::MAX / 2),
    );
    let after = |changed: &[(u8, u32, u32)], total_after: u64| {
        fragmentation(shapes, room_after, total_after, |t, s| {
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
